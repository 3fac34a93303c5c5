"""Running faust-streaming applications on sluicegate (``pip install sluicegate[faust]``).

``sluicegate faust run myapp:app`` (or ``sluicegate worker --pipeline myapp:app``) reads the
faust ``App``'s agents, topics, codecs and tables without starting any of faust, and runs them as
a sluicegate job: barrier checkpoints, tables as keyed state in RocksDB, exactly-once sinks.
``sluicegate faust check myapp:app`` lists what maps to what and what is refused. docs/faust.md
is the migration guide.

Only this package imports faust; the engine never does. Its modules:

* `stepping`: the sans-IO core, an agent's coroutine stepped one record at a time;
* `reading`: the ``App`` read into a `plan.FaustPlan`, unsupported features refused by line;
* `binding`: the app's producer and tables bound to the record being stepped;
* `batching`: the sans-IO rule of ``stream.take``; `takes`: its buffer in keyed state;
* `ticking`: the sans-IO rule of ``app.timer`` and ``app.crontab``; `timers`: their operator;
* `operators`: the agent, take and group-by operators; `building`: the plan as a `Pipeline`.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Any

from sluicegate.faust_adapter.building import build_pipeline
from sluicegate.faust_adapter.exceptions import (
    AgentStepError,
    NotAFaustAppError,
    UnsupportedFeatureError,
)
from sluicegate.faust_adapter.plan import FaustPlan
from sluicegate.faust_adapter.reading import read_app
from sluicegate.faust_adapter.timers import scheduled_tick
from sluicegate.operators.pipeline import Pipeline

__all__ = [
    "AgentStepError",
    "FaustPlan",
    "NotAFaustAppError",
    "UnsupportedFeatureError",
    "build_pipeline",
    "pipeline_of",
    "read_app",
    "scheduled_tick",
]


def pipeline_of(
    app: Any,
    *,
    modules: Iterable[types.ModuleType] = (),
    parallelism: int = 1,
    name: str | None = None,
) -> Pipeline:
    """The sluicegate pipeline that runs ``app``; raises `UnsupportedFeatureError` naming the
    feature and line of anything it does not run."""
    return build_pipeline(read_app(app, modules=modules, pipeline=name), parallelism=parallelism)

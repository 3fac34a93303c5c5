"""``sluicegate faust run|check myapp:app``: a faust-streaming application on sluicegate.

* ``check`` reads the ``faust.App`` (nothing of faust is started) and prints what maps to what:
  each agent's operators, each topic's kind, each table, and every feature refused, with its
  source line; exit 1 when something is refused.
* ``run`` is ``sluicegate up --pipeline myapp:app`` (a coordinator and workers on this machine,
  with the development broker unless one is configured): refused features stop it before
  anything starts. For a cluster, ``sluicegate coordinator`` and ``sluicegate worker`` take
  ``--pipeline myapp:app`` the same way.

Both need the extra: ``pip install 'sluicegate[faust]'``.
"""

from __future__ import annotations

import argparse
from typing import Any

from sluicegate.cli.loader import is_faust_app, load_module_attribute
from sluicegate.cli.processes import add_up_flags, run_up
from sluicegate.operators.exceptions import ConfigError

__all__ = ["register"]

_APP_HELP = "the faust application as module:attribute (e.g. myapp:app)"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``faust run`` and ``faust check``."""
    faust = commands.add_parser("faust", help="run a faust-streaming application on sluicegate")
    verbs = faust.add_subparsers(required=True, metavar="VERB")
    check = verbs.add_parser("check", help="list what maps to sluicegate and what is refused")
    check.add_argument("app", help=_APP_HELP)
    check.set_defaults(run=_check)
    run = verbs.add_parser("run", help="run it: a coordinator and workers on this machine")
    run.add_argument("app", help=_APP_HELP)
    add_up_flags(run)
    run.set_defaults(run=_run)


def _app(spec: str) -> tuple[object, object]:
    module, app = load_module_attribute(spec)
    if not is_faust_app(app):
        raise ConfigError("APP", f"{spec} is a {type(app).__name__}, not a faust.App")
    try:
        import faust  # noqa: F401 - only to say how to get it
    except ImportError as exc:  # pragma: no cover - the dev environment has the extra
        raise ConfigError("APP", "faust is not installed: pip install 'sluicegate[faust]'") from exc
    return module, app


def _check(args: argparse.Namespace) -> int:
    from sluicegate.faust_adapter import build_pipeline, read_app

    module, app = _app(args.app)
    plan = read_app(app, modules=[module])  # type: ignore[list-item]
    print(f"pipeline {plan.pipeline} (from faust app {plan.app.conf.id})")
    for agent in plan.agents:
        print(f"  agent {agent.name} ({agent.where})")
        if agent.repartition is not None:
            print(
                f"    operator {agent.uid}.group-by: {agent.source.name} -> "
                f"{agent.repartition.topic.name} (group_by at {agent.repartition.where})"
            )
        outputs = ", ".join((*agent.sends, *agent.sinks)) or "nothing"
        print(f"    operator {agent.uid}: {agent.body_input.name} -> {outputs}")
        if agent.take is not None:
            take = agent.take
            within = f"within {take.within_s:g} s" if take.within_s else "no deadline"
            print(
                f"    stream.{take.kind}: up to {take.max_} values per batch, {within}, per "
                f"input partition, buffered in keyed state rows faust-take/ ({take.where})"
            )
    for table in plan.tables:
        print(f"  table {table.name}: keyed state rows faust-table/{table.name}/"
              f"{_rows_of(table.table)} ({table.where})")  # fmt: skip
    for timer in plan.timers:
        outputs = ", ".join(timer.sends) or "nothing"
        print(f"  {timer.kind} {timer.name} ({timer.where})")
        print(f"    operator {timer.uid}: {plan.clock_topic} -> {outputs}, once per tick of "
              f"{_schedule_of(timer.schedule)}")  # fmt: skip
    if plan.refusals:
        print("refused (not supported yet; docs/faust.md):")
        for refusal in plan.refusals:
            print(
                f"  {refusal.where}: {refusal.feature}"
                + (f" ({refusal.hint})" if refusal.hint else "")
            )
        return 1
    pipeline = build_pipeline(plan)
    print("topics:")
    for topic in pipeline.topics.values():
        print(f"  {topic.name}: {topic.kind.value}, {topic.partitions} partitions")
    pipeline.build()
    print("ok: sluicegate runs every part of it")
    return 0


def _run(args: argparse.Namespace) -> int:
    _app(args.app)
    args.pipeline = args.app
    return run_up(args)


def _schedule_of(schedule: Any) -> str:
    seconds = getattr(schedule, "seconds", None)
    if seconds is not None:
        return f"every {seconds:g} s since the epoch"
    return f"crontab {schedule.spec!r} in {schedule.timezone}"


def _rows_of(table: Any) -> str:
    """A table's row keys, and its window if it has one (a refused one: its type)."""
    window = getattr(table, "window", None)
    if window is None:
        return "<key>"
    size, step = getattr(window, "size", None), getattr(window, "step", None)
    if size is None or step is None:
        return f"(<key>, (<start>, <end>)): {type(window).__name__}"
    kind = f"tumbling {size:g} s" if size == step else f"hopping {size:g} s every {step:g} s"
    expires = f", expires {window.expires:g} s" if window.expires else ""
    return f"(<key>, (<start>, <end>)): {kind}{expires}"

"""Timers as faust's documentation uses them: ``@app.timer(interval=...)`` sending a
``faust.Record`` to a topic, and ``@app.crontab(...)`` (a function that takes the app) sending
to an agent, which counts the ticks in a table and sends each tick with its count on.

Each tick is labelled with the instant it was scheduled for: sluicegate's `scheduled_tick`,
or the wall clock under faust itself (which has no such instant). Topics ``ticks-<tag>``,
``cron-<tag>`` (the agent's) and ``cron-counts-<tag>``; the module-level ``app`` reads
``FAUST_APP_TAG`` and ``FAUST_APP_BROKER`` like `tests.faust_apps.wordcount`.
"""

from __future__ import annotations

import os
import time
from typing import Any

import faust

from sluicegate.faust_adapter import scheduled_tick

INTERVAL_S = 1.0
CRON = "* * * * * *"  # every second (croniter's sixth field: seconds)


class Tick(faust.Record, serializer="json"):
    tick: float


class Counted(faust.Record, serializer="json"):
    tick: float
    n: int


def _tick() -> float:
    tick = scheduled_tick()
    return time.time() if tick is None else tick


def make_app(
    tag: str, broker: str = "kafka://127.0.0.1:9092", interval: float = INTERVAL_S,
    cron: str = CRON,
) -> Any:  # fmt: skip
    app = faust.App(
        f"faust-ticks-{tag}", broker=broker, store="rocksdb://", topic_partitions=2,
        datadir=f"/tmp/faust-ticks-{tag}", web_enabled=False,
        consumer_auto_offset_reset="earliest", processing_guarantee="exactly_once",
    )  # fmt: skip
    ticks = app.topic(f"ticks-{tag}", value_type=Tick)
    counted = app.topic(f"cron-counts-{tag}", value_type=Counted)
    seen = app.Table(f"cron-seen-{tag}", default=int)

    @app.timer(interval=interval)  # type: ignore[untyped-decorator]
    async def every_interval() -> None:
        await ticks.send(value=Tick(tick=_tick()))

    @app.agent(app.topic(f"cron-{tag}", value_type=Tick))
    async def count_cron(stream: Any) -> None:
        async for tick in stream:
            seen["cron"] += 1
            await counted.send(key="cron", value=Counted(tick=tick.tick, n=seen["cron"]))

    @app.crontab(cron)
    async def every_second(app: Any) -> None:
        await count_cron.send(key="cron", value=Tick(tick=_tick()))

    return app


app = make_app(
    os.environ.get("FAUST_APP_TAG", "demo"),
    os.environ.get("FAUST_APP_BROKER", "kafka://127.0.0.1:9092"),
)

"""Batches of numbers, as faust's documentation uses ``stream.take``: an agent that reads up to
10 numbers at a time, or what came within a second, and sends each batch's count and sum (and
its numbers, for the tests to check each one is counted once) to an output topic as a
``faust.Record``.

Topics ``numbers-<tag>`` (json ints) and ``batch-sums-<tag>``; the module-level ``app`` reads
``FAUST_APP_TAG`` and ``FAUST_APP_BROKER`` like `tests.faust_apps.wordcount`.
"""

from __future__ import annotations

import os
from typing import Any

import faust

MAX_BATCH = 10
WITHIN_S = 1.0


class BatchSum(faust.Record, serializer="json"):
    count: int
    total: int
    numbers: list[int]


def make_app(
    tag: str, broker: str = "kafka://127.0.0.1:9092", data_dir: str = "", within: float = WITHIN_S
) -> Any:
    app = faust.App(
        f"faust-batches-{tag}", broker=broker, store="rocksdb://", topic_partitions=4,
        datadir=data_dir or f"/tmp/faust-batches-{tag}", web_enabled=False,
        consumer_auto_offset_reset="earliest", processing_guarantee="exactly_once",
    )  # fmt: skip
    numbers = app.topic(f"numbers-{tag}")
    sums = app.topic(f"batch-sums-{tag}", value_type=BatchSum)

    @app.agent(numbers)
    async def sum_batches(stream: Any) -> None:
        async for batch in stream.take(MAX_BATCH, within=within):
            await sums.send(value=BatchSum(count=len(batch), total=sum(batch), numbers=batch))

    return app


app = make_app(
    os.environ.get("FAUST_APP_TAG", "demo"),
    os.environ.get("FAUST_APP_BROKER", "kafka://127.0.0.1:9092"),
    os.environ.get("FAUST_APP_DATA_DIR", ""),
)

"""A table of account totals, as faust's documentation writes one: ``faust.Record`` deposits
(json), regrouped by a field (``stream.group_by(Deposit.account)``), summed in
``app.Table(default=int)``, and each new total ``yield``ed to the agent's sink as a
``faust.Record``.

Topics ``deposits-<tag>`` and ``totals-<tag>``; the module-level ``app`` reads
``FAUST_APP_TAG`` and ``FAUST_APP_BROKER`` like `tests.faust_apps.wordcount`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import faust


class Deposit(faust.Record, serializer="json"):
    account: str
    amount: int


class Total(faust.Record, serializer="json"):
    account: str
    total: int


def make_app(tag: str, broker: str = "kafka://127.0.0.1:9092", data_dir: str = "") -> Any:
    app = faust.App(
        f"faust-accounts-{tag}", broker=broker, store="rocksdb://", topic_partitions=4,
        datadir=data_dir or f"/tmp/faust-accounts-{tag}", web_enabled=False,
        consumer_auto_offset_reset="earliest", processing_guarantee="exactly_once",
        broker_commit_interval=1.0,
    )  # fmt: skip
    deposits = app.topic(f"deposits-{tag}", value_type=Deposit)
    totals_topic = app.topic(f"totals-{tag}", key_type=str, value_type=Total)
    totals = app.Table("totals", default=int)

    @app.agent(deposits, sink=[totals_topic])
    async def add_deposits(stream: Any) -> AsyncIterator[Total]:
        async for deposit in stream.group_by(Deposit.account):
            totals[deposit.account] += deposit.amount
            yield Total(account=deposit.account, total=totals[deposit.account])

    return app


app = make_app(
    os.environ.get("FAUST_APP_TAG", "demo"),
    os.environ.get("FAUST_APP_BROKER", "kafka://127.0.0.1:9092"),
    os.environ.get("FAUST_APP_DATA_DIR", ""),
)

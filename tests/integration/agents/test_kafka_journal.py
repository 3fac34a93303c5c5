"""The Kafka journal on the real broker: what survives a restart, what a rebuild skips."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from sluicegate.agents.journal import (
    EffectKind,
    JournalEntry,
    OnUnknown,
    Replay,
    decide,
    effect_key,
    record_key,
)
from sluicegate.agents.journal.kafka import KafkaJournal
from tests.conftest import TopicFactory

COMPACT = {"cleanup.policy": "compact"}
JournalFactory = Callable[..., Any]


def entry(run_id: str, step: int, status: str, **fields: Any) -> JournalEntry:
    base = {
        "key": effect_key(run_id, step, 0),
        "run_id": run_id,
        "status": status,
        "kind": EffectKind.TOOL,
        "name": "refund",
        "attempt": 1,
        "written_at": 1.0,
    }
    return JournalEntry.model_validate(base | fields)


@pytest.fixture
async def open_journal(kafka_bootstrap: str) -> AsyncIterator[JournalFactory]:
    """Factory: ``await open_journal(topic, [0, 1])`` starts a journal, stopped at teardown."""
    started: list[KafkaJournal] = []

    async def open_(topic: str, partitions: list[int]) -> KafkaJournal:
        journal = KafkaJournal(kafka_bootstrap, topic, partitions)
        await journal.start()
        started.append(journal)
        return journal

    try:
        yield open_
    finally:
        for journal in started:
            await journal.stop()


async def test_a_restarted_journal_rebuilds_only_its_partitions(
    new_topic: TopicFactory, open_journal: JournalFactory
) -> None:
    topic = await new_topic(3, hint="journal", **COMPACT)
    first: KafkaJournal = await open_journal(topic, [0, 1, 2])
    assert first.entries_by_status() == {"issued": 0, "done": 0}
    a_issued, a_done = entry("a", 0, "issued", request={"x": 1}), entry("a", 0, "done", result=2)
    b_issued = entry("b", 0, "issued")
    await first.write(a_issued, partition=0)
    await first.write(a_done, partition=0)
    await first.write(b_issued, partition=1)
    await first.stop()

    only_0: KafkaJournal = await open_journal(topic, [0])
    assert only_0.get(a_issued.key) == (a_issued, a_done)
    assert only_0.get(b_issued.key) == (None, None)
    assert only_0.entries_by_status() == {"issued": 0, "done": 1}

    rest: KafkaJournal = await open_journal(topic, [1, 2])  # partition 2 is empty
    assert rest.get(b_issued.key) == (b_issued, None)
    assert rest.get(a_issued.key) == (None, None)
    assert rest.entries_by_status() == {"issued": 1, "done": 0}
    assert rest.corrupt_records == 0
    with pytest.raises(ValueError, match="not 0"):
        await rest.write(a_issued, partition=0)


async def test_forget_run_tombstones_are_honoured_by_a_rebuild(
    new_topic: TopicFactory, open_journal: JournalFactory
) -> None:
    topic = await new_topic(2, hint="journal", **COMPACT)
    journal: KafkaJournal = await open_journal(topic, [0, 1])
    for step in range(2):
        await journal.write(entry("gone", step, "issued"), partition=1)
        await journal.write(entry("gone", step, "done"), partition=1)
    kept = entry("kept", 0, "done")
    await journal.write(kept, partition=1)

    assert await journal.forget_run("gone", partition=1) == 4
    assert journal.get(effect_key("gone", 0, 0)) == (None, None)
    assert await journal.forget_run("gone", partition=1) == 0

    rebuilt: KafkaJournal = await open_journal(topic, [0, 1])
    assert rebuilt.get(effect_key("gone", 0, 0)) == (None, None)
    assert rebuilt.get(effect_key("gone", 1, 0)) == (None, None)
    assert rebuilt.get(kept.key) == (None, kept)
    assert rebuilt.entries_by_status() == {"issued": 0, "done": 1}


async def test_a_late_issued_never_hides_done(
    new_topic: TopicFactory, open_journal: JournalFactory
) -> None:
    topic = await new_topic(1, hint="journal", **COMPACT)
    journal: KafkaJournal = await open_journal(topic, [0])
    done = entry("r", 0, "done", result="refunded")
    late = entry("r", 0, "issued", attempt=2)  # a zombie of an older step issues again
    await journal.write(entry("r", 0, "issued"), partition=0)
    await journal.write(done, partition=0)
    await journal.write(late, partition=0)
    assert journal.get(done.key) == (late, done)

    rebuilt: KafkaJournal = await open_journal(topic, [0])
    issued, found = rebuilt.get(done.key)
    assert (issued, found) == (late, done)
    assert decide(issued, found, OnUnknown.FAIL) == Replay(done)
    assert rebuilt.entries_by_status() == {"issued": 0, "done": 1}


async def test_records_that_do_not_decode_are_skipped_and_counted(
    kafka_bootstrap: str,
    new_topic: TopicFactory,
    open_journal: JournalFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = await new_topic(1, hint="journal", **COMPACT)
    good = entry("g", 0, "done", result=[1, 2])
    newer = json.loads(entry("n", 0, "done").encode()) | {"schema_version": 9}
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        records: list[tuple[bytes | None, bytes]] = [
            (record_key("x/0/0", "done"), b"\x00garbage"),  # offset 0
            (b"no-status-here", good.encode()),  # offset 1
            (record_key("n/0/0", "done"), json.dumps(newer).encode()),  # offset 2
            (record_key("other/0/0", "done"), good.encode()),  # offset 3: under a wrong key
            (record_key(good.key, "done"), good.encode()),  # offset 4
        ]
        for key, value in records:
            await producer.send_and_wait(topic, value, key=key, partition=0)
    finally:
        await producer.stop()

    with caplog.at_level(logging.WARNING, logger="sluicegate.agents.journal.kafka"):
        journal: KafkaJournal = await open_journal(topic, [0])
    assert journal.corrupt_records == 4
    assert journal.get(good.key) == (None, good)
    assert journal.entries_by_status() == {"issued": 0, "done": 1}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4
    for offset, warning in enumerate(warnings):
        assert f"partition 0 offset {offset}:" in warning
    assert "schema_version 9 is newer" in warnings[2]


async def test_the_first_done_is_kept_when_two_writers_complete_one_effect(
    new_topic: TopicFactory, open_journal: JournalFactory
) -> None:
    topic = await new_topic(1, hint="journal", **COMPACT)
    retiring: KafkaJournal = await open_journal(topic, [0])
    current: KafkaJournal = await open_journal(topic, [0])  # its index predates both dones
    first = entry("r", 0, "done", result="refunded")
    later = entry("r", 0, "done", error="ValueError: 409: key already used", attempt=2)
    await retiring.write(entry("r", 0, "issued"), partition=0)
    await retiring.write(first, partition=0)
    await current.write(later, partition=0)
    await current.write(entry("r", 0, "done", result="third", attempt=2), partition=0)
    assert current.get(first.key)[1] == later  # not sent: a writer keeps its first done

    rebuilt: KafkaJournal = await open_journal(topic, [0])
    assert rebuilt.get(first.key)[1] == first


async def test_writes_in_flight_together_land_in_the_order_they_began(
    kafka_bootstrap: str, new_topic: TopicFactory, open_journal: JournalFactory
) -> None:
    topic = await new_topic(1, hint="journal", **COMPACT)
    journal: KafkaJournal = await open_journal(topic, [0])
    entries = [entry(f"run-{n}", 0, status) for n in range(20) for status in ("issued", "done")]
    # Every write is in flight at once (an issued with its done, concurrent runs).
    await asyncio.gather(*(journal.write(e, partition=0) for e in entries))
    assert journal.entries_by_status() == {"issued": 0, "done": 20}

    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
    try:
        await consumer.start()
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        keys: list[bytes | None] = []
        while len(keys) < len(entries):
            batches = await consumer.getmany(tp, timeout_ms=10_000)
            assert batches, f"only {len(keys)} of {len(entries)} records read"
            keys += [record.key for record in batches[tp]]
    finally:
        await consumer.stop()
    assert keys == [record_key(e.key, e.status) for e in entries]

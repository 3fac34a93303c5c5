"""SubtaskMetrics: names, labels, one set per registry, lag at most once a second, restore
duration once per start, gauges removed on close. No broker: a fake consumer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from aiokafka import TopicPartition
from prometheus_client import CollectorRegistry

from sluicegate.operators.metrics import LAG_EVERY_SECONDS, SubtaskInstruments, SubtaskMetrics

SUBTASK = {"pipeline": "p", "operator": "op", "subtask": "op#1"}


@dataclass
class FakeConsumer:
    """High watermarks and positions by partition; None: no fetch response yet."""

    highwaters: dict[TopicPartition, int | None]
    positions: dict[TopicPartition, int | None]
    """None: the position is being reset and is not known yet."""
    position_calls: list[TopicPartition] = field(default_factory=list)

    def assignment(self) -> set[TopicPartition]:
        return set(self.highwaters)

    def highwater(self, partition: TopicPartition) -> int | None:
        return self.highwaters[partition]

    async def position(self, partition: TopicPartition) -> int:
        self.position_calls.append(partition)
        position = self.positions[partition]
        if position is None:
            await asyncio.Event().wait()  # what aiokafka does until the reset is done
        assert position is not None
        return position


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def instruments(registry: CollectorRegistry, clock: Clock) -> SubtaskInstruments:
    return SubtaskMetrics.of(registry).bind("p", "op", "op#1", clock=clock)


def lag(registry: CollectorRegistry, topic: str, partition: int) -> float | None:
    labels = {**SUBTASK, "topic": topic, "partition": str(partition)}
    return registry.get_sample_value("sluicegate_consumer_lag_records", labels)


def test_one_set_of_metrics_per_registry(registry: CollectorRegistry) -> None:
    assert SubtaskMetrics.of(registry) is SubtaskMetrics.of(registry)
    assert SubtaskMetrics.of(registry) is not SubtaskMetrics.of(CollectorRegistry())


def test_counters_carry_pipeline_operator_and_subtask(
    registry: CollectorRegistry, instruments: SubtaskInstruments
) -> None:
    instruments.records_in.inc(3)
    instruments.records_out.inc(2)
    instruments.dead_letters.inc()
    other = SubtaskMetrics.of(registry).bind("p", "op", "op#0")
    other.records_in.inc()

    value = registry.get_sample_value
    assert value("sluicegate_records_in_total", SUBTASK) == 3
    assert value("sluicegate_records_out_total", SUBTASK) == 2
    assert value("sluicegate_dead_letters_total", SUBTASK) == 1
    assert value("sluicegate_records_in_total", {**SUBTASK, "subtask": "op#0"}) == 1


async def test_the_first_fetch_after_start_observes_the_restore_duration(
    registry: CollectorRegistry, instruments: SubtaskInstruments, clock: Clock
) -> None:
    consumer = FakeConsumer({}, {})
    instruments.start()
    clock.now += 2.0
    await instruments.on_fetch(consumer, buffered=0)
    clock.now += 5.0
    await instruments.on_fetch(consumer, buffered=0)

    labels = {"pipeline": "p", "operator": "op"}
    value = registry.get_sample_value
    assert value("sluicegate_restore_duration_seconds_count", labels) == 1
    assert value("sluicegate_restore_duration_seconds_sum", labels) == pytest.approx(2.0)
    assert value("sluicegate_restore_duration_seconds_bucket", {**labels, "le": "1.0"}) == 0
    assert value("sluicegate_restore_duration_seconds_bucket", {**labels, "le": "2.5"}) == 1


def lag_sum(instruments: SubtaskInstruments) -> int | None:
    """The lag the heartbeat reports (a call, so each read is a fresh value to mypy)."""
    return instruments.lag_records


async def test_lag_is_highwater_minus_position_at_most_once_a_second(
    registry: CollectorRegistry, instruments: SubtaskInstruments, clock: Clock
) -> None:
    a0, a1 = TopicPartition("a", 0), TopicPartition("a", 1)
    consumer = FakeConsumer({a0: 10, a1: None}, {a0: 4, a1: 0})
    instruments.start()
    assert lag_sum(instruments) is None  # not read yet: the heartbeat says nothing
    await instruments.on_fetch(consumer, buffered=0)
    assert lag(registry, "a", 0) == 6
    assert lag(registry, "a", 1) is None  # no fetch response for it yet
    assert lag_sum(instruments) == 6
    assert consumer.position_calls == [a0]

    consumer.highwaters = {a0: 12, a1: 3}
    consumer.positions = {a0: 12, a1: 1}
    clock.now += LAG_EVERY_SECONDS / 2
    await instruments.on_fetch(consumer, buffered=0)
    assert lag(registry, "a", 0) == 6  # too soon: not read again
    assert consumer.position_calls == [a0]

    clock.now += LAG_EVERY_SECONDS / 2
    await instruments.on_fetch(consumer, buffered=0)
    assert (lag(registry, "a", 0), lag(registry, "a", 1)) == (0, 2)
    assert lag_sum(instruments) == 2  # the heartbeat's sum over the partitions


async def test_close_removes_the_gauges_and_keeps_the_counters(
    registry: CollectorRegistry, instruments: SubtaskInstruments
) -> None:
    consumer = FakeConsumer({TopicPartition("a", 0): 5}, {TopicPartition("a", 0): 5})
    instruments.start()
    instruments.records_in.inc()
    await instruments.on_fetch(consumer, buffered=7)
    assert registry.get_sample_value("sluicegate_barrier_buffered_records", SUBTASK) == 7
    assert lag(registry, "a", 0) == 0

    instruments.close()
    assert registry.get_sample_value("sluicegate_barrier_buffered_records", SUBTASK) is None
    assert lag(registry, "a", 0) is None
    assert lag_sum(instruments) is None
    assert registry.get_sample_value("sluicegate_records_in_total", SUBTASK) == 1


def test_each_ack_observes_every_phase(
    registry: CollectorRegistry, instruments: SubtaskInstruments
) -> None:
    instruments.on_ack(alignment_seconds=0.02, sync_seconds=0.004, async_seconds=1.5)
    instruments.on_ack(alignment_seconds=-0.001, sync_seconds=0.004, async_seconds=0.3)

    def count(phase: str, le: str) -> float | None:
        labels = {"pipeline": "p", "operator": "op", "phase": phase, "le": le}
        return registry.get_sample_value("sluicegate_subtask_checkpoint_seconds_bucket", labels)

    assert (count("alignment", "0.005"), count("alignment", "0.025")) == (1, 2)
    assert count("sync", "0.005") == 2
    assert (count("async", "0.5"), count("async", "2.5")) == (1, 2)


async def test_a_partition_whose_position_is_being_reset_is_skipped(
    registry: CollectorRegistry, instruments: SubtaskInstruments
) -> None:
    a0, a1 = TopicPartition("a", 0), TopicPartition("a", 1)
    consumer = FakeConsumer({a0: 10, a1: 10}, {a0: None, a1: 7})
    instruments.start()
    await asyncio.wait_for(instruments.on_fetch(consumer, buffered=0), timeout=5)
    assert (lag(registry, "a", 0), lag(registry, "a", 1)) == (None, 3)

"""The engine's metrics on the real broker: a subtask that processed records reports records
in and out, consumer lag per input partition and its restore duration, labelled by pipeline,
operator and subtask; a restarted job observes a second restore; a stopped one drops its
gauges."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry

from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.contract import Context, Record
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.storage import open_storage
from sluicegate.testing import produce_lines
from tests.helpers import wait_for

RECORDS = 200


def echo_graph(tag: str) -> JobGraph:
    """``in-<tag>`` (2 partitions) → op (one subtask) → ``out-<tag>``, at least once."""

    def echo(record: Record, ctx: Context) -> None:
        ctx.emit(f"out-{tag}", record.value, key=record.key)

    p = Pipeline(f"p-{tag}")
    p.source(f"in-{tag}", partitions=2)
    p.sink(f"out-{tag}", partitions=1, exactly_once=False)
    p.operator("op", echo, inputs=f"in-{tag}", outputs=f"out-{tag}")
    return p.build()


async def wait_until(condition: Callable[[], bool], what: str, job: LocalJob) -> None:
    """Wait for ``condition``; raise the job's failure as soon as it has one."""

    def met() -> bool:
        if condition():
            return True
        job.raise_failure()
        return False

    await wait_for(met, timeout_s=60, what=what)


async def test_a_subtask_reports_records_lag_and_restore_duration(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph = echo_graph(tag)
    registry = CollectorRegistry()
    storage = open_storage(tmp_path / "storage")
    subtask = {"pipeline": graph.name, "operator": "op", "subtask": "op#0"}
    operator = {"pipeline": graph.name, "operator": "op"}

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {**subtask, **labels})

    def lag(partition: int) -> float | None:
        return value("sluicegate_consumer_lag_records", topic=f"in-{tag}", partition=str(partition))

    def restores() -> float:
        return registry.get_sample_value("sluicegate_restore_duration_seconds_count", operator) or 0

    def job() -> LocalJob:
        return LocalJob(
            graph,
            bootstrap=kafka_bootstrap,
            storage=storage,
            work_dir=tmp_path / "work",
            settings=CoordinatorSettings(interval_seconds=0.3),
            registry=registry,
        )

    first = job()
    await first.start()
    try:
        await produce_lines(kafka_bootstrap, f"in-{tag}", [f"line {i}" for i in range(RECORDS)])
        await wait_until(lambda: value("sluicegate_records_out_total") == RECORDS, "outs", first)
        # Caught up: the high watermark of both partitions equals the subtask's position.
        await wait_until(lambda: lag(0) == 0 and lag(1) == 0, "lag of every partition", first)
        await first.wait_for_checkpoints(1, timeout_s=60)
    finally:
        await first.crash()

    records_in = value("sluicegate_records_in_total")
    assert records_in is not None
    assert records_in >= RECORDS  # barriers count too
    assert value("sluicegate_dead_letters_total") == 0
    assert restores() == 1
    sync = registry.get_sample_value(
        "sluicegate_subtask_checkpoint_seconds_count", {**operator, "phase": "sync"}
    )
    assert sync is not None
    assert sync >= 1
    assert lag(0) is None  # the stopped subtask's gauges are gone
    assert value("sluicegate_barrier_buffered_records") is None

    second = job()  # restores the checkpoint of the first
    await second.start()
    try:
        assert second.restored_from is not None
        await wait_until(lambda: restores() == 2, "a second restore", second)
        await wait_until(lambda: lag(0) == 0 and lag(1) == 0, "lag after the restore", second)
        assert value("sluicegate_barrier_buffered_records") == 0
    finally:
        await second.crash()
    seconds = registry.get_sample_value("sluicegate_restore_duration_seconds_sum", operator)
    assert seconds is not None
    assert 0 < seconds < 120

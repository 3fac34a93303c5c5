"""The `Operator` lifecycle on the real engine: open re-schedules wake-ups from restored
state, wake-ups emit, snapshot and completion hooks are called in order, and a close that
raises still releases the state store (the next attempt in the same process opens it)."""

from __future__ import annotations

import uuid
from pathlib import Path

from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.contract import Context, OpenContext, Operator, Record
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.storage import open_storage
from tests.integration.test_subtask_records import consume, produce

EVENTS: list[str] = []


class Countdown(Operator):
    """Each record starts a countdown from its value; every wake-up counts one down and emits."""

    def __init__(self, out: str) -> None:
        self.out = out

    async def open(self, ctx: OpenContext) -> None:
        EVENTS.append("open")
        for topic, partition in ctx.input_partitions:
            for key, value in ctx.state(topic, partition).items():
                if int(value) > 0:
                    ctx.wake(topic, partition, key)

    def process(self, record: Record, ctx: Context) -> None:
        ctx.state.put(record.key or b"", record.value)
        ctx.wake(record.key or b"")

    def on_wake(self, key: bytes, ctx: Context) -> None:
        left = int(ctx.state.get(key) or b"0") - 1
        ctx.state.put(key, str(left).encode())
        ctx.emit(self.out, f"{key.decode()}:{left}".encode(), key=key)
        if left > 0:
            ctx.wake(key, after_s=0.01)

    def on_snapshot(self, checkpoint_id: int) -> None:
        EVENTS.append(f"snapshot {checkpoint_id}")

    async def on_completed(self, checkpoint_id: int) -> None:
        EVENTS.append(f"completed {checkpoint_id}")

    async def close(self) -> None:
        EVENTS.append("close")
        raise RuntimeError("close fails on purpose")


async def test_wake_ups_survive_a_crash_and_a_failing_close(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    source, sink = f"starts-{tag}", f"ticks-{tag}"
    p = Pipeline(f"lifecycle-{tag}")
    p.source(source, partitions=1)
    p.sink(sink, partitions=1)
    p.operator("countdown", factory=lambda: Countdown(sink), inputs=source, outputs=sink)
    graph = p.build()
    storage = open_storage(tmp_path / "storage")

    def job() -> LocalJob:
        return LocalJob(
            graph, bootstrap=kafka_bootstrap, storage=storage, work_dir=tmp_path / "work",
            settings=CoordinatorSettings(interval_seconds=0.2),
        )  # fmt: skip

    EVENTS.clear()
    first = job()
    await first.start()
    await produce(kafka_bootstrap, source, [(b"a", b"80", []), (b"b", b"50", [])])
    await first.wait_for_checkpoints(2, timeout_s=60)
    await first.crash()  # mid-countdown; close raises
    second = job()
    await second.start()  # opens the same RocksDB directory in this process
    try:
        ticks = await consume(kafka_bootstrap, sink, 1, 130, data_only=True)
        second.raise_failure()
    finally:
        await second.crash()

    values = [r.value.decode() for r in ticks]
    for key, start in (("a", 80), ("b", 50)):
        mine = [int(v.split(":")[1]) for v in values if v.startswith(f"{key}:")]
        assert mine == list(range(start - 1, -1, -1)), f"{key}: each tick exactly once"
    assert EVENTS.count("open") == 2
    assert EVENTS.count("close") == 2
    snapshots = [e for e in EVENTS if e.startswith("snapshot")]
    completed = [e for e in EVENTS if e.startswith("completed")]
    assert snapshots
    assert completed
    first_done = int(completed[0].split()[1])
    assert EVENTS.index(f"snapshot {first_done}") < EVENTS.index(f"completed {first_done}")

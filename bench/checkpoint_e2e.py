"""Checkpoint end-to-end duration and alignment time at a steady input rate, across processes.

    uv run python -m bench.checkpoint_e2e [--rate 10000] [--seconds 30] [--interval 1]

A coordinator (checkpoint every ``--interval`` s) and 2 workers (3 slots each) run as real
processes; the pipeline is source (4 partitions) → op1 → op2 → op3 → exactly-once sink, each
operator at parallelism 2 counting per key in its state (1,000 keys) and emitting. Once the
first checkpoint completed, a paced producer writes ``--rate`` records/s for ``--seconds`` s.

Retention keeps only 3 manifests and the coordinator has no flag to keep more, so manifests are
read as they complete (polled every 0.1 s). Per checkpoint: end-to-end = ``completed_at`` of the
manifest minus the trigger time, the modification time of ``checkpoints/<n>/_triggered`` (written
just before the source subtasks take their barriers; our `Storage` interface has no mtime, so the
file is stat'ed on disk: local storage only); alignment, sync and async seconds of the slowest
subtask. The checkpoints that count are those triggered while the producer ran (the run waits, up
to 2 minutes, for them to complete; aborted ones are not counted). Also printed: the input rate
achieved and, roughly, the rate op1 consumed (its ``R_p`` over the source between the first and
last such checkpoint). Prints a table; asserts nothing."""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench.processes import ProcessCluster, kafka_bootstrap
from bench.table import record, report_table
from sluicegate.operators.contract import Context, ProcessFunction, Record
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.kafka import clients as kafka_clients
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.storage import NotFoundError, open_storage
from sluicegate.operators.storage.layout import checkpoint_prefix
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

PARTITIONS = 4
KEYS = 1000


def three_operators(tag: str) -> JobGraph:
    """``src-<tag>`` → op1 → ``t1-<tag>`` → op2 → ``t2-<tag>`` → op3 → ``out-<tag>`` (sink)."""
    src, t1, t2, out = (f"{name}-{tag}" for name in ("src", "t1", "t2", "out"))

    def counting(output: str) -> ProcessFunction:
        def count(record: Record, ctx: Context) -> None:
            key = record.key or b""
            total = int(ctx.state.get(key) or b"0") + 1
            ctx.state.put(key, b"%d" % total)
            ctx.emit(output, record.value, key=key)

        return count

    p = Pipeline(f"e2e-{tag}")
    p.source(src, partitions=PARTITIONS)
    p.topic(t1, partitions=PARTITIONS)
    p.topic(t2, partitions=PARTITIONS)
    p.sink(out, partitions=PARTITIONS)
    p.operator("op1", counting(t1), inputs=src, outputs=t1, parallelism=2)
    p.operator("op2", counting(t2), inputs=t1, outputs=t2, parallelism=2)
    p.operator("op3", counting(out), inputs=t2, outputs=out, parallelism=2)
    return p.build()


@dataclass(frozen=True, slots=True)
class Observed:
    manifest: CheckpointManifest
    triggered_at: float

    @property
    def end_to_end(self) -> float:
        return self.manifest.completed_at - self.triggered_at

    def slowest(self) -> tuple[float, float, float]:
        """Alignment, sync and async seconds of the slowest subtask in each."""
        s = self.manifest.subtasks.values()
        return (
            max(x.alignment_seconds for x in s),
            max(x.sync_seconds for x in s),
            max(x.async_seconds for x in s),
        )

    def source_position(self, source: str) -> int:
        """Sum of ``R_p`` over the source partitions (op1's subtasks)."""
        return sum(
            sum(s.positions.get(source, {}).values()) for s in self.manifest.subtasks.values()
        )


async def watch(storage_dir: Path, seen: dict[int, Observed]) -> None:
    """Read every manifest as it completes, with its trigger time; until cancelled."""
    manifests = ManifestStore(open_storage(storage_dir))
    while True:
        for n in await manifests.completed():
            if n in seen:
                continue
            try:
                manifest = await manifests.load(n)
                triggered = storage_dir / checkpoint_prefix(n) / "_triggered"
                seen[n] = Observed(manifest, triggered.stat().st_mtime)
            except (NotFoundError, FileNotFoundError):
                continue  # retention was quicker
        await asyncio.sleep(0.1)


async def produce(bootstrap: str, topic: str, rate: int, seconds: float) -> tuple[int, float]:
    """Write ``rate`` records/s for ``seconds`` (a tick every 10 ms); (records, elapsed s)."""
    producer = kafka_clients.producer(bootstrap, enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        started = time.monotonic()
        sent = 0
        while (now := time.monotonic()) - started < seconds:
            due = min(int((now - started) * rate), int(seconds * rate))
            while sent < due:
                await producer.send(topic, b"v%d" % sent, key=b"k%d" % (sent % KEYS))
                sent += 1
            await asyncio.sleep(0.01)
        await producer.flush()
        return sent, time.monotonic() - started
    finally:
        await producer.stop()


async def bench(bootstrap: str, rate: int, seconds: float, interval: float) -> None:
    tag = uuid.uuid4().hex[:8]
    graph = three_operators(tag)
    await ensure_topics(bootstrap, graph)
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as tmp:
        root = Path(tmp)
        imports = "from bench.checkpoint_e2e import three_operators"
        with ProcessCluster(root, bootstrap, imports, f"three_operators({tag!r})") as cluster:
            cluster.start_coordinator(interval=interval)
            cluster.start_worker("w1", slots=3)
            cluster.start_worker("w2", slots=3)
            seen: dict[int, Observed] = {}
            watcher = asyncio.create_task(watch(cluster.storage_dir, seen))
            try:
                deadline = time.monotonic() + 120
                while not seen:
                    cluster.check_alive()
                    if time.monotonic() > deadline:
                        raise TimeoutError("no checkpoint completed within 120 s of the start")
                    await asyncio.sleep(0.1)
                wall_start = time.time()
                records, elapsed = await produce(bootstrap, f"src-{tag}", rate, seconds)
                wall_end = time.time()
                # At most one checkpoint is in flight: once one triggered after the end has
                # completed, every one triggered before it has completed or been aborted.
                deadline = time.monotonic() + 120
                while not any(o.triggered_at > wall_end for o in seen.values()):
                    cluster.check_alive()
                    if time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.1)
            finally:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
    window = [seen[n] for n in sorted(seen) if wall_start <= seen[n].triggered_at <= wall_end]
    notes = [f"{records:,} records in {elapsed:.1f}s: input rate {records / elapsed:,.0f}/s "
             f"(target {rate:,}/s); {len(window)} checkpoints triggered while producing "
             f"completed, interval {interval}s"]  # fmt: skip
    if len(window) >= 2:
        first, last = window[0], window[-1]
        moved = last.source_position(f"src-{tag}") - first.source_position(f"src-{tag}")
        op1_rate = moved / (last.triggered_at - first.triggered_at)
        notes.append(f"op1 consumed {op1_rate:,.0f} records/s (source R_p, first to last)")
    if not window:
        print(*notes, "no checkpoint completed while producing", sep="\n")
        return
    for o in window:
        alignment, sync, async_ = o.slowest()
        record("checkpoint_e2e", "checkpoint", checkpoint=o.manifest.checkpoint_id,
               at_s=o.triggered_at - wall_start, end_to_end_s=o.end_to_end,
               alignment_s=alignment, sync_s=sync, async_s=async_, rate=rate)  # fmt: skip
    metrics = {
        "end-to-end": [o.end_to_end for o in window],
        "alignment (slowest)": [o.slowest()[0] for o in window],
        "sync (slowest)": [o.slowest()[1] for o in window],
        "async (slowest)": [o.slowest()[2] for o in window],
    }
    rows = [
        (name, f"{_pct(v, 50) * 1000:.0f}", f"{_pct(v, 95) * 1000:.0f}", f"{max(v) * 1000:.0f}")
        for name, v in metrics.items()
    ]
    title = f"Checkpoint end-to-end at {rate:,} records/s, 2 worker processes"
    report_table("checkpoint_e2e", title, ("per checkpoint", "p50 ms", "p95 ms", "max ms"), rows,
                 notes)  # fmt: skip


def _pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000, help="records/s into the source")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to produce")
    parser.add_argument("--interval", type=float, default=1.0, help="checkpoint interval (s)")
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.ERROR)  # leader moves on new topics
    with kafka_bootstrap() as bootstrap:
        asyncio.run(bench(bootstrap, args.rate, args.seconds, args.interval))


if __name__ == "__main__":
    main()

"""Recovery time vs state size, local storage, with and without a local copy of the state.

    uv run python -m bench.recovery [--sizes-mb 10,100,1000] [--keys-per-record 1000]
                                    [--state-changelog]

The default takes about 2 minutes on 2 cores and needs about 4 GB of free disk in the
temporary folder at 1 GB (the database, checkpoint storage and a downloaded copy).

Per state size and per case, on fresh topics and storage: a coordinator (checkpoint every
second, heartbeat timeout 3 s) and one worker run as real processes; a pipeline of one keyed
operator (parallelism 1, source of 1 partition) builds the state, each source record
``"<first> <count>"`` writing ``count`` keys of 1,000 random (incompressible) bytes. Once a
completed checkpoint has consumed every build record (``R_p`` past the last one), the worker
gets SIGKILL, one more record goes to the source, and a worker is started again (the state
size shown is the ``full_bytes`` of the checkpoint it restores):

* **local copy: yes**: the same worker id, so the same state folder: restore hard-links the
  subtask's own local checkpoint;
* **local copy: no**: a new worker id with an empty state folder: restore downloads and
  verifies every file. The coordinator first has to notice the old worker is gone (its
  heartbeats stop: the 3 s timeout), where a restart under the same id is noticed on its
  first heartbeat; the ``kill→assign`` column holds that difference.

Measured: SIGKILL to the first record the process function sees after restore (the operator
writes that wall time to a file, once per process: no engine hook), and the pieces between,
from the restarted worker's log lines (ms resolution): ``assign`` (the worker got the new
attempt), ``fetch`` (local copy linked, or every file downloaded and verified), ``open`` (RocksDB
opened, producer and consumer started: "running at attempt"), then the first record. Also
every restart waits the coordinator's restart delay (0.5 s). Prints a table; asserts nothing.

``--state-changelog`` runs every case a second time with the worker's state changelog on
(architecture.md, "State changelog"): the checkpoint restored then holds the writes since the
last materialization as segments, replayed in ``open``; how many depends on when the
background materialization finished (the "segments MB" column).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import re
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench.processes import ProcessCluster, kafka_bootstrap, log_times
from bench.table import record, report_table
from sluicegate.operators.contract import Context, Record
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.kafka import clients as kafka_clients
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

VALUE_BYTES = 1000
SUBTASK = "store#0"


def state_graph(tag: str, marker_dir: str) -> JobGraph:
    """Source ``state-<tag>`` (1 partition) → ``store`` (parallelism 1), no outputs.

    ``"<first> <count>"`` writes keys ``first .. first+count-1``; any other value writes
    nothing. Async only to yield to the event loop while building. The first record a process
    sees leaves ``<marker_dir>/first-<pid>`` holding ``time.time()``.
    """
    first_seen = False

    async def store(record: Record, ctx: Context) -> None:
        nonlocal first_seen
        if not first_seen:
            first_seen = True
            stamp = repr(time.time())  # a tiny write, once: not worth a thread's latency
            Path(marker_dir, f"first-{os.getpid()}").write_text(stamp)  # noqa: ASYNC240
        parts = record.value.split()
        if len(parts) == 2:
            start, count = int(parts[0]), int(parts[1])
            for i in range(start, start + count):
                ctx.state.put(b"k%012d" % i, os.urandom(VALUE_BYTES))
                if i % 100 == 99:
                    # A subtask processes a fetched batch without yielding to the event loop
                    # (aiokafka hands it over whole); yield so the worker's heartbeats go out.
                    await asyncio.sleep(0)

    p = Pipeline(f"recovery-{tag}")
    p.source(f"state-{tag}", partitions=1)
    p.operator("store", store, inputs=f"state-{tag}", parallelism=1)
    return p.build()


@dataclass(frozen=True, slots=True)
class Result:
    state_bytes: int
    local: bool
    killed_at: float
    assigned_at: float | None
    fetched_at: float | None
    running_at: float | None
    first_record_at: float
    downloaded: bool
    segment_bytes: int | None = None
    """Of ``state_bytes``, the changelog segments the restore replayed (None: no changelog)."""

    def row(self) -> tuple[str, ...]:
        def span(a: float | None, b: float | None) -> str:
            return f"{b - a:.2f}" if a is not None and b is not None else "?"

        return (
            f"{self.state_bytes / 1e6:,.1f}",
            "-" if self.segment_bytes is None else f"{self.segment_bytes / 1e6:,.1f}",
            "yes" if self.local else "no",
            span(self.killed_at, self.assigned_at),
            span(self.assigned_at, self.fetched_at),
            span(self.fetched_at, self.running_at),
            span(self.running_at, self.first_record_at),
            f"{self.first_record_at - self.killed_at:.2f}",
            f"{self.state_bytes / 1e6 if self.downloaded else 0:,.1f}",
        )


async def measure(
    bootstrap: str, size_mb: int, local: bool, keys_per_record: int, changelog: bool = False
) -> Result:
    tag = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as tmp:
        root = Path(tmp)
        markers = root / "markers"
        markers.mkdir()
        graph = state_graph(tag, str(markers))
        source = f"state-{tag}"
        await ensure_topics(bootstrap, graph)
        producer = kafka_clients.producer(bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            keys = size_mb * 1_000_000 // VALUE_BYTES
            last_offset = -1
            for start in range(0, keys, keys_per_record):
                count = min(keys_per_record, keys - start)
                sent = await producer.send(source, b"%d %d" % (start, count), partition=0)
                last_offset = (await sent).offset
            imports = "from bench.recovery import state_graph"
            expr = f"state_graph({tag!r}, {str(markers)!r})"
            with ProcessCluster(root, bootstrap, imports, expr) as cluster:
                cluster.start_coordinator(interval=1.0, heartbeat_timeout=3.0)
                extra = ["--state-changelog"] if changelog else []
                cluster.start_worker("w1", slots=1, extra=extra)
                await wait_for_full_state(cluster, source, last_offset)
                killed_at = cluster.kill("w1")
                await producer.send_and_wait(source, b"after-restore", partition=0)
                worker_id = "w1" if local else "w2"
                restarted = cluster.start_worker(worker_id, slots=1, extra=extra)
                marker = markers / f"first-{restarted.pid}"
                deadline = time.monotonic() + 600
                while not marker.exists() or not marker.read_text():
                    cluster.check_alive()
                    if time.monotonic() > deadline:
                        raise TimeoutError("no record processed within 600 s of the restart")
                    await asyncio.sleep(0.02)
                first_record_at = float(marker.read_text())
                log = cluster.log_paths[worker_id]
                restored = await ManifestStore(open_storage(cluster.storage_dir)).load(
                    _restored_id(log)
                )
        finally:
            await producer.stop()
        result = _result(restored, local, killed_at, first_record_at, log)
        return result if changelog else dataclasses.replace(result, segment_bytes=None)


async def wait_for_full_state(
    cluster: ProcessCluster, source: str, last_offset: int
) -> CheckpointManifest:
    """The first completed checkpoint whose ``R_p`` is past every build record."""
    manifests = ManifestStore(open_storage(cluster.storage_dir))
    seen: set[int] = set()
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        cluster.check_alive()
        for n in await manifests.completed():
            if n in seen:
                continue
            seen.add(n)
            manifest = await manifests.load(n)
            if manifest.subtasks[SUBTASK].positions.get(source, {}).get(0, 0) > last_offset:
                return manifest
        await asyncio.sleep(0.1)
    raise TimeoutError("no checkpoint with the full state within 30 minutes")


def _restored_id(log: Path) -> int:
    """The checkpoint the restarted worker restored (at least as new as the full state's)."""
    for _, message in log_times(log):
        if found := re.match(r"(?:restoring|downloaded) checkpoint (\d+)", message):
            return int(found.group(1))
    raise RuntimeError(f"no restore in {log}")


def _result(
    manifest: CheckpointManifest, local: bool, killed_at: float, first_at: float, log: Path
) -> Result:
    assigned = fetched = running = None
    downloaded = False
    for at, message in log_times(log):
        if assigned is None and f"runs ['{SUBTASK}'] at attempt" in message:
            assigned = at
        elif fetched is None and message.startswith("restoring checkpoint"):
            fetched = at
        elif fetched is None and message.startswith("downloaded checkpoint"):
            fetched, downloaded = at, True
        elif running is None and message.startswith(f"{SUBTASK} running at attempt"):
            running = at
    segments = sum(f.size for f in manifest.subtasks[SUBTASK].handle.changelog)
    return Result(
        manifest.full_bytes, local, killed_at, assigned, fetched, running, first_at, downloaded,
        segments,
    )  # fmt: skip


async def bench(bootstrap: str, sizes_mb: list[int], keys_per_record: int, changelog: bool) -> None:
    rows: list[tuple[str, ...]] = []
    for size_mb in sizes_mb:
        for local in (True, False):
            for logged in (False, True) if changelog else (False,):
                started = time.monotonic()
                result = await measure(bootstrap, size_mb, local, keys_per_record, logged)
                rows.append(result.row())
                seconds = result.first_record_at - result.killed_at
                if not logged:  # the plot: recovery vs state size, RocksDB's files
                    mb = result.state_bytes / 1e6
                    record("recovery", "restore", state_mb=mb, local=local, seconds=seconds)
                took = time.monotonic() - started
                print(f"  {size_mb} MB, local copy {'yes' if local else 'no'}, changelog "
                      f"{'yes' if logged else 'no'}: run took {took:.0f}s")  # fmt: skip
    header = (
        "state MB", "segments MB", "local copy", "kill→assign s", "fetch s", "open s",
        "→first record s", "SIGKILL→first record s", "downloaded MB",
    )  # fmt: skip
    title = "Recovery: SIGKILL to the first record processed vs state size"
    report_table("recovery", title, header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="10,100,1000")
    parser.add_argument("--keys-per-record", type=int, default=1000)
    parser.add_argument("--state-changelog", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes_mb.split(",")]
    logging.getLogger("aiokafka").setLevel(logging.ERROR)  # leader moves on new topics
    with kafka_bootstrap() as bootstrap:
        asyncio.run(bench(bootstrap, sizes, args.keys_per_record, args.state_changelog))


if __name__ == "__main__":
    main()

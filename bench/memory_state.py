"""Memory per key at scale: a checkpoint costs the bytes memory changed, not the memory held.

    uv run python -m bench.memory_state [--keys 1000000] [--entries 10] [--rounds 10]
                                        [--writes 0.01] [--erasures 0.001]

One agent subtask's partition state (real RocksDB, real local storage) holds ``--keys``
memory keys with ``--entries`` entries each, written as the agent writes them
(`agents.memory.rows.MemoryRows.append`: a `MemoryEntry` document and the key's counter). A
first checkpoint uploads all of it. Then ``--rounds`` rounds of: ``--writes`` of the keys get
one more entry (runs remembering), ``--erasures`` of the keys are erased, and a checkpoint is
taken and uploaded (the SSTs new since the previous one, as a subtask does). Per round: the
bytes changed (keys and values written, keys deleted), the bytes uploaded, their ratio, and
the seconds of the checkpoint (take + upload); both ways of checkpointing, RocksDB's new SSTs
and the state changelog (``--state-changelog``: the round's segment, its materializations in
the background counted in ``all bytes``). ``restore s``: fetching the last checkpoint from
storage into an empty folder and opening it (a worker without a local copy; with one, a
restore hard-links the files). The read rule is timed too: ``read ms`` is one model call's
`MemoryRows.readable` of a key with ``--entries`` entries.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path
from statistics import mean, median

from bench.table import report_table
from sluicegate.agents.memory.rows import MemoryRows, NewEntry
from sluicegate.operators.runtime.changelog_snapshots import ChangelogSnapshots
from sluicegate.operators.runtime.state_transfer import Snapshots, SnapshotStore, fetch
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import open_storage

_MIB = 1024 * 1024
_TOPIC = "sluicegate.bench.keeper.tasks-by-run"
_TEXT = "refunded ord-{key}-{n}: ref-{n:06d}, 12.50 EUR, customer asked twice before"


def _key(i: int) -> str:
    return f"c-{i:08d}"


async def measure(
    keys: int,
    entries: int,
    rounds: int,
    writes: float,
    erasures: float,
    root: Path,
    *,
    changelog: bool,
) -> dict[str, float]:
    storage = open_storage(root / "storage")
    snapshots: Snapshots
    if changelog:
        snapshots = logged = ChangelogSnapshots(storage, root / "cp")
    else:
        snapshots = SnapshotStore(storage)
    rng = random.Random(31)
    figures: dict[str, float] = {}
    with RocksDBStateStore.open(root / "db") as store:
        snapshots.attach(store, None)
        state = store.partition(_TOPIC, 0)
        rows = MemoryRows(state)
        started = time.perf_counter()
        for n in range(entries):
            for i in range(keys):
                text = _TEXT.format(key=i, n=n)
                rows.append(NewEntry(_key(i), "note", text, f"run-{i}-{n}", 2, f"run-{i}-{n}/2/0"),
                            now=1.0e9 + n, ttl_s=None)  # fmt: skip
        figures["build s"] = time.perf_counter() - started
        started = time.perf_counter()
        first = await snapshots.upload(await snapshots.take(store, 1, root / "cp"))
        if changelog:  # the bulk load's upload, as the first checkpoint's is on the other side
            await logged.materialization()
        figures["first checkpoint s"] = time.perf_counter() - started
        figures["state MB"] = first.handle.full_bytes / _MIB
        before = logged.materialized_bytes if changelog else 0
        uploaded_total = changed_total = 0
        ratios: list[float] = []
        seconds: list[float] = []
        changed_mb: list[float] = []
        for r in range(2, rounds + 2):
            changed = 0
            for i in rng.sample(range(keys), max(1, int(keys * writes))):
                text = _TEXT.format(key=i, n=entries + r)
                new = NewEntry(_key(i), "note", text, f"run-{i}-r{r}", 2, f"run-{i}-r{r}/2/0")
                entry = rows.append(new, now=2.0e9, ttl_s=None)
                changed += len(entry.encode()) + 2 * 40  # the entry, its row key, the counter
            for i in rng.sample(range(keys), max(1, int(keys * erasures))):
                changed += 40 * (rows.erase(_key(i)) + 1)  # the keys deleted
            started = time.perf_counter()
            result = await snapshots.upload(await snapshots.take(store, r, root / "cp"))
            seconds.append(time.perf_counter() - started)
            ratios.append(result.handle.uploaded_bytes / changed)
            changed_mb.append(changed / _MIB)
            uploaded_total += result.handle.uploaded_bytes
            changed_total += changed
        if changelog:
            uploaded_total += logged.materialized_bytes - before
        figures["all bytes"] = uploaded_total / changed_total
        await snapshots.close()
        probe = MemoryRows(state)
        started = time.perf_counter()
        for _ in range(200):
            probe.readable(_key(rng.randrange(keys)), now=3.0e9, recent=10, max_tokens=1000)
        figures["read ms"] = (time.perf_counter() - started) / 200 * 1000
        held = {_key(i): [e.text for e in probe.entries(_key(i))] for i in range(0, keys, 97)}
    started = time.perf_counter()
    folder = await fetch(storage, result.handle, root / "restore" / "files")
    restored = RocksDBStateStore.restore(folder, root / "restore" / "db")
    figures["restore s"] = time.perf_counter() - started
    with restored:
        back = MemoryRows(restored.partition(_TOPIC, 0))
        for key, texts in held.items():  # the restored memory is the memory checkpointed
            if [e.text for e in back.entries(key)] != texts:
                raise AssertionError(f"the restore changed the memory of {key}")
    figures["changed MB"] = mean(changed_mb)
    figures["mean"], figures["median"], figures["worst"] = mean(ratios), median(ratios), max(ratios)
    figures["checkpoint s"] = mean(seconds)
    figures["worst checkpoint s"] = max(seconds)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--entries", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--writes", type=float, default=0.01)
    parser.add_argument("--erasures", type=float, default=0.001)
    args = parser.parse_args()
    measured = {}
    for kind, changelog in {"rocksdb files": False, "changelog": True}.items():
        with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as root:
            measured[kind] = asyncio.run(
                measure(
                    args.keys, args.entries, args.rounds, args.writes, args.erasures, Path(root),
                    changelog=changelog,
                )
            )  # fmt: skip
    report_table(
        "memory_state",
        "Memory per key: what a checkpoint uploads, against what memory changed",
        (
            "checkpoints of",
            "keys",
            "entries",
            "state MB",
            "build s",
            "first cp s",
            "changed MB/round",
            "uploaded/changed mean",
            "median",
            "worst",
            "all bytes",
            "cp s mean",
            "cp s worst",
            "restore s",
            "read ms",
        ),
        [
            (
                kind,
                f"{args.keys:,}",
                f"{args.keys * args.entries:,}",
                f"{f['state MB']:.0f}",
                f"{f['build s']:.0f}",
                f"{f['first checkpoint s']:.1f}",
                f"{f['changed MB']:.2f}",
                f"{f['mean']:.2f}x",
                f"{f['median']:.2f}x",
                f"{f['worst']:.2f}x",
                f"{f['all bytes']:.2f}x",
                f"{f['checkpoint s']:.2f}",
                f"{f['worst checkpoint s']:.2f}",
                f"{f['restore s']:.1f}",
                f"{f['read ms']:.2f}",
            )
            for kind, f in measured.items()
        ],
        [
            f"per round: {args.writes:.1%} of the keys get an entry, {args.erasures:.2%} are "
            "erased, then one incremental checkpoint; 'all bytes': every byte uploaded after "
            "the first checkpoint (materializations included) / every byte changed"
        ],
    )


if __name__ == "__main__":
    main()

"""Incremental checkpoints under steady updates: uploaded bytes vs changed bytes, over time.

    uv run python -m bench.incremental_upload [--keys 200000] [--checkpoints 50] [--fraction 0.01]

A state of ``--keys`` rows (8-byte key prefix + 60-byte value), then ``--checkpoints`` rounds
of: update ``--fraction`` of the keys at random, take a checkpoint, upload it (real RocksDB,
real local storage), the same rows and updates for both ways of checkpointing:

* ``rocksdb files``: a checkpoint uploads the SSTs that are new since the last one: the flushed
  memtable (about the changed bytes) plus whatever compaction rewrote;
* ``changelog`` (``--state-changelog``): a checkpoint uploads its interval's changelog segment;
  RocksDB's files go up in the background now and then (materializations), and count in
  the total.

Per checkpoint, the ratio uploaded / changed is what the checkpoint waits for; the table prints
its mean, median and worst round, and the ratio of *all* bytes uploaded (materializations
included) to all bytes changed. ``restore s``: fetching the last checkpoint from storage into
an empty folder and opening it (the changelog replays its segments). The RocksDB settings are
``--target-file-mb``, ``--level-base-mb``, ``--write-buffer-mb``, ``--l0-trigger`` (the defaults
of `RocksDBSettings` otherwise). Bytes, not seconds, except for the restore: a loaded machine
changes little of it (compaction and materializations run in the background, so a round may
differ a little between runs).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import mean, median

from bench.table import report_table
from sluicegate.operators.protocol.messages import StateHandle
from sluicegate.operators.runtime.changelog_snapshots import ChangelogSnapshots
from sluicegate.operators.runtime.state_transfer import Snapshots, SnapshotStore, fetch
from sluicegate.operators.state.codec import RocksDBSettings
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import Storage, open_storage

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Measured:
    ratios: list[float]
    """Uploaded / changed bytes of each checkpoint after the first."""
    total_ratio: float
    """Every byte uploaded after the first checkpoint (materializations included) / changed."""
    restore_seconds: float


async def measure(
    keys: int,
    checkpoints: int,
    fraction: float,
    settings: RocksDBSettings,
    root: Path,
    *,
    changelog: bool = False,
) -> Measured:
    """Upload ratios of ``checkpoints`` incremental checkpoints, and the restore of the last."""
    storage = open_storage(root / "storage")
    snapshots: Snapshots
    if changelog:
        snapshots = logged = ChangelogSnapshots(storage, root / "cp")
    else:
        snapshots = SnapshotStore(storage)
    rng = random.Random(7)
    ratios: list[float] = []
    uploaded = changed_total = 0
    with RocksDBStateStore.open(root / "db", settings=settings) as store:
        snapshots.attach(store, None)
        state = store.partition("bench", 0)
        for i in range(keys):
            state.put(b"key-%08d" % i, b"value-%08d-" % i + b"x" * 45)
        await snapshots.upload(await snapshots.take(store, 1, root / "cp"))
        if changelog:  # the bulk load's upload, as the first checkpoint's is on the other side
            await logged.materialization()
        before = logged.materialized_bytes if changelog else 0
        for n in range(2, checkpoints + 2):
            changed = 0
            for i in rng.sample(range(keys), max(1, int(keys * fraction))):
                key, value = b"key-%08d" % i, b"round-%06d-%08d-" % (n, i) + b"y" * 38
                state.put(key, value)
                changed += len(key) + len(value)
            result = await snapshots.upload(await snapshots.take(store, n, root / "cp"))
            ratios.append(result.handle.uploaded_bytes / changed)
            uploaded += result.handle.uploaded_bytes
            changed_total += changed
        if changelog:
            uploaded += logged.materialized_bytes - before
        await snapshots.close()
    seconds = await _restore_seconds(storage, result.handle, root / "restore")
    return Measured(ratios, uploaded / changed_total, seconds)


async def _restore_seconds(storage: Storage, handle: StateHandle, into: Path) -> float:
    started = time.perf_counter()
    folder = await fetch(storage, handle, into / "files")
    RocksDBStateStore.restore(folder, into / "db").close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--checkpoints", type=int, default=50)
    parser.add_argument("--fraction", type=float, default=0.01)
    parser.add_argument("--target-file-mb", type=float, default=None)
    parser.add_argument("--level-base-mb", type=float, default=None)
    parser.add_argument("--write-buffer-mb", type=float, default=None)
    parser.add_argument("--l0-trigger", type=int, default=None)
    args = parser.parse_args()
    given = {
        "target_file_size_bytes": args.target_file_mb and int(args.target_file_mb * _MIB),
        "max_bytes_for_level_base": args.level_base_mb and int(args.level_base_mb * _MIB),
        "write_buffer_size_bytes": args.write_buffer_mb and int(args.write_buffer_mb * _MIB),
        "level0_compaction_trigger": args.l0_trigger,
    }
    settings = RocksDBSettings(**{k: v for k, v in given.items() if v is not None})
    kinds = {"rocksdb files": False, "changelog": True}
    measured = {}
    for kind, changelog in kinds.items():
        with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as root:
            measured[kind] = asyncio.run(
                measure(
                    args.keys,
                    args.checkpoints,
                    args.fraction,
                    settings,
                    Path(root),
                    changelog=changelog,
                )
            )
    report_table(
        "incremental_upload",
        "Incremental upload: uploaded / changed bytes per checkpoint",
        (
            "checkpoints of",
            "keys",
            "updated",
            "checkpoints",
            "target MB",
            "level base MB",
            "mean",
            "median",
            "worst",
            "all bytes",
            "restore s",
        ),
        [
            (
                kind,
                f"{args.keys:,}",
                f"{args.fraction:.1%}",
                str(args.checkpoints),
                f"{settings.target_file_size_bytes / _MIB:g}",
                f"{settings.max_bytes_for_level_base / _MIB:g}",
                f"{mean(m.ratios):.2f}x",
                f"{median(m.ratios):.2f}x",
                f"{max(m.ratios):.2f}x",
                f"{m.total_ratio:.2f}x",
                f"{m.restore_seconds:.2f}",
            )
            for kind, m in measured.items()
        ],
        [
            "uploaded / changed bytes per incremental checkpoint (target: mean <= 3x, worst "
            "<= 10x); 'all bytes': every byte uploaded (the changelog's materializations "
            "included) / every byte changed"
        ],
    )


if __name__ == "__main__":
    main()

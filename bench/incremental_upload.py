"""Incremental checkpoints under steady updates: uploaded bytes vs changed bytes, over time.

    uv run python -m bench.incremental_upload [--keys 200000] [--checkpoints 50] [--fraction 0.01]

A state of ``--keys`` rows (8-byte key prefix + 60-byte value), then ``--checkpoints`` rounds
of: update ``--fraction`` of the keys at random, take a checkpoint, upload it (real RocksDB,
real local storage). An incremental checkpoint uploads the SSTs that are new since the last
one: the flushed memtable (about the changed bytes) plus whatever compaction rewrote. The
ratio uploaded / changed is that write amplification as checkpoints see it; the table prints
its mean over all rounds, its median and its worst round, for the RocksDB options given
(``--target-file-mb``, ``--level-base-mb``, ``--write-buffer-mb``, ``--l0-trigger``; the
defaults of `RocksDBOptions` otherwise). Bytes, not seconds: a loaded machine changes
little of it (compaction runs in the background, so a round may differ a little between
runs).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
from pathlib import Path
from statistics import mean, median

from bench.table import report_table
from operators.runtime.state_transfer import SnapshotStore
from operators.state.codec import RocksDBOptions
from operators.state.rocksdb import RocksDBStateStore
from operators.storage import open_storage

_MIB = 1024 * 1024


async def measure(
    keys: int, checkpoints: int, fraction: float, options: RocksDBOptions, root: Path
) -> list[float]:
    """Uploaded / changed bytes of each incremental checkpoint."""
    snapshots = SnapshotStore(open_storage(root / "storage"))
    rng = random.Random(7)
    ratios: list[float] = []
    with RocksDBStateStore.open(root / "db", options=options) as store:
        state = store.partition("bench", 0)
        for i in range(keys):
            state.put(b"key-%08d" % i, b"value-%08d-" % i + b"x" * 45)
        local = store.take_local_checkpoint(1, root / "cp", uploaded=snapshots.uploaded)
        await snapshots.upload(local)
        for n in range(2, checkpoints + 2):
            changed = 0
            for i in rng.sample(range(keys), max(1, int(keys * fraction))):
                key, value = b"key-%08d" % i, b"round-%06d-%08d-" % (n, i) + b"y" * 38
                state.put(key, value)
                changed += len(key) + len(value)
            local = store.take_local_checkpoint(n, root / "cp", uploaded=snapshots.uploaded)
            result = await snapshots.upload(local)
            ratios.append(result.handle.uploaded_bytes / changed)
    return ratios


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
    options = RocksDBOptions(**{k: v for k, v in given.items() if v is not None})
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as root:
        ratios = asyncio.run(
            measure(args.keys, args.checkpoints, args.fraction, options, Path(root))
        )
    report_table(
        "incremental_upload",
        "Incremental upload: uploaded / changed bytes per checkpoint",
        (
            "keys",
            "updated",
            "checkpoints",
            "target MB",
            "level base MB",
            "buffer MB",
            "L0 trigger",
            "mean",
            "median",
            "worst",
        ),
        [
            (
                f"{args.keys:,}",
                f"{args.fraction:.1%}",
                str(args.checkpoints),
                f"{options.target_file_size_bytes / _MIB:g}",
                f"{options.max_bytes_for_level_base / _MIB:g}",
                f"{options.write_buffer_size_bytes / _MIB:g}",
                str(options.level0_compaction_trigger),
                f"{mean(ratios):.2f}x",
                f"{median(ratios):.2f}x",
                f"{max(ratios):.2f}x",
            )
        ],
        ["uploaded / changed bytes per incremental checkpoint (target: mean <= 3x, worst <= 10x)"],
    )


if __name__ == "__main__":
    main()

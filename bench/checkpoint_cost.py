"""Checkpoint sync-phase duration and uploaded bytes vs state size and update fraction.

    uv run python -m bench.checkpoint_cost [--sizes 10000,100000,1000000] [--fractions 0.01,0.1,1]

For each state size: write the keys, take and upload a first (full) checkpoint, then for each
update fraction change that share of the keys and take an incremental one. Real RocksDB, real
local storage (a temporary folder). Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from bench.table import report_table
from sluicegate.operators.runtime.state_transfer import SnapshotStore, UploadResult
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import open_storage


async def measure(keys: int, fractions: list[float], root: Path) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    snapshots = SnapshotStore(open_storage(root / "storage"))
    rng = random.Random(keys)
    with RocksDBStateStore.open(root / "db") as store:
        state = store.partition("bench", 0)
        for i in range(keys):
            state.put(b"key-%08d" % i, b"value-%08d-" % i + b"x" * 40)
        checkpoint = 1
        local = store.take_local_checkpoint(checkpoint, root / "cp", uploaded=snapshots.uploaded)
        started = time.perf_counter()
        result = await snapshots.upload(local)
        rows.append(_row(keys, "full", local.inventory.sync_duration_seconds, result, started))
        for fraction in fractions:
            for i in rng.sample(range(keys), max(1, int(keys * fraction))):
                state.put(b"key-%08d" % i, b"changed-%08d-" % i + b"y" * 40)
            checkpoint += 1
            local = store.take_local_checkpoint(
                checkpoint, root / "cp", uploaded=snapshots.uploaded
            )
            started = time.perf_counter()
            result = await snapshots.upload(local)
            label = f"{fraction:.0%} updated"
            rows.append(_row(keys, label, local.inventory.sync_duration_seconds, result, started))
    return rows


def _row(
    keys: int, label: str, sync_s: float, result: UploadResult, started: float
) -> tuple[str, ...]:
    handle = result.handle
    share = handle.uploaded_bytes / handle.full_bytes if handle.full_bytes else 0.0
    return (
        f"{keys:,}",
        label,
        f"{sync_s * 1000:.1f}",
        f"{(time.perf_counter() - started) * 1000:.0f}",
        f"{handle.full_bytes / 1e6:.2f}",
        f"{handle.uploaded_bytes / 1e6:.2f}",
        f"{share:.1%}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--fractions", default="0.01,0.1,1")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    fractions = [float(f) for f in args.fractions.split(",")]
    rows: list[tuple[str, ...]] = []
    for keys in sizes:
        with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as root:
            rows.extend(asyncio.run(measure(keys, fractions, Path(root))))
    header = ("keys", "checkpoint", "sync ms", "upload ms", "state MB", "uploaded MB", "uploaded")
    report_table("checkpoint_cost", "Checkpoint sync phase and upload vs state size", header, rows)


if __name__ == "__main__":
    main()

"""Incremental checkpoints: updating 1% of the rows uploads a small fraction of the SST bytes."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from sluicegate.operators.state.local_checkpoint import SstKey
from sluicegate.operators.state.rocksdb import RocksDBStateStore

ROWS = 200_000
PARTITIONS = 8
Record = Callable[[str, object], None]


def _key(i: int) -> tuple[int, bytes]:
    return i % PARTITIONS, f"run-{i:08d}".encode()


def _update(store: RocksDBStateStore, rng: random.Random, indices: list[int]) -> None:
    for i in indices:
        number, key = _key(i)
        store.partition("runs", number).put(key, rng.randbytes(32))


def test_updating_one_percent_uploads_a_small_fraction(
    tmp_path: Path, record_property: Record
) -> None:
    rng = random.Random(20240601)
    root = tmp_path / "checkpoints"
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _update(store, rng, list(range(ROWS)))
        first = store.take_local_checkpoint(1, root)
        uploaded = first.inventory.with_checksums(first.directory).sst_checksums()

        _update(store, rng, rng.sample(range(ROWS), ROWS // 100))
        second = store.take_local_checkpoint(2, root, uploaded=uploaded)

    fraction = second.inventory.new_sst_bytes / second.inventory.sst_bytes
    record_property("new_sst_fraction", round(fraction, 4))
    record_property("sst_bytes", second.inventory.sst_bytes)
    print(
        f"\nincremental: {second.inventory.new_sst_bytes} of {second.inventory.sst_bytes} "
        f"SST bytes new ({fraction:.2%}); sync phase {second.inventory.sync_duration_seconds:.3f}s"
    )
    assert second.inventory.new_sst_bytes > 0
    assert fraction < 0.20


def test_repeated_one_percent_updates_stay_small_across_compactions(
    tmp_path: Path, record_property: Record
) -> None:
    """Ten more checkpoints, so L0 compactions happen; the total uploaded stays small."""
    rng = random.Random(7)
    root = tmp_path / "checkpoints"
    uploaded: dict[SstKey, str] = {}
    fractions = []
    new_total = all_total = 0
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _update(store, rng, list(range(ROWS)))
        for checkpoint_id in range(1, 12):
            local = store.take_local_checkpoint(checkpoint_id, root, uploaded=uploaded)
            uploaded |= local.inventory.with_checksums(local.directory).sst_checksums()
            if checkpoint_id > 1:
                fractions.append(local.inventory.new_sst_bytes / local.inventory.sst_bytes)
                new_total += local.inventory.new_sst_bytes
                all_total += local.inventory.sst_bytes
            _update(store, rng, rng.sample(range(ROWS), ROWS // 100))
    record_property("fractions", [round(f, 4) for f in fractions])
    print(f"\nper-checkpoint new SST fractions: {[f'{f:.1%}' for f in fractions]}")
    assert new_total / all_total < 0.20

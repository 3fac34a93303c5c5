"""An inventory starts from the previous one of the same store: the reuse rules.

An SST the previous local checkpoint of the same store listed keeps its entry (no ``stat``, no
validation); every other file is read anew; and nothing crosses a database lifetime.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sluicegate.operators.state import local_checkpoint
from sluicegate.operators.state.codec import RocksDBSettings
from sluicegate.operators.state.local_checkpoint import (
    CheckpointInventory,
    FileKind,
    LocalCheckpoint,
)
from sluicegate.operators.state.rocksdb import RocksDBStateStore


def _write(store: RocksDBStateStore, rows: int, value: bytes) -> None:
    partition = store.partition("runs", 0)
    for i in range(rows):
        partition.put(f"run-{i:05d}".encode(), value)


def _on_disk(local: LocalCheckpoint) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in local.directory.iterdir()}


def _listed(inventory: CheckpointInventory) -> dict[str, int]:
    return {f.name: f.size for f in inventory.files}


def _ssts(inventory: CheckpointInventory) -> dict[str, local_checkpoint.CheckpointFile]:
    return {f.name: f for f in inventory.files if f.kind is FileKind.SST}


class _CountedEntry:
    """A ``DirEntry`` whose ``stat`` calls are noted by name."""

    def __init__(self, entry: os.DirEntry[str], stated: list[str]) -> None:
        self._entry = entry
        self._stated = stated
        self.name = entry.name

    def stat(self) -> os.stat_result:
        self._stated.append(self.name)
        return self._entry.stat()


class _CountingOs:
    """The ``os`` module as :mod:`local_checkpoint` sees it, ``scandir`` noting ``stat`` calls."""

    def __init__(self, stated: list[str]) -> None:
        self._stated = stated

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @contextmanager
    def scandir(self, path: Any) -> Iterator[list[_CountedEntry]]:
        with os.scandir(path) as listing:
            yield [_CountedEntry(e, self._stated) for e in listing]


@pytest.fixture
def stated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files whose size the inventories read (``DirEntry.stat``)."""
    names: list[str] = []
    monkeypatch.setattr(local_checkpoint, "os", _CountingOs(names))
    return names


def test_ssts_of_the_previous_checkpoint_keep_their_entry_unread(
    tmp_path: Path, stated: list[str]
) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _write(store, 500, b"first")
        first = store.take_local_checkpoint(1, tmp_path / "checkpoints")
        stated.clear()
        _write(store, 10, b"second")
        second = store.take_local_checkpoint(2, tmp_path / "checkpoints")
    before, after = _ssts(first.inventory), _ssts(second.inventory)
    kept = before.keys() & after.keys()
    assert kept  # SSTs carried over
    assert after.keys() - kept  # and the flush made a new one
    for name in kept:
        assert after[name] is before[name]  # taken as it was: no stat, no validation
    assert not kept & set(stated)
    assert set(stated) == {f.name for f in second.inventory.files} - kept
    assert _listed(second.inventory) == _on_disk(second)


def test_a_reused_sst_follows_what_storage_holds_now(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _write(store, 500, b"first")
        first = store.take_local_checkpoint(1, root)
        uploaded = first.inventory.with_checksums(first.directory).sst_checksums()
        _write(store, 10, b"second")
        second = store.take_local_checkpoint(2, root, uploaded=uploaded)
        # storage no longer counts one of them (as after a restore seeded the map anew)
        forgotten, *kept = [key for key in uploaded if key[0] in _ssts(second.inventory)]
        third = store.take_local_checkpoint(3, root, uploaded={k: uploaded[k] for k in kept})
    for f in _ssts(second.inventory).values():
        if f.name in _ssts(first.inventory):  # uploaded since: known, with its checksum
            assert (f.new, f.sha256) == (False, uploaded[f.name, f.size])
        else:
            assert (f.new, f.sha256) == (True, None)
    assert (
        _ssts(third.inventory)[forgotten[0]].new,
        _ssts(third.inventory)[forgotten[0]].sha256,
    ) == (True, None)
    for name, _ in kept:
        assert _ssts(third.inventory)[name] is _ssts(second.inventory)[name]


def test_ssts_compacted_away_leave_the_inventory(tmp_path: Path) -> None:
    settings = RocksDBSettings(level0_compaction_trigger=2)
    checkpoints = tmp_path / "checkpoints"
    with RocksDBStateStore.open(tmp_path / "db", settings=settings) as store:
        seen: set[str] = set()
        for n in range(1, 200):  # compaction runs in the background: until it has removed one
            _write(store, 200, b"value %d" % n)
            local = store.take_local_checkpoint(n, checkpoints)
            assert _listed(local.inventory) == _on_disk(local)
            names = set(_ssts(local.inventory))
            if seen - names:
                break
            seen |= names
        else:
            pytest.fail("no SST was compacted away")


def test_a_relinked_checkpoint_reuses_every_sst_entry(tmp_path: Path, stated: list[str]) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _write(store, 500, b"first")
        first = store.take_local_checkpoint(1, tmp_path / "checkpoints")
        stated.clear()
        second = store.take_local_checkpoint(2, tmp_path / "checkpoints")  # nothing written
    ssts = _ssts(first.inventory)
    assert all(_ssts(second.inventory)[name] is entry for name, entry in ssts.items())
    assert not ssts.keys() & set(stated)
    assert _listed(second.inventory) == _on_disk(second)


def test_a_restored_store_reads_the_sizes_of_names_an_abandoned_lifetime_used(
    tmp_path: Path,
) -> None:
    """After a restore, RocksDB numbers files on from the restored MANIFEST, so a name the
    abandoned lifetime used later holds other bytes: nothing of that lifetime may be reused."""
    checkpoints = tmp_path / "checkpoints"
    abandoned: dict[str, int] = {}
    with RocksDBStateStore.open(tmp_path / "db") as store:
        _write(store, 100, b"a")
        restored_from = store.take_local_checkpoint(1, checkpoints)
        for n in range(2, 8):
            _write(store, 1000, b"abandoned lifetime %d" % n)
            local = store.take_local_checkpoint(n, checkpoints)
            abandoned |= {f.name: f.size for f in _ssts(local.inventory).values()}
    with RocksDBStateStore.restore(restored_from.directory, tmp_path / "restored") as store:
        store.take_local_checkpoint(10, checkpoints)
        _write(store, 10, b"b")
        local = store.take_local_checkpoint(11, checkpoints)
    listed = {f.name: f.size for f in _ssts(local.inventory).values()}
    changed = {n for n in listed.keys() & abandoned.keys() if listed[n] != abandoned[n]}
    assert changed  # the case under test: same name, other size
    assert _listed(local.inventory) == _on_disk(local)

"""The state changelog's segments: format, hostile bytes, and replay onto RocksDB."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from sluicegate.operators.state.changelog import (
    ChangelogFormatError,
    ChangelogWriter,
    Op,
    read_segment,
    segment_checkpoint_id,
    segment_name,
)
from sluicegate.operators.state.local_checkpoint import FileKind, classify
from sluicegate.operators.state.rocksdb import RocksDBStateStore


def test_a_segment_gives_back_its_records_in_order(tmp_path: Path) -> None:
    writer = ChangelogWriter(tmp_path / "log")
    writer.append([(b"a", b"1"), (b"b", None)])
    writer.append([(b"", b"")], [(b"x", b"y")])
    assert writer.pending_bytes > 0
    segment = writer.seal(7)

    assert segment == tmp_path / "log" / "changelog-000000000007"
    assert list(read_segment(segment)) == [
        (Op.PUT, b"a", b"1"),
        (Op.DELETE, b"b", None),
        (Op.PUT, b"", b""),
        (Op.DELETE_RANGE, b"x", b"y"),
    ]
    assert writer.pending_bytes == 0
    assert writer.seal(8) is None  # nothing written since: no segment


def test_segment_names_sort_in_replay_order_and_are_told_apart() -> None:
    names = [segment_name(n) for n in (10, 9, 100, 1)]
    assert sorted(names) == [segment_name(n) for n in (1, 9, 10, 100)]
    assert segment_checkpoint_id(segment_name(42)) == 42
    assert classify(segment_name(42)) is FileKind.CHANGELOG
    for other in ("changelog-1", "changelog-00000000000x", "000012.sst", "CURRENT"):
        assert segment_checkpoint_id(other) is None
        assert classify(other) is not FileKind.CHANGELOG


def test_a_writer_discards_the_unsealed_writes_of_an_earlier_process(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "current").write_bytes(b"SGCL\x01\x01garbage")
    writer = ChangelogWriter(tmp_path / "log")
    writer.append([(b"k", b"v")])
    segment = writer.seal(1)
    assert segment is not None
    assert list(read_segment(segment)) == [(Op.PUT, b"k", b"v")]


def test_a_closed_writer_takes_nothing(tmp_path: Path) -> None:
    writer = ChangelogWriter(tmp_path / "log")
    writer.close()
    writer.append([(b"k", b"v")])
    assert writer.seal(1) is None


_HOSTILE = {
    "empty": b"",
    "wrong magic": b"XXXX\x01",
    "newer format": b"SGCL\x02",
    "unknown operation": b"SGCL\x01\x09",
    "length past the end": b"SGCL\x01\x01" + struct.pack(">I", 2**32 - 1) + b"k",
    "value length past the end": b"SGCL\x01\x01" + struct.pack(">I", 1) + b"k" + b"\x00\x00",
    "cut in a length": b"SGCL\x01\x02\x00\x00",
    "range without its stop": b"SGCL\x01\x03" + struct.pack(">I", 1) + b"a",
}


@pytest.mark.parametrize("data", _HOSTILE.values(), ids=list(_HOSTILE))
def test_a_damaged_segment_is_refused_with_its_name(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / segment_name(3)
    path.write_bytes(data)
    with pytest.raises(ChangelogFormatError, match="changelog-000000000003"):
        list(read_segment(path))


def _rows(store: RocksDBStateStore) -> dict[tuple[int, bytes], bytes]:
    return {
        (p.partition, k): v
        for p in store.partitions()
        for k, v in store.partition(p.topic, p.partition).items()
    }


def test_replaying_the_changelog_onto_a_new_database_gives_the_same_rows(tmp_path: Path) -> None:
    rng = random.Random(3)
    with RocksDBStateStore.open(tmp_path / "db") as store:
        store.changelog = ChangelogWriter(tmp_path / "log")
        for n in range(1, 4):
            for _ in range(500):
                rows = store.partition("t", rng.randrange(3))
                key = b"k%d" % rng.randrange(200)
                if rng.random() < 0.2:
                    rows.delete(key)
                else:
                    rows.put(key, b"v%d" % rng.randrange(10**6))
            if n == 3:  # the last interval: its range delete is the last record
                store.drop_partition("t", 1)
            store.flush_batch()
            store.changelog.seal(n)
        expected = _rows(store)
    assert 1 not in {p for p, _ in expected}

    folder = tmp_path / "restore-from"
    folder.mkdir()
    for segment in (tmp_path / "log").glob("changelog-*"):
        segment.rename(folder / segment.name)
    with RocksDBStateStore.restore(folder, tmp_path / "restored") as restored:
        assert _rows(restored) == expected
        assert restored.changelog is None  # a replay is not logged again


def test_a_replay_onto_a_rocksdb_checkpoint_continues_from_it(tmp_path: Path) -> None:
    with RocksDBStateStore.open(tmp_path / "db") as store:
        store.partition("t", 0).put(b"base", b"1")
        store.partition("t", 0).put(b"gone", b"1")
        local = store.take_local_checkpoint(1, tmp_path / "cp")
        store.changelog = ChangelogWriter(tmp_path / "log")
        store.partition("t", 0).put(b"base", b"2")
        store.partition("t", 0).delete(b"gone")
        store.flush_batch()
        segment = store.changelog.seal(2)
    assert segment is not None
    segment.rename(local.directory / segment.name)

    with RocksDBStateStore.restore(local.directory, tmp_path / "restored") as restored:
        assert dict(restored.partition("t", 0).items()) == {b"base": b"2"}


def test_a_damaged_segment_fails_the_restore(tmp_path: Path) -> None:
    folder = tmp_path / "from"
    folder.mkdir()
    (folder / segment_name(1)).write_bytes(b"SGCL\x01\x07")
    with pytest.raises(ChangelogFormatError):
        RocksDBStateStore.restore(folder, tmp_path / "restored")


def test_an_empty_folder_restores_a_new_database(tmp_path: Path) -> None:
    """With the changelog, a subtask that never wrote a row checkpoints no file at all."""
    (tmp_path / "from").mkdir()
    with RocksDBStateStore.restore(tmp_path / "from", tmp_path / "restored") as restored:
        assert restored.partitions() == []

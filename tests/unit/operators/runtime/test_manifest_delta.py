"""RocksDB's MANIFEST uploaded as deltas: what is sent, what a restore accepts and refuses."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from sluicegate.operators.protocol.messages import FilePart, SnapshotFile, StateHandle
from sluicegate.operators.runtime.manifest_delta import MAX_PARTS
from sluicegate.operators.runtime.state_transfer import SnapshotStore, UploadResult, fetch
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import CorruptFileError, NotFoundError, open_storage

FIXTURES = Path(__file__).parents[3] / "fixtures" / "snapshots"


async def _checkpoints(tmp_path: Path, count: int) -> tuple[SnapshotStore, list[UploadResult]]:
    """``count`` checkpoints of one database, a new key each, uploaded to local storage."""
    snapshots = SnapshotStore(open_storage(tmp_path / "storage"))
    results = []
    with RocksDBStateStore.open(tmp_path / "db") as store:
        for n in range(1, count + 1):
            store.partition("t", 0).put(b"k%03d" % n, b"at checkpoint %d" % n)
            local = store.take_local_checkpoint(n, tmp_path / "cp")
            results.append(await snapshots.upload(local))
    return snapshots, results


def _manifest(handle: StateHandle) -> SnapshotFile:
    return next(f for f in handle.files if f.name.startswith("MANIFEST-"))


async def test_a_grown_manifest_is_sent_as_its_new_bytes_and_restores_whole(
    tmp_path: Path,
) -> None:
    _, results = await _checkpoints(tmp_path, 4)
    first, *later = (_manifest(r.handle) for r in results)
    assert not first.parts  # nothing to build on: stored whole
    previous = first
    for result, manifest in zip(results[1:], later, strict=True):
        assert manifest.name == first.name
        assert manifest.size > previous.size
        assert [p.path for p in manifest.parts[:-1]] == list(previous.paths)
        assert manifest.parts[-1].size == manifest.size - previous.size
        local = tmp_path / "cp" / str(result.handle.checkpoint_id) / manifest.name
        assert (manifest.size, manifest.sha256) == (
            local.stat().st_size,
            hashlib.sha256(local.read_bytes()).hexdigest(),
        )
        ssts = sum(f.size for f in result.handle.files if f.name.endswith(".sst"))
        assert result.handle.uploaded_bytes < ssts + manifest.size - previous.size + 1
        previous = manifest

    handle = results[-1].handle
    folder = await fetch(open_storage(tmp_path / "storage"), handle, tmp_path / "elsewhere")
    assert folder.name.endswith(".download")  # not the local copy: the parts were joined
    assert (folder / previous.name).read_bytes() == (
        tmp_path / "cp" / str(handle.checkpoint_id) / previous.name
    ).read_bytes()
    with RocksDBStateStore.restore(folder, tmp_path / "restored") as restored:
        assert restored.partition("t", 0).get(b"k004") == b"at checkpoint 4"


async def test_the_parts_are_bounded_then_the_manifest_is_stored_whole_again(
    tmp_path: Path,
) -> None:
    _, results = await _checkpoints(tmp_path, MAX_PARTS + 2)
    parts = [len(_manifest(r.handle).parts) for r in results]
    assert max(parts) == MAX_PARTS
    assert parts[MAX_PARTS] == 0  # whole again after MAX_PARTS parts
    assert parts[MAX_PARTS + 1] == 2


async def test_a_restored_store_stores_its_first_manifest_whole(tmp_path: Path) -> None:
    _, results = await _checkpoints(tmp_path, 2)
    storage = open_storage(tmp_path / "storage")
    folder = await fetch(storage, results[-1].handle, tmp_path / "elsewhere")
    snapshots = SnapshotStore(storage)
    with RocksDBStateStore.restore(folder, tmp_path / "restored") as store:
        store.partition("t", 0).put(b"after", b"the restore")
        result = await snapshots.upload(store.take_local_checkpoint(3, tmp_path / "cp2"))
    assert not _manifest(result.handle).parts


async def test_a_checkpoint_written_before_parts_existed_still_restores(tmp_path: Path) -> None:
    """The fixture was written by the build before this format (commit bb6c29d): two
    checkpoints, the MANIFEST stored whole."""
    shutil.copytree(FIXTURES / "whole_manifest", tmp_path / "old")
    text = (tmp_path / "old" / "handle.json").read_text()
    handle = StateHandle.model_validate_json(text)
    assert all(not f.parts for f in handle.files)
    assert "parts" not in handle.model_dump_json()  # and it is written the same way again
    folder = await fetch(open_storage(tmp_path / "old" / "storage"), handle, tmp_path / "cp")
    with RocksDBStateStore.restore(folder, tmp_path / "restored") as restored:
        assert restored.partition("t", 0).get(b"k2") == b"at checkpoint 2"


async def test_a_corrupted_delta_is_refused(tmp_path: Path) -> None:
    _, results = await _checkpoints(tmp_path, 3)
    handle = results[-1].handle
    delta = _manifest(handle).parts[-1]
    stored = tmp_path / "storage" / delta.path
    data = bytearray(stored.read_bytes())
    data[0] ^= 0xFF
    stored.write_bytes(bytes(data))
    storage = open_storage(tmp_path / "storage")
    with pytest.raises(CorruptFileError):
        await fetch(storage, handle, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere" / "3.download" / _manifest(handle).name).exists()
    stored.unlink()
    with pytest.raises(NotFoundError):
        await fetch(storage, handle, tmp_path / "again")


async def test_parts_that_are_intact_but_do_not_make_the_file_are_refused(
    tmp_path: Path,
) -> None:
    """A hostile manifest: each part verifies, but they are in the wrong order."""
    _, results = await _checkpoints(tmp_path, 3)
    handle = results[-1].handle
    manifest = _manifest(handle)
    first, *rest = manifest.parts
    swapped = (first, *reversed(rest)) if len(rest) > 1 else (first, *rest, first)
    tampered = manifest.model_copy(update={"parts": swapped, "size": sum(p.size for p in swapped)})
    files = tuple(tampered if f.name == manifest.name else f for f in handle.files)
    bad = handle.model_copy(update={"files": files})
    with pytest.raises(CorruptFileError):
        await fetch(open_storage(tmp_path / "storage"), bad, tmp_path / "elsewhere")


def test_a_file_in_parts_must_add_up() -> None:
    part = FilePart(path="shared/" + "a" * 64, size=3, sha256="a" * 64)
    with pytest.raises(ValidationError):  # sizes do not add up
        SnapshotFile(name="MANIFEST-1", path=part.path, size=7, sha256="b" * 64, parts=(part, part))
    with pytest.raises(ValidationError):  # the first part is not at ``path``
        SnapshotFile(
            name="MANIFEST-1", path="shared/x", size=6, sha256="b" * 64, parts=(part, part)
        )
    whole = SnapshotFile(
        name="MANIFEST-1", path=part.path, size=6, sha256="b" * 64, parts=(part, part)
    )
    assert whole.paths == (part.path, part.path)
    with pytest.raises(ValidationError):  # a hostile manifest's endless list of parts
        SnapshotFile(
            name="MANIFEST-1", path=part.path, size=3 * 2000, sha256="b" * 64, parts=(part,) * 2000
        )
    assert SnapshotFile.model_validate_json(whole.model_dump_json()) == whole

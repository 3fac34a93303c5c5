"""ObstoreStorage beyond the contract: streaming, local damage, files changing underneath."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from pathlib import Path

import pytest
from obstore.store import LocalStore, MemoryStore

from sluicegate.operators.storage import (
    CorruptFileError,
    LocalFileChangedError,
    NotFoundError,
    ObstoreStorage,
    layout,
    obstore_storage as implementation,
)

MIB = 1024 * 1024


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def local(tmp_path: Path) -> tuple[ObstoreStorage, Path]:
    """A local-directory storage and the directory it writes to."""
    root = tmp_path / "storage"
    return ObstoreStorage(LocalStore(root, mkdir=True)), root


async def test_files_stream_through_memory_in_chunks(tmp_path: Path) -> None:
    size = 32 * MIB
    local_file = tmp_path / "big.sst"
    with local_file.open("wb") as out:
        for _ in range(size // MIB):
            out.write(os.urandom(MIB))
    # A local store: a memory store would rightly hold every byte it was given.
    storage = ObstoreStorage(LocalStore(tmp_path / "storage", mkdir=True), chunk_size=MIB)

    tracemalloc.start()
    try:
        stored = await storage.put_file("shared/big", local_file)
        _, upload_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        await storage.download_verified(stored, tmp_path / "restored.sst")
        _, download_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert stored.size == size
    # About chunk_size * (max_concurrency + 2) in practice; the whole file would be 32 MiB.
    assert upload_peak < size // 4, f"upload peaked at {upload_peak} bytes"
    assert download_peak < size // 4, f"download peaked at {download_peak} bytes"


async def test_damage_on_disk_is_detected(local: tuple[ObstoreStorage, Path]) -> None:
    storage, root = local
    data = os.urandom(10_000)
    stored = await storage.put(layout.checkpoint_manifest(3), data)
    on_disk = root / stored.path

    with on_disk.open("r+b") as handle:  # flip one bit in place
        handle.seek(5000)
        byte = handle.read(1)[0]
        handle.seek(5000)
        handle.write(bytes([byte ^ 0x80]))
    with pytest.raises(CorruptFileError) as caught:
        await storage.get_verified(stored)
    assert caught.value.actual.size == len(data)
    assert caught.value.actual.sha256 != stored.sha256

    os.truncate(on_disk, 4096)
    with pytest.raises(CorruptFileError) as caught:
        await storage.get_verified(stored)
    assert caught.value.actual.size == 4096


async def test_failed_download_keeps_the_previous_local_file(
    local: tuple[ObstoreStorage, Path], tmp_path: Path
) -> None:
    storage, root = local
    stored = await storage.put("shared/x", b"good bytes")
    (root / "shared" / "x").write_bytes(b"evil bytes")
    target = tmp_path / "CURRENT"
    target.write_bytes(b"previous")

    with pytest.raises(CorruptFileError):
        await storage.download_verified(stored, target)
    assert target.read_bytes() == b"previous"
    assert names(tmp_path) == ["CURRENT", "storage"]


async def test_a_file_changing_during_content_addressed_upload_is_refused(
    local: tuple[ObstoreStorage, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, _ = local
    local_file = tmp_path / "000005.sst"
    local_file.write_bytes(b"original content")
    real_hash_file = implementation._hash_file

    def hash_then_change(path: Path, chunk_size: int) -> tuple[int, str]:
        result = real_hash_file(path, chunk_size)
        path.write_bytes(b"rewritten content")  # someone writes into the snapshot dir
        return result

    monkeypatch.setattr(implementation, "_hash_file", hash_then_change)
    with pytest.raises(LocalFileChangedError) as caught:
        await storage.put_content_addressed(layout.SHARED, local_file)

    assert caught.value.local_path == local_file
    assert caught.value.expected_sha256 == hashlib.sha256(b"original content").hexdigest()
    assert caught.value.actual_sha256 == hashlib.sha256(b"rewritten content").hexdigest()
    assert await storage.list(layout.SHARED) == []  # the mislabelled upload is gone


async def test_a_missing_local_file_is_the_callers_error_not_a_missing_key(
    local: tuple[ObstoreStorage, Path], tmp_path: Path
) -> None:
    storage, _ = local
    with pytest.raises(FileNotFoundError) as caught:
        await storage.put_file("shared/x", tmp_path / "absent.sst")
    assert not isinstance(caught.value, NotFoundError)


def test_chunking_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        ObstoreStorage(MemoryStore(), chunk_size=0)
    with pytest.raises(ValueError, match="max_concurrency"):
        ObstoreStorage(MemoryStore(), max_concurrency=0)

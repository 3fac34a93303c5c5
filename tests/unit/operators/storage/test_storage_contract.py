"""The Storage contract, run against every backend.

:class:`TestStorageContract` needs one fixture, ``backend``. This module gives
it the local directory and in-memory stores; ``tests/integration/test_storage_s3.py``
subclasses it and gives it S3 (a moto server), so every backend passes the
same tests.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import obstore
import pytest
from obstore.store import LocalStore, MemoryStore

from sluicegate.operators.storage import (
    AlreadyExistsError,
    CorruptFileError,
    InvalidPathError,
    LocalFileChangedError,
    NotFoundError,
    ObstoreStorage,
    Storage,
    StoredFile,
    layout,
)

if TYPE_CHECKING:
    from obstore.store import ObjectStore

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Backend:
    """A storage under test and the raw obstore store beneath it, for damaging files."""

    name: str
    storage: Storage
    raw: ObjectStore

    async def write_raw(self, path: str, data: bytes) -> None:
        """Write bytes straight into the backend, bypassing Storage."""
        await obstore.put_async(self.raw, path, data)


@pytest.fixture(params=["local", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """One storage per backend that needs no network."""
    raw: ObjectStore
    if request.param == "local":
        raw = LocalStore(tmp_path / "storage", mkdir=True)
    else:
        raw = MemoryStore()
    return Backend(request.param, ObstoreStorage(raw), raw)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_local(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def flip_byte(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


class TestStorageContract:
    """What every Storage must do; the ``backend`` fixture picks the store."""

    async def test_put_returns_size_and_sha256_and_get_reads_it_back(
        self, backend: Backend
    ) -> None:
        data = b"state of subtask counter#0"
        stored = await backend.storage.put("checkpoints/1/counter-0.meta", data)
        assert stored == StoredFile("checkpoints/1/counter-0.meta", len(data), sha256(data))
        assert await backend.storage.get(stored.path) == data
        assert await backend.storage.size(stored.path) == len(data)
        assert await backend.storage.exists(stored.path)

    async def test_put_overwrites(self, backend: Backend) -> None:
        await backend.storage.put("attempts/3", b"old")
        await backend.storage.put("attempts/3", b"new")
        assert await backend.storage.get("attempts/3") == b"new"

    async def test_put_if_absent_refuses_a_taken_key_and_keeps_its_content(
        self, backend: Backend
    ) -> None:
        path = layout.checkpoint_manifest(7)
        first = await backend.storage.put_if_absent(path, b'{"checkpoint": 7}')
        with pytest.raises(AlreadyExistsError) as caught:
            await backend.storage.put_if_absent(path, b'{"checkpoint": "other"}')
        assert caught.value.path == path
        assert await backend.storage.get_verified(first) == b'{"checkpoint": 7}'

    async def test_concurrent_put_if_absent_has_exactly_one_winner(self, backend: Backend) -> None:
        for checkpoint_id in range(5):
            path = layout.checkpoint_manifest(checkpoint_id)
            payloads = [f"writer {i} commits {checkpoint_id}".encode() for i in range(10)]
            results = await asyncio.gather(
                *(backend.storage.put_if_absent(path, payload) for payload in payloads),
                return_exceptions=True,
            )
            winners = [(i, r) for i, r in enumerate(results) if isinstance(r, StoredFile)]
            losers = [r for r in results if isinstance(r, AlreadyExistsError)]
            assert len(winners) == 1, results
            assert len(losers) == 9, results
            assert {loser.path for loser in losers} == {path}
            index, stored = winners[0]
            assert await backend.storage.get_verified(stored) == payloads[index]

    async def test_missing_key(self, backend: Backend) -> None:
        path = "checkpoints/404/_manifest.json"
        with pytest.raises(NotFoundError) as caught:
            await backend.storage.get(path)
        assert caught.value.path == path
        with pytest.raises(NotFoundError):
            await backend.storage.size(path)
        with pytest.raises(NotFoundError):
            await backend.storage.get_verified(StoredFile(path, 0, sha256(b"")))
        assert not await backend.storage.exists(path)
        await backend.storage.delete(path)  # missing is fine

    async def test_delete_removes_the_file(self, backend: Backend) -> None:
        await backend.storage.put("blobs/run-1/payload", b"x")
        await backend.storage.delete("blobs/run-1/payload")
        assert not await backend.storage.exists("blobs/run-1/payload")
        assert await backend.storage.list("blobs") == []

    async def test_delete_many_removes_every_file_named_and_no_other(
        self, backend: Backend
    ) -> None:
        paths = [f"shared/{i:05d}" for i in range(1205)]  # more than one batch
        for path in [*paths, "shared/kept"]:
            await backend.storage.put(path, b"x")
        await backend.storage.delete_many(paths[:1200])
        assert await backend.storage.list("shared") == [*paths[1200:], "shared/kept"]
        await backend.storage.delete_many([paths[1201], "shared/never-there", paths[1203]])
        await backend.storage.delete_many([])  # nothing to do
        assert await backend.storage.list("shared") == [
            paths[1200], paths[1202], paths[1204], "shared/kept",
        ]  # fmt: skip

    async def test_a_prefix_is_not_a_file(self, backend: Backend) -> None:
        await backend.storage.put("savepoints/before-upgrade/meta.json", b"{}")
        assert not await backend.storage.exists("savepoints/before-upgrade")

    @pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
    async def test_get_verified_detects_damage(self, backend: Backend, damage: str) -> None:
        data = bytes(range(256)) * 64
        stored = await backend.storage.put(layout.shared_file(sha256(data)), data)
        bad = flip_byte(data, 1000) if damage == "flipped byte" else data[:-1]
        await backend.write_raw(stored.path, bad)

        with pytest.raises(CorruptFileError) as caught:
            await backend.storage.get_verified(stored)
        assert caught.value.path == stored.path
        assert caught.value.expected == stored
        assert caught.value.actual == StoredFile(stored.path, len(bad), sha256(bad))

    @pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
    async def test_download_verified_detects_damage_and_leaves_nothing(
        self, backend: Backend, tmp_path: Path, damage: str
    ) -> None:
        data = os.urandom(300_000)
        local = write_local(tmp_path / "000042.sst", data)
        stored = await backend.storage.put_file("shared/000042.sst", local)
        bad = flip_byte(data, len(data) // 2) if damage == "flipped byte" else data[:100_000]
        await backend.write_raw(stored.path, bad)
        restore_dir = tmp_path / "restore"
        restore_dir.mkdir()

        with pytest.raises(CorruptFileError) as caught:
            await backend.storage.download_verified(stored, restore_dir / "000042.sst")
        assert caught.value.actual.size == len(bad)
        assert list(restore_dir.iterdir()) == []

    async def test_multi_megabyte_file_round_trips(self, backend: Backend, tmp_path: Path) -> None:
        data = random.Random(7).randbytes(12 * MIB + 12345)  # several multipart parts
        local = write_local(tmp_path / "000007.sst", data)

        stored = await backend.storage.put_file("shared/big.sst", local)
        assert stored == StoredFile("shared/big.sst", len(data), sha256(data))
        assert await backend.storage.size(stored.path) == len(data)

        target = tmp_path / "restored" / "000007.sst"
        target.parent.mkdir()
        await backend.storage.download_verified(stored, target)
        assert target.read_bytes() == data
        assert sorted(p.name for p in target.parent.iterdir()) == ["000007.sst"]

    async def test_empty_file_round_trips(self, backend: Backend, tmp_path: Path) -> None:
        local = write_local(tmp_path / "LOCK", b"")
        stored = await backend.storage.put_file("checkpoints/1/LOCK", local)
        assert stored == StoredFile("checkpoints/1/LOCK", 0, sha256(b""))
        await backend.storage.download_verified(stored, tmp_path / "LOCK.restored")
        assert (tmp_path / "LOCK.restored").read_bytes() == b""

    async def test_content_addressed_upload_skips_identical_content(
        self, backend: Backend, tmp_path: Path
    ) -> None:
        data = os.urandom(200_000)
        # The same content under two local names: SST numbers repeat after a restore.
        first_local = write_local(tmp_path / "000010.sst", data)
        second_local = write_local(tmp_path / "000099.sst", data)

        first = await backend.storage.put_content_addressed(layout.SHARED, first_local)
        second = await backend.storage.put_content_addressed(layout.SHARED, second_local)

        expected = StoredFile(layout.shared_file(sha256(data)), len(data), sha256(data))
        assert (first.file, first.uploaded, first.uploaded_bytes) == (expected, True, len(data))
        assert (second.file, second.uploaded, second.uploaded_bytes) == (expected, False, 0)
        assert await backend.storage.list(layout.SHARED) == [expected.path]
        assert await backend.storage.get_verified(expected) == data

    async def test_content_addressed_upload_replaces_a_damaged_copy(
        self, backend: Backend, tmp_path: Path
    ) -> None:
        data = os.urandom(50_000)
        local = write_local(tmp_path / "000011.sst", data)
        await backend.write_raw(layout.shared_file(sha256(data)), data[:10])

        result = await backend.storage.put_content_addressed(layout.SHARED, local)
        assert result.uploaded
        assert await backend.storage.get_verified(result.file) == data

    async def test_content_addressed_upload_takes_the_callers_checksum_and_checks_it(
        self, backend: Backend, tmp_path: Path
    ) -> None:
        data = os.urandom(30_000)
        local = write_local(tmp_path / "000012.sst", data)
        result = await backend.storage.put_content_addressed(
            layout.SHARED, local, sha256=sha256(data)
        )
        assert result.file == StoredFile(layout.shared_file(sha256(data)), len(data), sha256(data))
        assert await backend.storage.get_verified(result.file) == data

        wrong = sha256(b"other content")
        with pytest.raises(LocalFileChangedError):
            await backend.storage.put_content_addressed(layout.SHARED, local, sha256=wrong)
        assert not await backend.storage.exists(layout.shared_file(wrong))
        with pytest.raises(ValueError, match="64 lowercase hex"):
            await backend.storage.put_content_addressed(layout.SHARED, local, sha256="ABC")

    async def test_list_is_recursive_sorted_and_matches_whole_segments(
        self, backend: Backend
    ) -> None:
        keys = [
            layout.checkpoint_manifest(10),
            layout.checkpoint_manifest(1),
            "checkpoints/1/counter-0/MANIFEST-000005",
            "checkpoints/1/counter-0/CURRENT",
            layout.checkpoint_manifest(2),
            layout.shared_file("a" * 64),
            layout.attempt_marker(1),
        ]
        for key in random.Random(3).sample(keys, len(keys)):
            await backend.storage.put(key, b"-")

        assert await backend.storage.list() == sorted(keys)
        assert await backend.storage.list("checkpoints/1") == [
            "checkpoints/1/_manifest.json",
            "checkpoints/1/counter-0/CURRENT",
            "checkpoints/1/counter-0/MANIFEST-000005",
        ]
        assert await backend.storage.list(layout.CHECKPOINTS) == sorted(
            k for k in keys if k.startswith("checkpoints/")
        )
        assert await backend.storage.list("savepoints") == []

    @pytest.mark.parametrize("path", ["/etc/passwd", "../escape", "a//b", "a/./b", "a/", ""])
    async def test_invalid_keys_are_refused_before_any_io(
        self, backend: Backend, tmp_path: Path, path: str
    ) -> None:
        local = write_local(tmp_path / "f", b"x")
        storage = backend.storage
        described = StoredFile(path, 1, sha256(b"x"))
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: storage.put(path, b"x"),
            lambda: storage.put_if_absent(path, b"x"),
            lambda: storage.put_file(path, local),
            lambda: storage.get(path),
            lambda: storage.get_verified(described),
            lambda: storage.download_verified(described, tmp_path / "o"),
            lambda: storage.exists(path),
            lambda: storage.delete(path),
            lambda: storage.size(path),
        ]
        for call in calls:
            with pytest.raises(InvalidPathError) as caught:
                await call()
            assert caught.value.path == path
        if path:  # "" is a valid prefix (everything); the others are not
            with pytest.raises(InvalidPathError):
                await backend.storage.list(path)
            with pytest.raises(InvalidPathError):
                await backend.storage.put_content_addressed(path, local)
        assert await backend.storage.list() == []

    def test_implements_the_protocol(self, backend: Backend) -> None:
        assert isinstance(backend.storage, Storage)

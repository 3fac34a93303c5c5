"""The blob store on in-memory and local storage: written once, verified reads, erasure by
subject as a prefix delete, and TTL collection with an injected clock."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sluicegate.operators.storage import CorruptFileError, NotFoundError, Storage, open_storage
from sluicegate.operators.storage.blobs import BlobMeta, BlobStore, subject_digest

ALICE, BOB = subject_digest("alice"), subject_digest("bob")


@pytest.fixture(params=["memory", "local"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    return open_storage("memory://" if request.param == "memory" else tmp_path / "s")


def meta(data: bytes, *, subject: str = ALICE, blob: str = "1" * 32, expires_at: float | None
         = None) -> BlobMeta:  # fmt: skip
    return BlobMeta(
        id=blob, subject=subject, scope="desk", size=len(data),
        sha256=hashlib.sha256(data).hexdigest(), created_at=100.0, expires_at=expires_at,
    )  # fmt: skip


async def test_a_payload_is_written_once_and_read_back_verified(storage: Storage) -> None:
    store = BlobStore(storage)
    first = await store.put(meta(b"payload"), b"payload")
    again = await store.put(meta(b"payload"), b"payload")
    assert (first.uploaded, again.uploaded) == (True, False)
    got = await store.get(ALICE, "1" * 32, size=7, sha256=first.meta.sha256)
    assert got == b"payload"
    assert await storage.list("blobs") == [
        f"blobs/{ALICE}/{'1' * 32}",
        f"blobs/{ALICE}/{'1' * 32}.meta",
    ]


async def test_a_retry_with_other_content_replaces_it(storage: Storage) -> None:
    store = BlobStore(storage)
    await store.put(meta(b"one"), b"one")
    written = await store.put(meta(b"two!"), b"two!")
    assert written.uploaded
    assert await store.get(ALICE, "1" * 32, size=4, sha256=written.meta.sha256) == b"two!"


async def test_a_payload_lost_after_its_metadata_is_written_again(storage: Storage) -> None:
    store = BlobStore(storage)
    await store.put(meta(b"payload"), b"payload")
    await storage.delete(f"blobs/{ALICE}/{'1' * 32}")
    assert (await store.put(meta(b"payload"), b"payload")).uploaded


async def test_reads_refuse_changed_bytes_and_report_missing_ones(storage: Storage) -> None:
    store = BlobStore(storage)
    written = await store.put(meta(b"payload"), b"payload")
    await storage.put(f"blobs/{ALICE}/{'1' * 32}", b"PAYLOAD")
    with pytest.raises(CorruptFileError):
        await store.get(ALICE, "1" * 32, size=7, sha256=written.meta.sha256)
    with pytest.raises(NotFoundError):
        await store.get(BOB, "1" * 32, size=7, sha256=written.meta.sha256)


async def test_data_not_matching_its_metadata_is_refused(storage: Storage) -> None:
    with pytest.raises(ValueError, match="do not describe"):
        await BlobStore(storage).put(meta(b"payload"), b"other")


async def test_erasure_deletes_one_subject_only(storage: Storage) -> None:
    store = BlobStore(storage)
    await store.put(meta(b"a1"), b"a1")
    await store.put(meta(b"a2", blob="2" * 32), b"a2")
    await store.put(meta(b"b1", subject=BOB), b"b1")
    assert await store.erase(ALICE) == 4
    assert [b.meta.subject for b in await store.list() if b.meta] == [BOB]
    assert await store.list(ALICE) == []


async def test_gc_deletes_what_expired_by_the_clock_it_is_given(storage: Storage) -> None:
    store = BlobStore(storage)
    await store.put(meta(b"old", expires_at=200.0), b"old")
    await store.put(meta(b"new", blob="2" * 32, expires_at=400.0), b"new")
    await store.put(meta(b"ever", blob="3" * 32), b"ever")
    report = await store.collect_expired(now=199.0)
    assert (report.scanned, report.deleted) == (3, 0)
    report = await store.collect_expired(now=200.0)
    assert (report.deleted, report.deleted_bytes) == (1, 3)
    assert sorted(b.meta.id for b in await store.list() if b.meta) == ["2" * 32, "3" * 32]
    report = await store.collect_expired(now=10**12)
    assert report.deleted == 1
    assert [b.meta.id for b in await store.list() if b.meta] == ["3" * 32]


async def test_gc_leaves_unreadable_metadata_and_deletes_payloads_without_any(
    storage: Storage,
) -> None:
    store = BlobStore(storage)
    await storage.put(f"blobs/{ALICE}/{'4' * 32}.meta", b"not json")
    await storage.put(f"blobs/{ALICE}/{'5' * 32}.meta", b"x" * 5000)
    await storage.put(f"blobs/{ALICE}/{'6' * 32}", b"orphan")
    report = await store.collect_expired(now=0.0)
    assert (report.invalid, report.deleted) == (2, 1)
    assert not await storage.exists(f"blobs/{ALICE}/{'6' * 32}")
    problems = [b.problem for b in await store.list()]
    assert len(problems) == 2
    assert all(problems)

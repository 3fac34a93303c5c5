"""``sluicegate blobs list|erase|gc`` on a local blob store, and the coordinator's collection
of expired blobs on an interval."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from sluicegate.cli.blobs import register
from sluicegate.coordinator.housekeeping import Housekeeping
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.blobs import BlobMeta, BlobStore, subject_digest


def main(argv: list[str]) -> int:
    """The ``blobs`` commands as ``sluicegate`` parses them (no logging set up)."""
    parser = argparse.ArgumentParser(prog="sluicegate")
    register(parser.add_subparsers(required=True))
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


def put(root: Path, subject: str, blob: str, expires_at: float | None) -> None:
    data = blob.encode()
    meta = BlobMeta(
        id=blob, subject=subject_digest(subject), scope="desk", size=len(data),
        sha256=hashlib.sha256(data).hexdigest(), created_at=0.0, expires_at=expires_at,
    )  # fmt: skip
    asyncio.run(BlobStore(open_storage(root)).put(meta, data))


def test_list_erase_and_gc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    put(store, "alice", "1" * 32, None)
    put(store, "alice", "2" * 32, 1.0)  # long expired
    put(store, "bob", "3" * 32, None)
    assert main(["blobs", "list", "--json", "--storage", str(store)]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3
    assert main(["blobs", "list", "--subject", "bob", "--storage", str(store)]) == 0
    out = capsys.readouterr().out
    assert "3" * 32 in out
    assert "1" * 32 not in out
    assert main(["blobs", "gc", "--json", "--storage", str(store)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["scanned"], report["deleted"], report["invalid"]) == (3, 1, 0)
    assert main(["blobs", "erase", "--subject", "alice", "--storage", str(store)]) == 0
    assert "2 files deleted" in capsys.readouterr().out
    assert main(["blobs", "list", "--storage", str(store)]) == 0
    out = capsys.readouterr().out
    assert "3" * 32 in out
    assert "1" * 32 not in out


def test_erase_needs_a_subject(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["blobs", "erase", "--storage", str(tmp_path)])


async def test_the_coordinator_collects_expired_blobs_at_most_once_an_interval() -> None:
    storage = open_storage("memory://")
    store = BlobStore(storage)
    wall, mono = [100.0], [0.0]
    housekeeping = Housekeeping(
        storage, keep=3, audit_every=10, blob_gc_interval_s=60.0,
        clock=lambda: wall[0], monotonic=lambda: mono[0],
    )  # fmt: skip

    async def expiring(blob: str, at: float) -> None:
        data = blob.encode()
        await store.put(BlobMeta(
            id=blob, subject=subject_digest("s"), scope="desk", size=len(data),
            sha256=hashlib.sha256(data).hexdigest(), created_at=0.0, expires_at=at,
        ), data)  # fmt: skip

    await expiring("1" * 32, 50.0)
    await housekeeping.after_completed(1, pinned=())
    assert await store.list() == []
    await expiring("2" * 32, 50.0)
    mono[0] = 30.0
    await housekeeping.after_completed(2, pinned=())
    assert len(await store.list()) == 1  # within the interval: not yet
    mono[0] = 61.0
    await housekeeping.after_completed(3, pinned=())
    assert await store.list() == []

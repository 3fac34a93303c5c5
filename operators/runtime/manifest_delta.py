"""RocksDB's MANIFEST stored as what was appended to it since the previous checkpoint.

Within one database lifetime RocksDB only appends to its MANIFEST (it starts a new one when the
database is opened, and when one outgrows ``max_manifest_file_size``), and every local
checkpoint holds a copy of it. Stored whole, it made each checkpoint's upload grow with the
number of files in the database (the MANIFEST lists every live file and every edit since the
open): 10-12 KB at 100,000 parked runs for about 200 bytes of new edits a checkpoint.

:class:`ManifestDeltas` remembers how the previous checkpoint stored the MANIFEST. When this
checkpoint's MANIFEST has the same name and begins with exactly those bytes (same size prefix,
same sha256), only the appended bytes are put, content-addressed under ``shared/``, and the
handle lists the file with ``parts`` (the previous parts, then the new one). Retention counts
references by path, so every part stays while a checkpoint names it; a restore
(:func:`assemble`) reads the parts verified, joins them and checks the whole file's size and
sha256, so a damaged part makes the checkpoint corrupt (the restore falls back, as for any
file). A handle written before parts existed names the whole MANIFEST and restores as before.

Steps for one checkpoint, in order:

1. :meth:`ManifestDeltas.plan` (blocking reads: in the worker thread that checksums the
   checkpoint): store the MANIFEST whole when there is no previous one, it has another name,
   it is smaller or begins differently, or the previous one has `MAX_PARTS` parts already (a
   restore reads each part; whole, the chain starts again); otherwise a delta of the bytes
   appended (possibly none);
2. :func:`put_delta`, with the other non-SST files, after the SSTs (the barrier
   protocol's order): put the delta;
3. :meth:`ManifestDeltas.remember` once the whole checkpoint is in storage, as the uploader
   remembers its SSTs; a checkpoint that failed halfway leaves the previous one remembered.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sluicegate.operators.protocol.messages import FilePart, SnapshotFile
from sluicegate.operators.state.local_checkpoint import CheckpointFile, FileKind, classify
from sluicegate.operators.storage import CorruptFileError, Storage, StoredFile
from sluicegate.operators.storage.layout import SHARED

__all__ = ["MAX_PARTS", "ManifestDelta", "ManifestDeltas", "assemble", "put_delta"]

MAX_PARTS = 32
"""Parts of one stored MANIFEST at most: the first copy and 31 deltas, then whole again."""

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class ManifestDelta:
    """The MANIFEST ``name`` (``size`` bytes, ``sha256``) stored as ``previous`` plus
    ``appended`` (its bytes after ``previous.size``; empty when nothing was appended)."""

    name: str
    size: int
    sha256: str
    previous: SnapshotFile
    appended: bytes


class ManifestDeltas:
    """How the last uploaded checkpoint stored its MANIFEST, and the deltas against it."""

    def __init__(self) -> None:
        self._last: SnapshotFile | None = None

    def plan(self, directory: Path, entries: Iterable[CheckpointFile]) -> ManifestDelta | None:
        """Step 1: the delta for the MANIFEST among ``entries`` of ``directory``, or None to
        store it whole. Blocking file reads."""
        last = self._last
        if last is None or len(last.parts) >= MAX_PARTS:
            return None
        for entry in entries:
            if entry.kind is FileKind.MANIFEST and entry.name == last.name:
                if entry.size < last.size or entry.sha256 is None:
                    return None
                appended = _appended(directory / entry.name, last, entry.sha256)
                if appended is None or last.size + len(appended) != entry.size:
                    return None
                return ManifestDelta(entry.name, entry.size, entry.sha256, last, appended)
        return None

    def remember(self, files: Iterable[SnapshotFile]) -> None:
        """Step 3: ``files`` (a checkpoint's, all in ``shared/``) are in storage."""
        self._last = next((f for f in files if classify(f.name) is FileKind.MANIFEST), None)

    def forget(self) -> None:
        """The next MANIFEST is stored whole (after a full checkpoint, which shares nothing)."""
        self._last = None


async def put_delta(storage: Storage, delta: ManifestDelta) -> tuple[SnapshotFile, int]:
    """Step 2: put ``delta``'s appended bytes under ``shared/<sha256>``; the file as the
    handle lists it, and the bytes sent."""
    previous = delta.previous
    earlier = previous.parts or (
        FilePart(path=previous.path, size=previous.size, sha256=previous.sha256),
    )
    if not delta.appended:
        return previous, 0
    digest = hashlib.sha256(delta.appended).hexdigest()
    # Always put, never skip on an existing key: an orphan with these bytes may be
    # deleted by the audit (retention.py, "what the rule cannot close").
    stored = await storage.put(f"{SHARED}/{digest}", delta.appended)
    part = FilePart(path=stored.path, size=stored.size, sha256=stored.sha256)
    whole = SnapshotFile(
        name=delta.name,
        path=earlier[0].path,
        size=delta.size,
        sha256=delta.sha256,
        parts=(*earlier, part),
    )
    return whole, stored.size


def _appended(path: Path, last: SnapshotFile, sha256: str) -> bytes | None:
    """The bytes of ``path`` after ``last.size`` if the ones before are ``last``'s and the
    whole file is still the one checksummed as ``sha256``, else None."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        left = last.size
        while left:
            chunk = stream.read(min(left, _CHUNK))
            if not chunk:
                return None
            digest.update(chunk)
            left -= len(chunk)
        if digest.hexdigest() != last.sha256:
            return None
        appended = stream.read()
    digest.update(appended)
    return appended if digest.hexdigest() == sha256 else None


async def assemble(storage: Storage, entry: SnapshotFile, local_path: Path) -> None:
    """Write the file ``entry`` stored in ``parts`` to ``local_path``: every part read and
    verified, joined, the whole checked against ``entry``'s size and sha256 before it is
    renamed into place. CorruptFileError (or NotFoundError) when a part or the whole is not
    what the handle says; ``local_path`` then does not exist."""
    parts = await asyncio.gather(
        *(storage.get_verified(StoredFile(p.path, p.size, p.sha256)) for p in entry.parts)
    )
    data = b"".join(parts)
    actual = StoredFile(entry.path, len(data), hashlib.sha256(data).hexdigest())
    if (actual.size, actual.sha256) != (entry.size, entry.sha256):
        expected = StoredFile(entry.path, entry.size, entry.sha256)
        raise CorruptFileError(entry.path, expected, actual)
    await asyncio.to_thread(_write_atomically, local_path, data)


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""The keyed state of one subtask in one RocksDB database, through rocksdict.

Partitions are key prefixes in one column family, not column families: see
:mod:`operators.state.codec` for the layout and the measurements behind it.

Writes go to the pending write batch (:class:`~operators.state.store.PendingWrites`),
which reads consult first; :meth:`RocksDBStateStore.flush_batch` applies it as
one atomic ``WriteBatch``, and so does a write that fills it to
``max_pending_writes`` keys, so its memory is bounded.

RocksDB tuning (:class:`~operators.state.codec.RocksDBSettings`) is explained in
:mod:`operators.state.codec`.
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

from rocksdict import Rdict, WriteBatch

from sluicegate.operators.state import codec
from sluicegate.operators.state.changelog import (
    ChangelogFormatError,
    ChangelogWriter,
    Op,
    read_segment,
)
from sluicegate.operators.state.codec import RocksDBSettings
from sluicegate.operators.state.exceptions import (
    ReservedKeyError,
    StateClosedError,
    StateIOError,
    StateOpenError,
    StateSchemaVersionError,
)
from sluicegate.operators.state.local_checkpoint import (
    FileKind,
    LocalCheckpoint,
    SstKey,
    classify,
    copy_checkpoint_files,
    create_local_checkpoint,
    relink_local_checkpoint,
)
from sluicegate.operators.state.store import PartitionId, PendingWrites

__all__ = ["SCHEMA_VERSION", "RocksDBPartitionState", "RocksDBStateStore"]

logger = logging.getLogger(__name__)

#: Layout version written into every new database and checked on open.
SCHEMA_VERSION = 1

_Rows = Generator[tuple[bytes, bytes], None, None]


class RocksDBPartitionState:
    """The rows under one key prefix of a :class:`RocksDBStateStore` (a partition or metadata)."""

    __slots__ = ("_prefix", "_reserved", "_store")

    def __init__(
        self, store: RocksDBStateStore, prefix: bytes, reserved: frozenset[bytes] = frozenset()
    ) -> None:
        self._store = store
        self._prefix = prefix
        self._reserved = reserved

    # get and put are on the per-record path: their checks are inline (a Python call costs
    # about as much as the dictionary work), the helpers only raise.

    def get(self, key: bytes) -> bytes | None:
        """Return the value under ``key`` (pending writes included), or None."""
        if type(key) is not bytes:
            codec.require_bytes("key", key)  # raises
        return self._store._get(self._prefix + key)

    def put(self, key: bytes, value: bytes) -> None:
        """Store ``value`` under ``key`` in the pending write batch."""
        if type(key) is not bytes or type(value) is not bytes:
            codec.require_bytes("key", key)  # one of the two raises
            codec.require_bytes("value", value)
        if key in self._reserved:
            raise ReservedKeyError(key)
        self._store._write(self._prefix + key, value)

    def delete(self, key: bytes) -> None:
        """Delete ``key`` in the pending write batch; a missing key is not an error."""
        self._store._write(self._stored_key(key), None)

    def items(self, *, prefix: bytes = b"") -> _Rows:
        """Yield ``(key, value)`` of the rows whose key starts with ``prefix``, in key order."""
        start = self._prefix + codec.require_bytes("prefix", prefix)
        return self._store._items(start, codec.prefix_successor(start), len(self._prefix))

    def _stored_key(self, key: bytes) -> bytes:
        if codec.require_bytes("key", key) in self._reserved:
            raise ReservedKeyError(key)
        return self._prefix + key


class RocksDBStateStore:
    """The keyed state of one subtask: one RocksDB database, rows separable per input partition.

    Create it with :meth:`open` or :meth:`restore`; it is a context manager.
    Not thread-safe: the subtask's single task owns it.
    """

    def __init__(self, db: Any, path: Path, settings: RocksDBSettings) -> None:
        """Wrap an open rocksdict ``Rdict``; use :meth:`open` or :meth:`restore` instead."""
        self._db: Any = db
        self._path = path
        self._settings = settings
        self._pending = PendingWrites()
        self._handles: dict[tuple[str, int], RocksDBPartitionState] = {}
        self._iterators: weakref.WeakSet[_Rows] = weakref.WeakSet()
        self._metadata = RocksDBPartitionState(
            self, codec.META_PREFIX, frozenset({codec.SCHEMA_VERSION_KEY})
        )
        self._flushed_sequence = -1
        """Latest sequence number when the memtable was last flushed (-1: not yet)."""
        self._last_checkpoint: tuple[int, LocalCheckpoint] | None = None
        """The latest local checkpoint and the sequence number it holds. Its inventory is
        the next one's start (SSTs of the same name reused), so it must be of this
        instance: a restored store is a new instance and starts with None."""
        self.changelog: ChangelogWriter | None = None
        """Where every write is logged before RocksDB applies it (None: the changelog is off)."""

    @classmethod
    def open(cls, path: Path, *, settings: RocksDBSettings | None = None) -> RocksDBStateStore:
        """Open the database at ``path``, creating it if the directory holds none.

        1. note whether ``path`` already holds a database (a ``CURRENT`` file);
        2. open it in rocksdict raw mode;
        3. new database: write ``schema_version`` and flush it to an SST, so the
           version is in every checkpoint; existing database: refuse any
           ``schema_version`` other than :data:`SCHEMA_VERSION`.
        """
        settings = settings or RocksDBSettings()
        path.mkdir(parents=True, exist_ok=True)
        existed = (path / "CURRENT").exists()
        try:
            db = Rdict(str(path), settings.to_rocksdict())
        except Exception as exc:
            raise StateOpenError(path, str(exc)) from exc
        store = cls(db, path, settings)
        try:
            if existed:
                store._check_schema_version()
            else:  # written directly, not batched: the version must precede any row
                version = codec.encode_schema_version(SCHEMA_VERSION)
                db.put(codec.META_PREFIX + codec.SCHEMA_VERSION_KEY, version)
                db.flush(wait=True)
                store._flushed_sequence = db.latest_sequence_number()
        except BaseException:
            store.close()
            raise
        logger.info("state store opened", extra={"path": str(path), "new_store": not existed})
        return store

    @classmethod
    def restore(
        cls, from_dir: Path, into_dir: Path, *, settings: RocksDBSettings | None = None
    ) -> RocksDBStateStore:
        """Open a new database at ``into_dir`` from the files of checkpoint folder ``from_dir``.

        1. link or copy the RocksDB files:
           :func:`~operators.state.local_checkpoint.copy_checkpoint_files`; with the changelog,
           a folder of segments alone, or an empty one (nothing materialized yet, nothing
           written) starts from a new database;
        2. :meth:`open` ``into_dir``, which checks ``schema_version``;
        3. replay the changelog segments of ``from_dir`` in name order (none without the
           changelog); a damaged segment raises :class:`ChangelogFormatError`.
        """
        entries = list(from_dir.iterdir()) if from_dir.is_dir() else None
        segments = sorted(p for p in entries or () if classify(p.name) is FileKind.CHANGELOG)
        if entries is None or len(segments) < len(entries):  # RocksDB's files (or no folder)
            copy_checkpoint_files(from_dir, into_dir)  # which refuses what is not a checkpoint
        store = cls.open(into_dir, settings=settings)
        try:
            for segment in segments:
                store._replay(segment)
        except BaseException:
            store.close()
            raise
        return store

    @property
    def path(self) -> Path:
        """The database directory."""
        return self._path

    @property
    def pending_writes(self) -> int:
        """Number of keys written since the last :meth:`flush_batch`."""
        return len(self._pending)

    def partition(self, topic: str, partition: int) -> RocksDBPartitionState:
        """Return the rows of input partition ``topic[partition]``."""
        handle = self._handles.get((topic, partition))
        if handle is None:
            prefix = codec.partition_prefix(PartitionId(topic, partition))
            handle = self._handles[topic, partition] = RocksDBPartitionState(self, prefix)
        return handle

    def metadata(self) -> RocksDBPartitionState:
        """Return the subtask's own metadata rows; ``schema_version`` is read-only."""
        return self._metadata

    def partitions(self) -> list[PartitionId]:
        """Return, sorted, every partition that holds at least one row (pending writes included)."""
        db = self._require_open()
        found: set[PartitionId] = set()
        cursor = db.iter()
        try:  # seek from one partition's prefix to the next: one seek per partition
            cursor.seek(bytes([codec.PARTITION_TAG]))
            while cursor.valid() and (decoded := codec.decode_partition(cursor.key())) is not None:
                found.add(decoded[0])
                cursor.seek(codec.prefix_successor(cursor.key()[: decoded[1]]))
        finally:
            del cursor  # a live rocksdict iterator keeps the database open
        found.update(
            d[0] for k, _ in self._pending.writes() if (d := codec.decode_partition(k)) is not None
        )
        return sorted(p for p in found if self._has_rows(p))

    def drop_partition(self, topic: str, partition: int) -> None:
        """Delete every row of ``topic[partition]`` (after rescaling moved it elsewhere).

        1. apply the pending write batch, so no pending write outlives the drop;
        2. write one range tombstone over the partition's prefix.
        """
        prefix = codec.partition_prefix(PartitionId(topic, partition))
        stop = codec.prefix_successor(prefix)
        assert stop is not None  # a partition prefix starts with PARTITION_TAG, not 0xff
        self.flush_batch()
        if self.changelog is not None:
            self.changelog.append((), [(prefix, stop)])
        try:
            self._require_open().delete_range(prefix, stop)
        except Exception as exc:
            raise StateIOError("drop partition", self._path, str(exc)) from exc

    def flush_batch(self) -> None:
        """Apply the pending writes to RocksDB in one atomic ``WriteBatch``."""
        db = self._require_open()
        if not self._pending:
            return
        writes = self._pending.writes()
        if self.changelog is not None:
            self.changelog.append(writes)
        batch = WriteBatch(raw_mode=True)
        for key, value in writes:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        try:
            db.write(batch)
        except Exception as exc:
            raise StateIOError("write batch", self._path, str(exc)) from exc
        self._pending.clear()

    def flush_memtable(self) -> None:
        """Apply the pending write batch and flush the memtable to an SST, if anything changed
        since the last flush. RocksDB releases the GIL while it writes the SST, so a subtask
        calls this from a worker thread right before :meth:`take_local_checkpoint`, and the
        other subtasks of the process run meanwhile; nothing else may use the store until it
        returns."""
        self.flush_batch()
        db = self._require_open()
        sequence: int = db.latest_sequence_number()
        if sequence == self._flushed_sequence:
            return
        try:
            db.flush(wait=True)
        except Exception as exc:
            raise StateIOError("flush", self._path, str(exc)) from exc
        self._flushed_sequence = sequence

    def has_unflushed_writes(self) -> bool:
        """Whether :meth:`flush_memtable` would have anything to do."""
        db = self._require_open()
        return bool(self._pending) or db.latest_sequence_number() != self._flushed_sequence

    def take_local_checkpoint(
        self, checkpoint_id: int, root: Path, *, uploaded: Mapping[SstKey, str] | None = None
    ) -> LocalCheckpoint:
        """Take the synchronous part of checkpoint ``checkpoint_id`` into ``root/<checkpoint_id>``.

        1. apply the pending write batch, so the checkpoint holds every write so far;
        2. when nothing was written since the previous local checkpoint (same latest sequence
           number) and its folder is still there: link its files into the new folder
           (:func:`~operators.state.local_checkpoint.relink_local_checkpoint`), RocksDB is
           not called;
        3. otherwise flush the memtable, create the RocksDB checkpoint (hard links) and list
           its files: :func:`~operators.state.local_checkpoint.create_local_checkpoint`.

        SSTs whose ``(name, size)`` is in ``uploaded`` (-> sha256) are not new. SSTs the
        previous local checkpoint of this store listed keep their entry (this instance is one
        database lifetime: an SST name is never reused within it).
        ``sync_duration_seconds`` of the inventory covers these steps; nothing is hashed.
        """
        started = time.perf_counter()
        self.flush_batch()
        db = self._require_open()
        sequence: int = db.latest_sequence_number()
        local = self._relink_unchanged(sequence, checkpoint_id, root, uploaded or {})
        if local is None:
            previous = self._last_checkpoint[1].inventory if self._last_checkpoint else None
            local = create_local_checkpoint(
                db, self._path, checkpoint_id, root, uploaded=uploaded or {}, previous=previous
            )
            self._flushed_sequence = sequence
        self._last_checkpoint = (sequence, local)
        elapsed = time.perf_counter() - started
        inventory = local.inventory.model_copy(update={"sync_duration_seconds": elapsed})
        logger.info(
            "local checkpoint taken",
            extra={"checkpoint_id": checkpoint_id, "sync_seconds": elapsed, "path": str(root)},
        )
        return LocalCheckpoint(directory=local.directory, inventory=inventory)

    def _relink_unchanged(
        self, sequence: int, checkpoint_id: int, root: Path, uploaded: Mapping[SstKey, str]
    ) -> LocalCheckpoint | None:
        """The previous local checkpoint linked anew if the database has not changed since and
        its folder is whole; else None (a new RocksDB checkpoint is needed)."""
        previous = self._last_checkpoint
        if previous is None or previous[0] != sequence or not previous[1].directory.is_dir():
            return None
        try:
            return relink_local_checkpoint(previous[1], checkpoint_id, root, uploaded=uploaded)
        except StateIOError as exc:  # e.g. a file of it was deleted meanwhile
            logger.warning("local checkpoint %s not reused: %s", previous[1].directory, exc)
            return None

    def close(self) -> None:
        """Apply pending writes, end open iterations and close the database; idempotent."""
        if self._db is None:
            return
        try:
            self.flush_batch()
        finally:
            for iteration in list(self._iterators):
                iteration.close()
            db, self._db = self._db, None
            self._last_checkpoint = None  # the lifetime whose SST names it holds has ended
            try:
                db.close()
            except Exception as exc:
                raise StateIOError("close", self._path, str(exc)) from exc

    def __enter__(self) -> RocksDBStateStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _require_open(self) -> Any:
        if self._db is None:
            raise StateClosedError(self._path)
        return self._db

    def _get(self, stored_key: bytes) -> bytes | None:
        if self._db is None:
            raise StateClosedError(self._path)
        pending = self._pending
        if stored_key in pending:
            return pending[stored_key]
        value: bytes | None = self._db.get(stored_key)
        return value

    def _write(self, stored_key: bytes, value: bytes | None) -> None:
        if self._db is None:
            raise StateClosedError(self._path)
        pending = self._pending
        pending[stored_key] = value
        if len(pending) >= self._settings.max_pending_writes:
            self.flush_batch()

    def _items(self, start: bytes, stop: bytes | None, strip: int) -> _Rows:
        db = self._require_open()
        iteration = self._pending.overlay(db.items(from_key=start), start, stop, strip)
        self._iterators.add(iteration)
        return iteration

    def _has_rows(self, pid: PartitionId) -> bool:
        with contextlib.closing(self.partition(pid.topic, pid.partition).items()) as rows:
            return next(rows, None) is not None

    def _replay(self, segment: Path) -> None:
        """Apply the records of changelog ``segment`` in order, in batches of at most
        ``max_pending_writes`` records (not logged again)."""
        db = self._require_open()
        batch, count = WriteBatch(raw_mode=True), 0
        try:
            for operation, key, value in read_segment(segment):
                if operation is Op.DELETE_RANGE:
                    db.write(batch)
                    batch, count = WriteBatch(raw_mode=True), 0
                    assert value is not None
                    db.delete_range(key, value)
                    continue
                if operation is Op.PUT:
                    batch.put(key, value)
                else:
                    batch.delete(key)
                count += 1
                if count >= self._settings.max_pending_writes:
                    db.write(batch)
                    batch, count = WriteBatch(raw_mode=True), 0
            db.write(batch)
        except ChangelogFormatError:
            raise
        except Exception as exc:
            raise StateIOError("changelog replay", segment, str(exc)) from exc

    def _check_schema_version(self) -> None:
        raw = self._metadata.get(codec.SCHEMA_VERSION_KEY)
        found = None
        if raw is not None:
            try:
                found = codec.decode_schema_version(raw)
            except ValueError as exc:
                raise StateOpenError(self._path, str(exc)) from exc
        if found != SCHEMA_VERSION:
            raise StateSchemaVersionError(self._path, found, SCHEMA_VERSION)

"""The journal contract (:class:`Journal`), its local index, and an in-memory journal for tests.

Every implementation keeps the same index, :class:`JournalIndex`: per idempotency key, the
latest ``issued`` and the first ``done`` entry, and per run, its keys. ``issued`` and ``done``
are separate slots, so a late ``issued`` (a zombie, a retry) never hides a ``done``; and a
``done`` is written once: a later one (a retry's error after a success whose acknowledgement was
lost, a zombie's) never replaces it. A ``done`` whose write raised may be durable: the index
holds it as unacknowledged, and the driver writes that same entry again instead of calling.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from sluicegate.agents.journal.entries import EntryStatus, JournalEntry

__all__ = ["InMemoryJournal", "Journal", "JournalIndex", "StatusCounts"]

StatusCounts = dict[str, int]
_STATUSES: tuple[EntryStatus, ...] = ("issued", "done")


class Journal(Protocol):
    """The durable, never-rolled-back record of effects, keyed by idempotency key.

    A journal serves the partitions of the subtask that owns it (partitioned like the runs);
    ``partition`` on writes names the run's partition.
    """

    def get(self, key: str) -> tuple[JournalEntry | None, JournalEntry | None]:
        """The latest ``(issued, done)`` entries of effect ``key``, ``None`` where absent."""
        ...

    def unacknowledged(self, key: str) -> JournalEntry | None:
        """The ``done`` of ``key`` whose write raised (it may be durable), until a ``done`` of
        ``key`` is written; ``None`` if there is none."""
        ...

    def write(self, entry: JournalEntry, *, partition: int) -> Awaitable[None]:
        """Append ``entry`` to ``partition``; the awaitable completes only once it is durable.

        A journal may hand the entry over when called (`KafkaJournal` does) or when awaited (a
        coroutine); entries handed over land in that order. A ``done`` for a key that has one
        is not written: the first ``done`` stays. On an exception the entry may or may not be
        durable, and :meth:`get` does not show it; a ``done`` is then shown by
        :meth:`unacknowledged`.
        """
        ...

    async def forget_run(self, run_id: str, *, partition: int) -> int:
        """Tombstone every entry of run ``run_id`` held in ``partition``; return once durable.

        Returns how many tombstones were written: two per effect key, one for each status.
        """
        ...

    def entries_by_status(self) -> StatusCounts:
        """How many keys are ``issued`` (with no ``done``) and how many are ``done``."""
        ...


class JournalIndex:
    """The local index of a journal's partitions: what :meth:`Journal.get` answers from."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[EntryStatus, JournalEntry]] = {}
        self._partition_of: dict[str, int] = {}
        self._runs: dict[str, set[str]] = {}
        self._unacknowledged: dict[str, JournalEntry] = {}

    def get(self, key: str) -> tuple[JournalEntry | None, JournalEntry | None]:
        """The latest ``(issued, done)`` entries of ``key``."""
        slots = self._entries.get(key, {})
        return slots.get("issued"), slots.get("done")

    def has_done(self, key: str) -> bool:
        """Whether ``key`` has a ``done``: a write of another one would be refused."""
        return "done" in self._entries.get(key, {})

    def put(self, entry: JournalEntry, partition: int) -> None:
        """Record ``entry`` (in log order): an ``issued`` replaces the previous ``issued`` of
        its key; a ``done`` is kept only if its key has none, so the first ``done`` stays."""
        slots = self._entries.setdefault(entry.key, {})
        if entry.status == "done":
            self._unacknowledged.pop(entry.key, None)
            if "done" in slots:
                return
        slots[entry.status] = entry
        self._partition_of[entry.key] = partition
        self._runs.setdefault(entry.run_id, set()).add(entry.key)

    def hold(self, entry: JournalEntry) -> None:
        """Remember a ``done`` whose write raised: it may be durable (see `unacknowledged`)."""
        if entry.status == "done" and not self.has_done(entry.key):
            self._unacknowledged.setdefault(entry.key, entry)

    def unacknowledged(self, key: str) -> JournalEntry | None:
        """The ``done`` held for ``key`` by `hold`, until a ``done`` of ``key`` is put."""
        return self._unacknowledged.get(key)

    def drop(self, key: str, status: EntryStatus) -> None:
        """Forget the ``status`` entry of ``key`` (a tombstone); absent entries are fine."""
        if status == "done":
            self._unacknowledged.pop(key, None)
        slots = self._entries.get(key)
        if slots is None or status not in slots:
            return
        removed = slots.pop(status)
        if slots:
            return
        del self._entries[key]
        del self._partition_of[key]
        keys = self._runs.get(removed.run_id)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._runs[removed.run_id]

    def keys_of_run(self, run_id: str, partition: int) -> list[str]:
        """The effect keys of ``run_id`` held in ``partition``, sorted."""
        return sorted(
            key for key in self._runs.get(run_id, ()) if self._partition_of[key] == partition
        )

    def counts(self) -> StatusCounts:
        """Keys by status: ``issued`` (no ``done`` yet) and ``done``."""
        done = sum(1 for slots in self._entries.values() if "done" in slots)
        return {"issued": len(self._entries) - done, "done": done}

    def __len__(self) -> int:
        return len(self._entries)


class InMemoryJournal:
    """A :class:`Journal` in a dict, for unit tests: every write is durable at once.

    ``before_write``, when given, is called with every entry (``None`` for a tombstone) before
    it is stored; raising from it simulates a write that did not become durable.
    """

    def __init__(
        self, *, before_write: Callable[[JournalEntry | None], None] | None = None
    ) -> None:
        self._index = JournalIndex()
        self._before_write = before_write
        self.writes: list[tuple[int, JournalEntry | None]] = []
        """Every durable write in order, as ``(partition, entry)``; ``None`` is a tombstone."""

    def get(self, key: str) -> tuple[JournalEntry | None, JournalEntry | None]:
        """The latest ``(issued, done)`` entries of effect ``key``."""
        return self._index.get(key)

    def unacknowledged(self, key: str) -> JournalEntry | None:
        """The ``done`` of ``key`` whose write raised, until one is written."""
        return self._index.unacknowledged(key)

    async def write(self, entry: JournalEntry, *, partition: int) -> None:
        """Store ``entry`` (after ``before_write``, which may raise); a second ``done`` of a
        key is not stored."""
        if entry.status == "done" and self._index.has_done(entry.key):
            return
        if self._before_write is not None:
            try:
                self._before_write(entry)
            except BaseException:
                self._index.hold(entry)
                raise
        self._index.put(entry, partition)
        self.writes.append((partition, entry))

    async def forget_run(self, run_id: str, *, partition: int) -> int:
        """Drop every entry of ``run_id`` held in ``partition``; two tombstones per key."""
        count = 0
        for key in self._index.keys_of_run(run_id, partition):
            for status in _STATUSES:
                if self._before_write is not None:
                    self._before_write(None)
                self._index.drop(key, status)
                self.writes.append((partition, None))
                count += 1
        return count

    def entries_by_status(self) -> StatusCounts:
        """Keys by status: ``issued`` (no ``done`` yet) and ``done``."""
        return self._index.counts()

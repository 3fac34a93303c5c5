"""`MemoryRows`: the memory entries of one partition's keyed state, read and written.

Rows (in the state of the agent's tasks partition the key is routed to, beside the runs):

* ``memory/<key as UTF-8 hex>/<seq, 12 digits>`` -> a `MemoryEntry` document;
* ``memory-next/<key as UTF-8 hex>`` -> the next ``seq`` of the key (decimal).

Hex keeps one key's rows a prefix of their own (a key may hold ``/``) and sorts a key's entries
by ``seq``. Every method is synchronous and does all its reads and writes in one go: the
subtask runs one call at a time between awaits, so an append reads ``memory-next`` and writes
it back with no other write of the key in between. That is why two runs of one key never lose
an update, however their steps interleave (``docs/memory.md``).

An entry that does not decode (`MemoryEntryError`: hostile or damaged bytes) is skipped with a
warning and counted in `MemoryRows.skipped`; it stays in place until the key is erased.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sluicegate.agents.memory.entries import (
    EntryKind,
    MemoryEntry,
    MemoryEntryError,
    estimate_tokens,
)
from sluicegate.operators.state.store import PartitionState

__all__ = ["ENTRY_PREFIX", "MemoryRows", "NewEntry", "entry_prefix"]

logger = logging.getLogger(__name__)

ENTRY_PREFIX = b"memory/"
_NEXT_PREFIX = b"memory-next/"


def entry_prefix(key: str) -> bytes:
    """The prefix of the rows of ``key``'s entries."""
    return ENTRY_PREFIX + key.encode().hex().encode() + b"/"


def _next_row(key: str) -> bytes:
    return _NEXT_PREFIX + key.encode().hex().encode()


@dataclass(frozen=True, slots=True)
class NewEntry:
    """What a run writes into a key's memory (`MemoryRows.append` numbers and stores it)."""

    key: str
    kind: EntryKind
    text: str
    run_id: str
    step: int
    source: str


class MemoryRows:
    """The memory entries in ``state`` (one partition of an agent's tasks)."""

    def __init__(self, state: PartitionState) -> None:
        self._state = state
        self.skipped = 0

    def append(self, new: NewEntry, *, now: float, ttl_s: float | None) -> MemoryEntry:
        """Store ``new`` as the key's next entry, expiring ``ttl_s`` after ``now``."""
        raw = self._state.get(_next_row(new.key))
        seq = int(raw) if raw is not None and raw.isdigit() else self._after_last(new.key)
        entry = MemoryEntry(
            key=new.key, seq=seq, kind=new.kind, text=new.text, run_id=new.run_id,
            step=new.step, source=new.source, written_at=now,
            expires_at=None if ttl_s is None else now + ttl_s,
        )  # fmt: skip
        self._state.put(entry_prefix(new.key) + b"%012d" % seq, entry.encode())
        self._state.put(_next_row(new.key), b"%d" % (seq + 1))
        return entry

    def entries(self, key: str) -> list[MemoryEntry]:
        """Every stored entry of ``key``, expired ones included, oldest first."""
        return [entry for _, entry in self._decoded(entry_prefix(key))]

    def readable(
        self,
        key: str,
        *,
        now: float,
        recent: int,
        max_tokens: int,
        written: Callable[[MemoryEntry], bool] | None = None,
    ) -> list[MemoryEntry]:
        """What the read rule gives a model call (``docs/memory.md``):

        1. the entries of ``key`` that have not expired at ``now`` (and for which ``written``
           holds: a fork's, those written up to its parent's step);
        2. the ``recent`` latest of them;
        3. less the oldest while their estimated tokens (`estimate_tokens`) exceed
           ``max_tokens``; oldest first."""
        live = [
            e for e in self.entries(key) if not e.expired(now) and (written is None or written(e))
        ][-recent:]
        total = sum(estimate_tokens(e.text) for e in live)
        while live and total > max_tokens:
            total -= estimate_tokens(live.pop(0).text)
        return live

    def purge_expired(self, key: str, *, now: float) -> int:
        """Delete the entries of ``key`` expired at ``now``; how many."""
        gone = 0
        for row, entry in list(self._decoded(entry_prefix(key))):
            if entry.expired(now):
                self._state.delete(row)
                gone += 1
        return gone

    def remove_sources(self, key: str, sources: set[str]) -> list[str]:
        """Delete the entries of ``key`` that ``sources`` wrote; their ids."""
        gone = []
        for row, entry in list(self._decoded(entry_prefix(key))):
            if entry.source in sources:
                self._state.delete(row)
                gone.append(entry.entry_id)
        return gone

    def erase(self, key: str) -> int:
        """Delete every row of ``key``, unreadable entries and its counter included; how many
        entries there were. Numbering starts again at 0."""
        rows = [row for row, _ in self._state.items(prefix=entry_prefix(key))]
        for row in rows:
            self._state.delete(row)
        self._state.delete(_next_row(key))
        return len(rows)

    def keys(self) -> list[str]:
        """The keys with at least one stored entry, in the order of their rows."""
        found: list[str] = []
        for row, _ in self._state.items(prefix=ENTRY_PREFIX):
            hexkey = row[len(ENTRY_PREFIX) :].split(b"/", 1)[0]
            try:
                key = bytes.fromhex(hexkey.decode()).decode()
            except ValueError:
                self.skipped += 1
                continue
            if not found or found[-1] != key:
                found.append(key)
        return found

    def _after_last(self, key: str) -> int:
        """The next ``seq`` without a counter row: one past the last entry's."""
        last = -1
        for row, _ in self._state.items(prefix=entry_prefix(key)):
            tail = row.rsplit(b"/", 1)[-1]
            if tail.isdigit():
                last = max(last, int(tail))
        return last + 1

    def _decoded(self, prefix: bytes) -> Iterator[tuple[bytes, MemoryEntry]]:
        for row, value in self._state.items(prefix=prefix):
            try:
                yield row, MemoryEntry.decode(value)
            except MemoryEntryError as exc:
                self.skipped += 1
                logger.warning("memory row %r skipped: %s", row[:120], exc)

"""Windowed faust tables (``.tumbling(...)``, ``.hopping(...)``) over sluicegate's keyed state.

faust's own classes do the windowing: its ``WindowWrapper`` and ``WindowSet`` turn
``table[key] += 1`` into one write per window range of the event's timestamp (its
``HoppingWindow.ranges``), each to the table row ``(key, (start, end))``, which `TableRows`
stores as faust's store encodes it. So windows are rows of the partition's keyed state like a
plain table's: snapshotted by barriers, restored after a crash, moved by a rescale.

What this module adds, in place of faust's in-memory bookkeeping (which a crash would lose):

* the *latest window end* the partition has written, a row of its state (faust keeps it in
  ``_partition_latest_timestamp``, only when ``expires`` is set);
* an *expiry index*: one empty row per window row, ``faust-window/<t>/ends/<end>/<row>``, in
  the order of the window's end;
* expiry: at the end of each record that wrote a window row, the index rows whose windows
  are stale by faust's own ``window.stale(end, latest)`` (ended more than ``expires`` before
  the latest window end of the partition) are deleted with their window rows. faust compares
  with the wall clock on a timer; here time is the partition's latest window end, so expiry
  is the same on a replay and needs no timer, and happens when the partition next writes a
  window (docs/faust.md). A late record's write to an expired window is deleted at once.

``relative_to_now()`` and ``.now()`` read the wall clock, as faust's documentation says (faust
itself, inside a stream, reads its in-memory latest window end instead, which a table written
only relative to now never moves past the first window).
"""

from __future__ import annotations

import struct
import time
from typing import Any

from sluicegate.faust_adapter.exceptions import AgentStepError
from sluicegate.operators.state.store import PartitionState

__all__ = ["WINDOW_PREFIX", "WindowIndex", "ordered_float"]

WINDOW_PREFIX = b"faust-window/"
"""Rows of windowed table ``t`` besides its windows: ``faust-window/<t>/latest`` and
``faust-window/<t>/ends/<end, 8 bytes ordered>/<window row>``."""

_DOUBLE = struct.Struct(">d")
_SIGN = 1 << 63


def ordered_float(value: float) -> bytes:
    """8 bytes whose byte order is the numeric order of ``value`` (negatives included)."""
    (bits,) = struct.unpack(">Q", _DOUBLE.pack(value))
    bits = bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits & _SIGN else bits | _SIGN
    return struct.pack(">Q", bits)


class WallClock:
    """faust's ``_partition_latest_timestamp`` as `WindowIndex` installs it: every partition's
    "now" is the wall clock (module docstring)."""

    def __getitem__(self, partition: int) -> float:
        return time.time()

    def __setitem__(self, partition: int, value: float) -> None:
        return None


class WindowIndex:
    """The latest window end and the expiry index of one windowed table (module docstring);
    its hooks replace the table's ``on_key_set`` and ``on_key_del``."""

    def __init__(self, table: Any, state: Any, row_of: Any) -> None:
        """``state()`` is the bound record's `PartitionState`, ``row_of(key)`` a key's row."""
        self._table, self._state, self._row_of = table, state, row_of
        base = WINDOW_PREFIX + str(table.name).encode() + b"/"
        self._latest_row = base + b"latest"
        self._ends = base + b"ends/"
        self._written = False

    @classmethod
    def install(cls, table: Any, state: Any, row_of: Any) -> WindowIndex:
        index = cls(table, state, row_of)
        table.on_key_set = index.on_key_set
        table.on_key_del = index.on_key_del
        table._partition_latest_timestamp = WallClock()
        return index

    def latest(self, state: PartitionState) -> float | None:
        raw = state.get(self._latest_row)
        if raw is None:
            return None
        if len(raw) != _DOUBLE.size:
            raise AgentStepError("?", f"table {self._table.name!r}: latest window end row of "
                                 f"{len(raw)} bytes, not {_DOUBLE.size}")  # fmt: skip
        (value,) = _DOUBLE.unpack(raw)
        return float(value)

    def on_key_set(self, key: Any, value: Any) -> None:
        end = _end_of(self._table.name, key)
        state = self._state()
        row = self._row_of(key)
        state.put(self._ends + ordered_float(end) + b"/" + row, b"")
        latest = self.latest(state)
        if latest is None or end > latest:
            state.put(self._latest_row, _DOUBLE.pack(end))
        self._written = True

    def expire(self, state: PartitionState) -> None:
        """At the end of a record that wrote a window (faust writes the row after its hook):
        delete the stale windows and their index rows."""
        written, self._written = self._written, False
        latest = self.latest(state) if written else None
        if latest is not None:
            self._expire(state, latest)

    def on_key_del(self, key: Any) -> None:
        end = _end_of(self._table.name, key)
        self._state().delete(self._ends + ordered_float(end) + b"/" + self._row_of(key))

    def _expire(self, state: PartitionState, latest: float) -> None:
        window = self._table.window
        if not window.expires:
            return
        stale: list[bytes] = []
        rows = state.items(prefix=self._ends)
        try:
            for index_row, _ in rows:
                (end,) = _DOUBLE.unpack(
                    _unordered(index_row[len(self._ends) : len(self._ends) + 8])
                )
                if not window.stale(end, latest):
                    break
                stale.append(index_row)
        finally:
            rows.close()
        for index_row in stale:
            state.delete(index_row[len(self._ends) + 9 :])
            state.delete(index_row)


def _unordered(data: bytes) -> bytes:
    """The inverse of `ordered_float`, as the 8 bytes of a big-endian double."""
    (bits,) = struct.unpack(">Q", data)
    bits = bits ^ _SIGN if bits & _SIGN else bits ^ 0xFFFF_FFFF_FFFF_FFFF
    return struct.pack(">Q", bits)


def _end_of(table: str, key: Any) -> float:
    """The window end of a windowed table's row key ``(key, (start, end))``."""
    try:
        _, (_, end) = key
        return float(end)
    except (TypeError, ValueError) as exc:
        raise AgentStepError(
            "?", f"windowed table {table!r} written at {key!r}, not at (key, (start, end))"
        ) from exc

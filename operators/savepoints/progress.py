"""How far a savepoint write is: a value the writer reports and the coordinator shows.

Its own module so that the coordinator's savepointing phase, a sans-IO core, can name it
without loading the writer (and through it the state store's client).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SavepointProgress"]


@dataclass(frozen=True, slots=True)
class SavepointProgress:
    """How far a savepoint write is: partitions written of all, rows and bytes so far."""

    partitions_done: int
    partitions_total: int
    rows: int
    bytes: int

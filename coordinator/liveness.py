"""Which workers are alive, from their heartbeats, sans-IO.

:class:`LivenessTracker` keeps, per worker, the time and payload of its last heartbeat. A worker
is dead when it sent none for ``timeout_seconds`` (a heartbeat exactly ``timeout_seconds`` old
still counts). A dead worker stays known, and dead, until it sends a heartbeat again or is
forgotten: the coordinator forgets the workers of an attempt it gave up on, so that their
silence does not trigger a second recovery. Times are seconds on the injected clock.

The workers are kept in the order of their last heartbeats, oldest first, so the dead ones
are a prefix: :meth:`dead`, asked on every pass of the coordinator's loop, looks at those and
at the first live one, not at every worker (with a worker's heartbeat per pass, a scan of all
of them made the loop's cost grow with the square of the workers). Heartbeats come in clock
order; one that does not (an injected clock going back for another worker) re-sorts them.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Generic, TypeVar

from sluicegate.operators.exceptions import ConfigError

__all__ = ["LivenessTracker", "WorkerLiveness"]

InfoT = TypeVar("InfoT")


@dataclass(frozen=True, slots=True)
class WorkerLiveness(Generic[InfoT]):
    """A worker's last heartbeat: when it came and what it said."""

    worker_id: str
    last_seen: float
    info: InfoT


class LivenessTracker(Generic[InfoT]):
    """Last heartbeat per worker; ``InfoT`` is what a heartbeat carries (e.g. `Heartbeat`)."""

    def __init__(self, *, timeout_seconds: float) -> None:
        if timeout_seconds <= 0:
            raise ConfigError("heartbeat timeout_seconds", f"must be > 0, got {timeout_seconds}")
        self._timeout = timeout_seconds
        self._workers: dict[str, WorkerLiveness[InfoT]] = {}

    @property
    def timeout_seconds(self) -> float:
        return self._timeout

    def on_heartbeat(self, worker_id: str, now: float, info: InfoT) -> bool:
        """Record a heartbeat; return whether the worker was unknown or dead until now.

        A heartbeat older than the one already recorded (out of order) is ignored.
        """
        previous = self._workers.get(worker_id)
        if previous is not None and now < previous.last_seen:
            return False
        self._workers.pop(worker_id, None)
        newest = next(reversed(self._workers.values()), None)
        self._workers[worker_id] = WorkerLiveness(worker_id, now, info)
        if newest is not None and now < newest.last_seen:
            ordered = sorted(self._workers.values(), key=lambda e: e.last_seen)  # stable
            self._workers = {e.worker_id: e for e in ordered}
        return previous is None or not self._is_alive(previous, now)

    def dead(self, now: float) -> list[str]:
        """Known workers with no heartbeat within ``timeout_seconds`` before ``now``, sorted.

        Looks at the dead workers and the first live one only (the module docstring)."""
        return sorted(islice(self._workers, self._dead_count(now)))

    def alive(self, now: float) -> list[str]:
        """Known workers with a heartbeat within ``timeout_seconds`` before ``now``, sorted."""
        return sorted(islice(self._workers, self._dead_count(now), None))

    def alive_infos(self, now: float) -> dict[str, InfoT]:
        """The last heartbeat's info of every worker alive at ``now``, by worker id (sorted)."""
        return {w: self._workers[w].info for w in self.alive(now)}

    def get(self, worker_id: str) -> WorkerLiveness[InfoT] | None:
        """The last heartbeat of ``worker_id``, if known."""
        return self._workers.get(worker_id)

    def forget(self, worker_id: str) -> None:
        """Stop tracking ``worker_id``; an unknown worker is fine."""
        self._workers.pop(worker_id, None)

    def next_deadline(self) -> float | None:
        """When the least recently heard-from worker is (or was) past its timeout, or ``None``.

        A caller waiting for a heartbeat or this time, whichever comes first, sees every death
        on time; a value in the past means :meth:`dead` is not empty.
        """
        oldest = next(iter(self._workers.values()), None)
        return None if oldest is None else oldest.last_seen + self._timeout

    def __contains__(self, worker_id: object) -> bool:
        return worker_id in self._workers

    def __len__(self) -> int:
        return len(self._workers)

    def _dead_count(self, now: float) -> int:
        """How many workers are dead at ``now``: the length of the prefix of the oldest
        heartbeats that are too old (the module docstring)."""
        count = 0
        for entry in self._workers.values():
            if self._is_alive(entry, now):
                break
            count += 1
        return count

    def _is_alive(self, entry: WorkerLiveness[InfoT], now: float) -> bool:
        return now - entry.last_seen <= self._timeout

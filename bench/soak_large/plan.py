"""The soak's schedule, decided before it starts from its sizes and seed: which process each
SIGKILL hits and when, and when the broker restarts and storage goes away (`Plan.of`)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Kill", "Plan", "Timing"]


class Timing(StrEnum):
    """The moment a kill waits for (at most a few seconds; then it lands anyway, as ``any``)."""

    ANY = "any"
    MID_WRITE = "mid-write"
    """A worker has a write on the wire to the service (the service says which PID)."""
    MID_CHECKPOINT = "mid-checkpoint"
    """A checkpoint was triggered and has not completed."""
    SAVEPOINT = "savepoint"
    """Right after a savepoint was asked for through the coordinator's API."""


@dataclass(frozen=True, slots=True)
class Kill:
    """A SIGKILL once ``after_results`` runs have results: of the coordinator, or of a worker
    (the one with a write in flight, for ``MID_WRITE``; a random one otherwise)."""

    after_results: int
    coordinator: bool
    timing: Timing


@dataclass(frozen=True, slots=True)
class Plan:
    kills: tuple[Kill, ...]
    broker_restart_after: int
    """Results before the broker is stopped and started again on its port and data."""
    storage_outage_after: int
    """Results before checkpoint storage goes away (for ``outage_s`` seconds)."""

    @classmethod
    def of(cls, runs: int, kills: int, seed: int) -> Plan:
        """Kills spread by progress (a fast machine would finish before clock-timed kills),
        every third (but none mid-write) of the coordinator, the timings in turn."""
        rng = random.Random(seed)
        timings = list(Timing)
        jitter = max(1, runs // (4 * kills + 4))
        planned = []
        for k in range(kills):
            timing = timings[k % len(timings)]
            at = runs * (k + 1) // (kills + 2) - rng.randrange(jitter)
            coordinator = timing is not Timing.MID_WRITE and k % 3 == 2
            planned.append(Kill(max(1, at), coordinator, timing))
        if kills >= 3 and not any(k.coordinator for k in planned):
            planned[2] = Kill(planned[2].after_results, True, planned[2].timing)
        return cls(tuple(planned), runs // 3, runs // 2)

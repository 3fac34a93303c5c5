"""Whether checkpoints keep completing at the start rate: the soak's time cut into fifths, and
per fifth the checkpoint rate *outside* disruptions, the checkpoint duration and its bytes.

A kill (or the broker's restart, or storage's outage) stops checkpoints until the job has
recovered, and the soak's disruptions fall unevenly into the fifths, so completed checkpoints
per minute of wall time compare the fifths' luck, not the job's pace. Here a *disruption* runs
from its start to the completion of the first checkpoint triggered after it (the recovery time
of `checks.KillRecord`), and the rate of a fifth counts only the undisturbed gaps: the time
between two consecutive completed checkpoints with no disruption in it. ``rate`` is then the
number of such gaps ending in the fifth per minute of their total length, i.e. 60 / the mean
undisturbed gap: the pace the job keeps when nothing is recovering.

Duration (trigger to complete), bytes uploaded and full state size come from each checkpoint's
manifest; a checkpoint whose manifest could not be read (deleted by retention before the
harness saw it, or storage away) counts for the rate and is left out of those figures.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["TOLERANCE", "CheckpointRecord", "Fifth", "fifths", "percentile", "rate_fell"]

TOLERANCE = 0.2
"""The last fifth's undisturbed rate may be this fraction below the first fifth's; more is a
violation (the machine's load varies by more than the 10 % a quiet machine showed)."""


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """One completed checkpoint as the soak saw it."""

    checkpoint_id: int
    completed_at: float
    triggered_at: float | None = None
    uploaded_bytes: int | None = None
    full_bytes: int | None = None

    @property
    def duration_s(self) -> float | None:
        return None if self.triggered_at is None else self.completed_at - self.triggered_at


@dataclass(frozen=True, slots=True)
class Fifth:
    """The figures of one fifth of the soak, from ``start`` to ``end`` (unix times)."""

    start: float
    end: float
    completed: int
    """Checkpoints completed in the fifth, disturbed or not."""
    undisturbed_s: float
    """Total length of the undisturbed gaps ending in the fifth."""
    undisturbed_gaps: int
    duration_p50_s: float | None
    duration_p99_s: float | None
    uploaded_p50_bytes: int | None
    state_bytes: int | None
    """Full state of the last checkpoint completed in the fifth whose manifest was read."""

    @property
    def rate(self) -> float:
        """Completed checkpoints per minute of undisturbed time (0 without any)."""
        return self.undisturbed_gaps / self.undisturbed_s * 60 if self.undisturbed_s else 0.0


def fifths(
    checkpoints: Sequence[CheckpointRecord],
    disruptions: Sequence[tuple[float, float | None]],
    end: float,
) -> tuple[Fifth, ...]:
    """The five fifths of the time from the first completed checkpoint to ``end``.

    ``disruptions`` are ``(start, recovered_at)``; one never recovered from (None) lasts to
    ``end``. Empty without any completed checkpoint."""
    done = sorted(checkpoints, key=lambda c: c.completed_at)
    if not done or end <= done[0].completed_at:
        return ()
    spans = [(s, end if e is None else e) for s, e in disruptions]
    begin, step = done[0].completed_at, (end - done[0].completed_at) / 5
    bounds = [begin + i * step for i in range(5)] + [end]
    gaps: list[list[float]] = [[] for _ in range(5)]
    for before, after in itertools.pairwise(done):
        a, b = before.completed_at, after.completed_at
        if not any(s < b and e > a for s, e in spans):
            gaps[_which(bounds, b)].append(b - a)
    members: list[list[CheckpointRecord]] = [[] for _ in range(5)]
    for c in done:
        members[_which(bounds, c.completed_at)].append(c)
    return tuple(_fifth(bounds[i], bounds[i + 1], members[i], gaps[i]) for i in range(5))


def rate_fell(parts: Sequence[Fifth], tolerance: float = TOLERANCE) -> str | None:
    """Why the last fifth's undisturbed rate is too far below the first's, or None."""
    if len(parts) < 5:
        return "no checkpoint completed" if not parts else None
    first, last = parts[0].rate, parts[-1].rate
    if last < first * (1 - tolerance):
        return (
            f"checkpoints per undisturbed minute fell from {first:.1f} (first fifth) to "
            f"{last:.1f} (last fifth), more than {tolerance:.0%}"
        )
    return None


def _which(bounds: Sequence[float], t: float) -> int:
    for i in range(5):
        if t < bounds[i + 1]:
            return i
    return 4


def _fifth(start: float, end: float, done: list[CheckpointRecord], gaps: list[float]) -> Fifth:
    durations = [d for c in done if (d := c.duration_s) is not None]
    uploaded = [c.uploaded_bytes for c in done if c.uploaded_bytes is not None]
    states = [c.full_bytes for c in done if c.full_bytes is not None]
    return Fifth(
        start, end, len(done), sum(gaps), len(gaps),
        _percentile(durations, 50), _percentile(durations, 99),
        None if not uploaded else int(_percentile([float(u) for u in uploaded], 50) or 0),
        states[-1] if states else None,
    )  # fmt: skip


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile of ``values`` (nearest rank; not empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _percentile(values: Sequence[float], p: float) -> float | None:
    return percentile(values, p) if values else None

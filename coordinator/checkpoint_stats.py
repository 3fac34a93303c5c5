"""What the coordinator's metrics say about checkpoints, accumulated sans-IO.

`CheckpointStats` is fed from the coordinator's single task, in order: `seed` once at start
with the newest completed checkpoint in storage (what survives a coordinator restart), then
`on_triggered`, and `on_completed` or `on_aborted`, per checkpoint. `coordinator.metrics` reads
it at scrape time. Durations are seconds of the monotonic clock passed in as ``now``.

Abort causes map to a small closed set of reasons (`AbortReason`), the ``reason`` label of
``sluicegate_checkpoints_aborted_total``:

=================  =============  ======================================================
`AbortCause`       reason         when
=================  =============  ======================================================
DECLINED           declined       a subtask declined (its alignment buffer was full)
TIMED_OUT          timeout        not every subtask acked within the timeout
MANIFEST_FAILED    failed         the manifest could not be committed
RECOVERY           superseded     a global recovery abandoned the checkpoint in flight
=================  =============  ======================================================
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from sluicegate.coordinator.checkpoints.tracker import AbortCause
from sluicegate.operators.metrics import CHECKPOINT_PHASES, CHECKPOINT_SECONDS_BUCKETS
from sluicegate.operators.storage.manifest import CheckpointManifest

__all__ = ["ABORT_REASONS", "AbortReason", "CheckpointStats", "HistogramCounts", "slowest_phases"]


class AbortReason(StrEnum):
    """Why a checkpoint was aborted, as the metric says it."""

    DECLINED = "declined"
    TIMEOUT = "timeout"
    FAILED = "failed"
    SUPERSEDED = "superseded"


ABORT_REASONS: Mapping[AbortCause, AbortReason] = {
    AbortCause.DECLINED: AbortReason.DECLINED,
    AbortCause.TIMED_OUT: AbortReason.TIMEOUT,
    AbortCause.MANIFEST_FAILED: AbortReason.FAILED,
    AbortCause.RECOVERY: AbortReason.SUPERSEDED,
}


@dataclass(slots=True)
class HistogramCounts:
    """Observations counted into fixed buckets, as a Prometheus histogram exposes them."""

    bounds: Sequence[float] = CHECKPOINT_SECONDS_BUCKETS
    counts: list[int] = field(init=False)
    """Observations per bucket (not cumulative); the last one is ``+Inf``."""
    total: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if list(self.bounds) != sorted(set(self.bounds)):
            raise ValueError(f"bucket bounds must increase strictly: {self.bounds}")
        self.counts = [0] * (len(self.bounds) + 1)

    def copy(self) -> HistogramCounts:
        """The same counts, apart from this one."""
        twin = HistogramCounts(self.bounds)
        twin.counts, twin.total = list(self.counts), self.total
        return twin

    def observe(self, value: float) -> None:
        """Count ``value`` into the first bucket whose upper bound is at least ``value``."""
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations <= it)`` per bucket, ending with ``inf``."""
        running, out = 0, []
        for bound, n in zip([*self.bounds, float("inf")], self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out


def slowest_phases(manifest: CheckpointManifest) -> dict[str, float]:
    """Per phase (`CHECKPOINT_PHASES`), the slowest subtask's seconds in ``manifest``."""
    snapshots = list(manifest.subtasks.values())
    seconds: dict[str, Iterable[float]] = {
        "alignment": (s.alignment_seconds for s in snapshots),
        "sync": (s.sync_seconds for s in snapshots),
        "async": (s.async_seconds for s in snapshots),
    }
    return {phase: max(seconds[phase], default=0.0) for phase in CHECKPOINT_PHASES}


class CheckpointStats:
    """Counts, durations and sizes of checkpoints; steps in the module docstring.

    Durable (seeded from storage, so they survive a coordinator restart): the newest completed
    checkpoint's id, completion time and sizes. Process-local: everything else.
    """

    def __init__(self) -> None:
        self.completed = 0
        """Checkpoints completed by this process."""
        self.aborted: dict[AbortReason, int] = dict.fromkeys(AbortReason, 0)
        """Checkpoints aborted by this process, by reason."""
        self.duration = HistogramCounts()
        """Seconds from trigger to completion (manifest committed)."""
        self.phases = {phase: HistogramCounts() for phase in CHECKPOINT_PHASES}
        """Per phase, the slowest subtask's seconds of each completed checkpoint."""
        self.last_completed_id: int | None = None
        self.last_completed_at: float | None = None
        """Unix time the newest checkpoint completed."""
        self.last_full_bytes: int | None = None
        self.last_incremental_bytes: int | None = None
        self._triggered: tuple[int, float] | None = None
        self._triggered_at: tuple[int, float] | None = None

    def seed(self, newest: CheckpointManifest | None) -> None:
        """Start from the newest completed checkpoint in storage (None: there is none)."""
        if newest is not None and (self.last_completed_id or 0) < newest.checkpoint_id:
            self._set_last(newest)

    def on_triggered(self, checkpoint_id: int, now: float, at: float | None = None) -> None:
        """``checkpoint_id`` was triggered at ``now`` (at most one is in flight); ``at``: the
        unix time of it, which `triggered_at` answers."""
        self._triggered = (checkpoint_id, now)
        if at is not None:
            self._triggered_at = (checkpoint_id, at)

    def triggered_at(self, checkpoint_id: int) -> float | None:
        """Unix time ``checkpoint_id`` was triggered, if it is the newest one triggered."""
        if self._triggered_at is not None and self._triggered_at[0] == checkpoint_id:
            return self._triggered_at[1]
        return None

    def on_completed(self, manifest: CheckpointManifest, now: float) -> None:
        """The manifest of a checkpoint was committed at ``now``: it completed."""
        self.completed += 1
        if self._triggered is not None and self._triggered[0] == manifest.checkpoint_id:
            self.duration.observe(max(now - self._triggered[1], 0.0))
        self._triggered = None
        for phase, seconds in slowest_phases(manifest).items():
            self.phases[phase].observe(seconds)
        self._set_last(manifest)

    def on_aborted(self, cause: AbortCause) -> None:
        """The checkpoint in flight was aborted for ``cause``."""
        self.aborted[ABORT_REASONS[cause]] += 1
        self._triggered = None

    def _set_last(self, manifest: CheckpointManifest) -> None:
        self.last_completed_id = manifest.checkpoint_id
        self.last_completed_at = manifest.completed_at
        self.last_full_bytes = manifest.full_bytes
        self.last_incremental_bytes = manifest.uploaded_bytes

"""CheckpointStats: histogram buckets, trigger-to-completion durations, the slowest subtask per
phase, abort reasons, and what a restarted coordinator takes over from storage."""

from __future__ import annotations

import pytest

from sluicegate.coordinator.checkpoint_stats import (
    ABORT_REASONS,
    AbortReason,
    CheckpointStats,
    HistogramCounts,
)
from sluicegate.coordinator.checkpoints.tracker import AbortCause
from sluicegate.operators.protocol.messages import StateHandle
from sluicegate.operators.storage.manifest import CheckpointManifest, SubtaskSnapshot


def manifest(
    checkpoint_id: int,
    *,
    phases: dict[str, tuple[float, float, float]] | None = None,
    full: int = 1000,
    uploaded: int = 100,
    completed_at: float = 1_700_000_000.0,
) -> CheckpointManifest:
    """A manifest whose subtasks took ``(alignment, sync, async)`` seconds, and whose handles
    add up to ``full`` and ``uploaded`` bytes."""
    phases = phases or {"a#0": (0.0, 0.0, 0.0)}
    share = len(phases)
    return CheckpointManifest(
        pipeline="p",
        checkpoint_id=checkpoint_id,
        attempt=1,
        completed_at=completed_at,
        subtasks={
            name: SubtaskSnapshot(
                positions={},
                handle=StateHandle(
                    checkpoint_id=checkpoint_id,
                    files=(),
                    full_bytes=full // share,
                    uploaded_bytes=uploaded // share,
                ),
                alignment_seconds=alignment,
                sync_seconds=sync,
                async_seconds=async_,
            )
            for name, (alignment, sync, async_) in phases.items()
        },
    )


def test_a_value_on_a_bound_counts_into_that_bucket() -> None:
    h = HistogramCounts(bounds=(1.0, 2.0))
    for value in (0.5, 1.0, 1.5, 2.0, 7.0):
        h.observe(value)
    assert h.cumulative() == [(1.0, 2), (2.0, 4), (float("inf"), 5)]
    assert (h.count, h.total) == (5, 12.0)


def test_bounds_must_increase() -> None:
    with pytest.raises(ValueError, match="increase"):
        HistogramCounts(bounds=(1.0, 1.0))


def test_duration_runs_from_trigger_to_completion() -> None:
    stats = CheckpointStats()
    stats.on_triggered(1, now=10.0)
    stats.on_completed(manifest(1), now=10.3)
    stats.on_triggered(2, now=11.0)
    stats.on_aborted(AbortCause.TIMED_OUT)
    stats.on_completed(manifest(3), now=20.0)  # its trigger was not seen: no duration

    assert stats.completed == 2
    assert stats.duration.count == 1
    assert stats.duration.total == pytest.approx(0.3)


def test_phases_take_the_slowest_subtask_of_each_checkpoint() -> None:
    stats = CheckpointStats()
    slow_alignment = (0.2, 0.001, 0.05)
    slow_upload = (0.01, 0.003, 1.2)
    stats.on_completed(manifest(1, phases={"a#0": slow_alignment, "a#1": slow_upload}), now=0)

    assert {phase: h.total for phase, h in stats.phases.items()} == {
        "alignment": 0.2,
        "sync": 0.003,
        "async": 1.2,
    }
    assert all(h.count == 1 for h in stats.phases.values())


def test_every_abort_cause_has_a_reason_and_every_reason_starts_at_zero() -> None:
    assert set(ABORT_REASONS) == set(AbortCause)
    assert set(ABORT_REASONS.values()) == set(AbortReason)
    stats = CheckpointStats()
    assert stats.aborted == dict.fromkeys(AbortReason, 0)

    for cause in (AbortCause.DECLINED, AbortCause.RECOVERY, AbortCause.RECOVERY):
        stats.on_aborted(cause)
    assert stats.aborted[AbortReason.DECLINED] == 1
    assert stats.aborted[AbortReason.SUPERSEDED] == 2
    assert {r.value for r in AbortReason} == {"declined", "timeout", "failed", "superseded"}


def test_the_last_completed_checkpoint_is_seeded_from_storage_and_then_followed() -> None:
    stats = CheckpointStats()
    stats.seed(None)
    assert (stats.last_completed_id, stats.last_completed_at) == (None, None)

    stats.seed(manifest(7, full=5000, uploaded=300, completed_at=1_700_000_100.0))
    assert (stats.last_completed_id, stats.last_completed_at) == (7, 1_700_000_100.0)
    assert (stats.last_full_bytes, stats.last_incremental_bytes) == (5000, 300)
    assert stats.completed == 0  # seeding counts nothing this process did

    stats.on_completed(manifest(8, full=5200, uploaded=200, completed_at=1_700_000_101.0), now=0)
    stats.seed(manifest(7))  # an older manifest never moves it back
    assert (stats.last_completed_id, stats.last_full_bytes) == (8, 5200)

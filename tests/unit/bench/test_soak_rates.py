"""The soak's checkpoint rate by fifth counts only undisturbed time: a kill and its recovery,
wherever they fall, neither lower a fifth's rate nor hide a real slowdown; durations, bytes and
state size come per fifth from the checkpoints' records."""

from __future__ import annotations

import pytest

from bench.soak_large.rates import TOLERANCE, CheckpointRecord, fifths, rate_fell


def steady(start: float, end: float, every: float, first_id: int = 1) -> list[CheckpointRecord]:
    """A checkpoint completed every ``every`` s from ``start`` to ``end``, each taking 0.5 s,
    uploading 1000 bytes, the state growing 10 bytes a checkpoint."""
    out, t, n = [], start, first_id
    while t <= end + 1e-9:
        out.append(CheckpointRecord(n, t, t - 0.5, 1000, 10 * n))
        t, n = t + every, n + 1
    return out


def test_an_undisturbed_steady_pace_is_the_same_in_every_fifth() -> None:
    parts = fifths(steady(0.0, 500.0, 1.0), [], 500.0)
    assert len(parts) == 5
    assert [round(p.rate, 6) for p in parts] == [60.0] * 5
    assert sum(p.completed for p in parts) == 501
    assert all(p.duration_p50_s == pytest.approx(0.5) for p in parts)
    assert all(p.uploaded_p50_bytes == 1000 for p in parts)
    assert parts[0].state_bytes == 1000  # checkpoint 100 (t=99), the last before 100 s
    assert parts[-1].state_bytes == 5010
    assert rate_fell(parts) is None


def test_recoveries_in_one_fifth_lower_its_wall_rate_but_not_its_undisturbed_rate() -> None:
    # Steady at 1 a second, except three kills in the last fifth, each 0.5 s after a
    # completion, after which the next checkpoint completes 20 s later.
    kills = [420.5, 450.5, 480.5]
    times = [float(t) for t in range(501) if not any(k < t < k + 19.5 for k in kills)]
    records = [CheckpointRecord(n + 1, t) for n, t in enumerate(times)]
    disruptions: list[tuple[float, float | None]] = [(k, k + 19.5) for k in kills]
    parts = fifths(records, disruptions, 500.0)
    last = parts[-1]
    wall = last.completed / (last.end - last.start) * 60
    assert wall < 0.75 * 60  # what the old measure saw: a 25 % fall or more
    assert last.rate == pytest.approx(60.0)
    assert last.undisturbed_s == pytest.approx(101.0 - 3 * 20)  # 399 -> 400 ends in it too
    assert last.duration_p50_s is None
    assert last.state_bytes is None
    assert rate_fell(parts) is None


def test_a_real_slowdown_outside_recoveries_is_a_violation() -> None:
    records = steady(0.0, 250.0, 1.0) + steady(251.5, 500.0, 1.5, first_id=252)
    parts = fifths(records, [(300.2, 301.1)], 500.0)
    assert parts[0].rate == pytest.approx(60.0)
    assert parts[-1].rate == pytest.approx(40.0)
    fell = rate_fell(parts)
    assert fell is not None
    assert "60.0" in fell
    assert "40.0" in fell
    assert "20%" in fell


def test_the_tolerance_is_a_fraction_of_the_first_fifth() -> None:
    just_inside = 1.0 / (1 - TOLERANCE) - 0.01
    records = steady(0.0, 100.0, 1.0) + steady(100.0 + just_inside, 500.0, just_inside, 102)
    assert rate_fell(fifths(records, [], 500.0)) is None
    slower = 1.0 / (1 - TOLERANCE) + 0.05
    records = steady(0.0, 100.0, 1.0) + steady(100.0 + slower, 500.0, slower, 102)
    assert rate_fell(fifths(records, [], 500.0)) is not None


def test_a_disruption_never_recovered_from_lasts_to_the_end_and_fails() -> None:
    records = [*steady(0.0, 400.0, 1.0), CheckpointRecord(999, 499.0)]
    parts = fifths(records, [(399.5, None)], 500.0)
    assert parts[3].undisturbed_s == pytest.approx(100.0)  # gaps ending at 300..399
    assert parts[-1].undisturbed_s == 0.0  # 399 -> 400 and 400 -> 499 are disturbed
    assert parts[-1].rate == 0.0
    assert parts[-1].completed == 2
    assert rate_fell(parts) is not None


def test_no_checkpoint_is_no_fifth_and_a_violation() -> None:
    assert fifths([], [], 100.0) == ()
    assert rate_fell(()) == "no checkpoint completed"


def test_duration_percentiles_and_bytes_per_fifth() -> None:
    records = [
        CheckpointRecord(n, float(n), float(n) - (0.2 if n % 10 else 2.0), 100 * n, 7)
        for n in range(1, 101)
    ]
    parts = fifths(records, [], 101.0)
    first = parts[0]
    assert first.duration_p50_s == pytest.approx(0.2)
    assert first.duration_p99_s == pytest.approx(2.0)
    assert first.uploaded_p50_bytes == 1100  # checkpoints 1..20, the median 11
    assert first.state_bytes == 7

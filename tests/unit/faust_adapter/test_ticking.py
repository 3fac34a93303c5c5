"""The tick rule of ``app.timer`` and ``app.crontab`` (`ticking`): the schedules' ticks, each
row of the transition table, and a model of a timer woken at random moments, crashed and
restored from random earlier states."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings, strategies as st

from sluicegate.faust_adapter.ticking import Cron, Interval, TickRule, Verdict

T0 = 1_700_000_000.0  # a multiple of 1, 2, 5 and 10 seconds


def test_interval_ticks_are_the_multiples_of_the_interval_since_the_epoch() -> None:
    every = Interval(5.0)
    assert every.next_after(T0) == T0 + 5
    assert every.next_after(T0 + 4.99) == T0 + 5
    assert every.latest_at(T0 + 4.99) == T0
    assert every.latest_at(T0 + 5) == T0 + 5
    assert every.count_between(T0, T0 + 5) == 0
    assert every.count_between(T0, T0 + 25) == 4
    with pytest.raises(ValueError, match="positive"):
        Interval(0.0)


def test_cron_ticks_are_croniters_in_the_crontabs_timezone() -> None:
    half_past_six = Cron("30 18 * * *", ZoneInfo("US/Pacific"))
    tick = half_past_six.next_after(T0)
    local = datetime.fromtimestamp(tick, ZoneInfo("US/Pacific"))
    assert (local.hour, local.minute, local.second) == (18, 30, 0)
    assert half_past_six.latest_at(tick) == tick  # at a tick, the latest is that tick
    assert half_past_six.latest_at(tick - 1) == tick - 86_400
    assert half_past_six.count_between(tick - 3 * 86_400, tick) == 2
    seconds = Cron("* * * * * */2")
    assert seconds.next_after(T0) == T0 + 2
    assert seconds.count_between(T0, T0 + 10) == 4
    assert datetime.fromtimestamp(Cron("0 * * * *").next_after(T0), UTC).minute == 0
    with pytest.raises(ValueError, match="not a crontab schedule"):
        Cron("every hour")


def test_a_new_job_starts_after_the_tick_it_opens_in() -> None:
    rule = TickRule(Interval(2.0))
    assert rule.opened(None, T0 + 0.5) == Verdict(1.5, passed=T0)


def test_a_restored_job_waits_for_its_next_tick_or_is_woken_at_once_when_overdue() -> None:
    rule = TickRule(Interval(2.0))
    assert rule.opened(T0, T0 + 0.5) == Verdict(1.5)
    assert rule.opened(T0, T0 + 9.0) == Verdict(0.0)


def test_woken_early_nothing_fires_and_it_is_woken_again_at_the_tick() -> None:
    assert TickRule(Interval(2.0)).woken(T0, T0 + 1.75) == Verdict(0.25)


def test_woken_at_a_due_tick_fires_it_and_waits_for_the_next() -> None:
    assert TickRule(Interval(2.0)).woken(T0, T0 + 2.25) == Verdict(1.75, fire=T0 + 2,
                                                                    passed=T0 + 2)  # fmt: skip


def test_ticks_due_together_coalesce_into_the_latest_once() -> None:
    verdict = TickRule(Interval(2.0)).woken(T0, T0 + 11.0)
    assert verdict == Verdict(1.0, fire=T0 + 10, passed=T0 + 10, skipped=4)


@settings(max_examples=300, deadline=None)
@given(
    interval=st.sampled_from([0.5, 1.0, 3.0]),
    delays=st.lists(st.floats(0.0, 2.5), min_size=1, max_size=60),
    crashes=st.lists(st.tuples(st.integers(0, 59), st.integers(0, 5), st.floats(0, 20)),
                     max_size=4),
)  # fmt: skip
def test_model_each_tick_fires_at_most_once_per_history_and_none_is_lost_while_running(
    interval: float, delays: list[float], crashes: list[tuple[int, int, float]]
) -> None:
    """A timer woken when its verdicts ask, each wake-up late by a random delay; at random
    wake-ups it crashes and restores the state of a random earlier checkpoint (what the
    checkpoint's history published is what survives), down for a random time. In the history
    that survives: ticks strictly increase (none twice), each is on the schedule and fired no
    earlier than itself, and every tick between the first and the last fired either fired or
    was counted as skipped."""
    rule = TickRule(Interval(interval))
    now = T0 + 0.3
    first = rule.opened(None, now)
    assert first.passed is not None
    checkpoints: list[tuple[float, list[float], int]] = [(first.passed, [], 0)]
    passed, fired, skipped = first.passed, list[float](), 0
    wake_at = now + first.wake_after_s
    crash_at = {at: (back, down) for at, back, down in crashes}
    for i, delay in enumerate(delays):
        now = max(now, wake_at) + delay
        verdict = rule.woken(passed, now)
        assert (verdict.fire is None) == (verdict.passed is None)
        if verdict.fire is not None:
            assert verdict.fire <= now
            assert verdict.fire > passed
            assert verdict.fire == pytest.approx(round(verdict.fire / interval) * interval)
            fired.append(verdict.fire)
            skipped += verdict.skipped
            passed = verdict.fire
        wake_at = now + verdict.wake_after_s
        assert wake_at > now or verdict.fire is None
        checkpoints.append((passed, list(fired), skipped))
        if i in crash_at:
            back, down = crash_at[i]
            passed, fired, skipped = checkpoints[max(0, len(checkpoints) - 1 - back)]
            fired = list(fired)
            now += down
            wake_at = now + rule.opened(passed, now).wake_after_s
    assert fired == sorted(set(fired))
    if len(fired) >= 2:
        span = round((fired[-1] - fired[0]) / interval) - 1
        assert span == (len(fired) - 2) + (skipped - _skipped_before(fired[0], checkpoints))


def _skipped_before(first: float, checkpoints: list[tuple[float, list[float], int]]) -> int:
    """Ticks skipped by the history up to (and at) its first fired tick."""
    for _, fired, skipped in checkpoints:
        if fired and fired[0] == first:
            return skipped
    return 0

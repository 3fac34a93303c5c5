"""The batching rule of ``stream.take`` (`faust_adapter.batching`), alone: every transition of
its table, and a model run of random values, wake-ups and restores against a plain list, in
which every value is yielded exactly once, in order, in batches of at most ``max_``, and none
waits past its deadline when wake-ups run on time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from sluicegate.faust_adapter.batching import EMPTY, Pending, TakeRule, Verdict

RULE = TakeRule(3, 1.5)


@pytest.mark.parametrize(
    ("pending", "now", "verdict"),
    [
        # the first value sets the deadline and arms its wake-up
        (EMPTY, 10.0, Verdict(Pending(1, 11.5), wake_after_s=1.5)),
        # later values keep it and arm nothing
        (Pending(1, 11.5), 10.5, Verdict(Pending(2, 11.5))),
        # the value that fills the buffer yields it
        (Pending(2, 11.5), 11.0, Verdict(EMPTY, flush=3)),
        # a value after the deadline (its wake-up not run yet) yields at once, itself included
        (Pending(1, 11.5), 11.5, Verdict(EMPTY, flush=2)),
        # a buffer restored larger than max_: max_ at a time, the rest woken at once
        (Pending(7, 11.5), 10.0, Verdict(Pending(5, 11.5), flush=3, wake_after_s=0.0)),
    ],
)
def test_a_value_added(pending: Pending, now: float, verdict: Verdict) -> None:
    assert RULE.value_added(pending, now) == verdict


@pytest.mark.parametrize(
    ("pending", "now", "verdict"),
    [
        (EMPTY, 20.0, Verdict(EMPTY)),  # yielded full before its deadline
        (Pending(2, 11.5), 11.5, Verdict(EMPTY, flush=2)),  # due: a partial batch
        (Pending(2, 11.5), 11.0, Verdict(Pending(2, 11.5), wake_after_s=0.5)),  # early: again
        (Pending(4, 11.5), 11.0, Verdict(Pending(1, 11.5), flush=3, wake_after_s=0.0)),
    ],
)
def test_a_wake_up(pending: Pending, now: float, verdict: Verdict) -> None:
    assert RULE.woken(pending, now) == verdict


@pytest.mark.parametrize(
    ("pending", "now", "verdict"),
    [
        (EMPTY, 5.0, Verdict(EMPTY)),
        (Pending(2, 11.5), 11.0, Verdict(Pending(2, 11.5), wake_after_s=0.5)),
        (Pending(2, 11.5), 99.0, Verdict(Pending(2, 11.5), wake_after_s=0.0)),  # overdue
        (Pending(3, 11.5), 5.0, Verdict(Pending(3, 11.5), wake_after_s=0.0)),  # full
    ],
)
def test_a_restored_buffer_rearms_its_deadline(
    pending: Pending, now: float, verdict: Verdict
) -> None:
    assert RULE.restored(pending, now) == verdict


def test_without_within_only_full_batches_are_yielded() -> None:
    for within in (None, 0.0):  # faust reads a falsy within as no timeout
        rule = TakeRule(2, within)
        assert rule.value_added(EMPTY, 1.0) == Verdict(Pending(1, None))
        assert rule.woken(Pending(1, None), 1e9) == Verdict(Pending(1, None))
        assert rule.restored(Pending(1, None), 1e9) == Verdict(Pending(1, None))
        assert rule.value_added(Pending(1, None), 2.0) == Verdict(EMPTY, flush=2)


def test_a_max_below_one_or_a_negative_within_is_no_rule() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        TakeRule(0, 1.0)
    with pytest.raises(ValueError, match="not negative"):
        TakeRule(1, -1.0)


EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("value"), st.floats(0.0, 2.0)),
        st.tuples(st.just("tick"), st.floats(0.0, 2.0)),
        st.tuples(st.just("restore"), st.floats(0.0, 2.0)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(events=EVENTS, max_=st.integers(1, 5), within=st.sampled_from([None, 0.5, 1.0]))
def test_model_every_value_once_in_order_no_batch_too_big_none_late(
    events: list[tuple[str, float]], max_: int, within: float | None
) -> None:
    """Values arrive and time passes (``tick``: the clock moves on, due wake-ups run on time),
    the job is restored (armed wake-ups are lost, `restored` re-arms them); the buffer is a
    list the verdicts are applied to, as `TakeOperator` applies them to rows."""
    rule = TakeRule(max_, within)
    now = 0.0
    pending, buffer = EMPTY, list[tuple[int, float]]()  # (value, arrived)
    wakes: list[float] = []
    batches: list[list[int]] = []
    sent = 0

    def apply(verdict: Verdict) -> None:
        nonlocal pending
        assert 0 <= verdict.flush <= max_
        if verdict.flush:
            batch, buffer[:] = buffer[: verdict.flush], buffer[verdict.flush :]
            batches.append([value for value, _ in batch])
        pending = verdict.pending
        assert pending.count == len(buffer)
        if verdict.wake_after_s is not None:
            wakes.append(now + verdict.wake_after_s)

    for kind, step in events:
        if kind == "value":
            now += step / 10
            before = pending
            buffer.append((sent, now))
            sent += 1
            apply(rule.value_added(before, now))
        elif kind == "tick":
            horizon = now + step
            while due := sorted(w for w in wakes if w <= horizon):
                wakes.remove(due[0])
                now = max(now, due[0])
                apply(rule.woken(pending, now))
            now = horizon
        else:
            wakes.clear()
            apply(rule.restored(pending, now))
        if within and buffer:  # wake-ups ran on time: nothing waits past its deadline
            assert now - buffer[0][1] <= within + 1e-9
            assert pending.deadline is not None
            assert pending.deadline == pytest.approx(buffer[0][1] + within)
        if not within:
            assert len(buffer) < max_
    yielded = [value for batch in batches for value in batch]
    assert yielded + [value for value, _ in buffer] == list(range(sent))
    assert all(1 <= len(batch) <= max_ for batch in batches)

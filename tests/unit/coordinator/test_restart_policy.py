"""RestartPolicy: exponential delays, the cap, reset after a stable run, giving up."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from sluicegate.coordinator.restart import GiveUp, RestartDecision, RestartPolicy
from sluicegate.operators.exceptions import ConfigError


def delays(policy: RestartPolicy, times: list[float]) -> list[float]:
    out = []
    for now in times:
        decision = policy.on_failure(now)
        assert isinstance(decision, RestartDecision)
        out.append(decision.delay_seconds)
    return out


def test_defaults_double_from_one_second_up_to_a_minute() -> None:
    policy = RestartPolicy()
    assert delays(policy, [float(t) for t in range(9)]) == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert policy.restarts == 9


def test_failures_while_recovering_keep_growing_the_delay() -> None:
    policy = RestartPolicy(initial_delay_seconds=0.5, multiplier=3, max_delay_seconds=10)
    policy.on_running(0)
    assert delays(policy, [5, 6, 7]) == [0.5, 1.5, 4.5]


def test_a_stable_run_resets_the_delay() -> None:
    policy = RestartPolicy(stable_seconds=120)
    assert delays(policy, [0, 1, 2]) == [1, 2, 4]
    policy.on_running(10)
    assert delays(policy, [129.9]) == [8]  # not stable long enough
    policy.on_running(140)
    assert delays(policy, [260]) == [1]  # exactly stable_seconds counts
    assert policy.next_delay_seconds == 2


def test_on_running_twice_keeps_the_first_start() -> None:
    policy = RestartPolicy(stable_seconds=100)
    delays(policy, [0, 0])
    policy.on_running(10)
    policy.on_running(100)
    assert delays(policy, [110]) == [1]


def test_too_many_failures_in_the_window_give_up_for_good() -> None:
    policy = RestartPolicy(max_restarts=2, window_seconds=60)
    assert delays(policy, [0, 10]) == [1, 2]
    decision = policy.on_failure(20)
    assert isinstance(decision, GiveUp)
    assert decision.failures_in_window == 3
    assert "3 failures within 60 s" in decision.reason
    assert policy.given_up == decision
    policy.on_running(30)
    assert policy.on_failure(1_000) == decision
    assert policy.restarts == 2


def test_failures_older_than_the_window_do_not_count() -> None:
    policy = RestartPolicy(max_restarts=2, window_seconds=60)
    assert len(delays(policy, [0, 10, 60, 70])) == 4  # at 60 the failure at 0 left the window
    assert isinstance(policy.on_failure(71), GiveUp)


def test_zero_restarts_allowed_gives_up_at_the_first_failure() -> None:
    policy = RestartPolicy(max_restarts=0, window_seconds=1)
    assert isinstance(policy.on_failure(0), GiveUp)


@pytest.mark.parametrize(
    ("kwargs", "setting"),
    [
        ({"initial_delay_seconds": -1}, "initial_delay_seconds"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"initial_delay_seconds": 10, "max_delay_seconds": 5}, "max_delay_seconds"),
        ({"stable_seconds": 0}, "stable_seconds"),
        ({"max_restarts": 3}, "max_restarts"),
        ({"window_seconds": 3}, "max_restarts"),
        ({"max_restarts": -1, "window_seconds": 3}, "max_restarts"),
        ({"max_restarts": 1, "window_seconds": 0}, "window_seconds"),
    ],
)
def test_invalid_settings_are_config_errors(kwargs: dict[str, float], setting: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RestartPolicy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.setting == setting


@given(
    initial=st.floats(0, 10),
    multiplier=st.floats(1, 5),
    cap_over_initial=st.floats(0, 100),
    gaps=st.lists(st.floats(0, 500), min_size=1, max_size=50),
    running=st.lists(st.booleans(), min_size=50, max_size=50),
)
def test_delays_stay_within_bounds_and_never_shrink_without_a_stable_run(
    initial: float,
    multiplier: float,
    cap_over_initial: float,
    gaps: list[float],
    running: list[bool],
) -> None:
    cap = initial + cap_over_initial
    policy = RestartPolicy(
        initial_delay_seconds=initial, multiplier=multiplier, max_delay_seconds=cap
    )
    now = 0.0
    previous: float | None = None
    ran_since: float | None = None
    for gap, ran in zip(gaps, running, strict=False):
        if ran:
            policy.on_running(now)
            ran_since = now if ran_since is None else ran_since
        now += gap
        decision = policy.on_failure(now)
        assert isinstance(decision, RestartDecision)
        assert initial <= decision.delay_seconds <= cap
        stable = ran_since is not None and now - ran_since >= 120
        if stable:
            assert decision.delay_seconds == initial
        elif previous is not None:
            assert decision.delay_seconds >= previous
        previous = decision.delay_seconds
        ran_since = None

"""Fault injection: parsing ``SLUICEGATE_FAULTS``, and the ``MAX`` budget across processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluicegate.agents import faults
from sluicegate.agents.faults import (
    FAULTS_ENV,
    FAULTS_STATE_ENV,
    FaultInjector,
    FaultSpec,
    fault_point,
    parse_faults,
    reload_faults,
)
from sluicegate.operators.exceptions import ConfigError


class Killed(BaseException):
    """Stands in for SIGKILL."""


def kill() -> None:
    raise Killed


def always() -> float:
    return 0.0


def test_parse_probabilities_and_budgets() -> None:
    assert parse_faults(" effect.after_call=0.05x3 , effect.before_call=1,") == {
        "effect.after_call": FaultSpec("effect.after_call", 0.05, 3),
        "effect.before_call": FaultSpec("effect.before_call", 1.0, None),
    }
    assert parse_faults("") == {}


@pytest.mark.parametrize(
    "spec",
    [
        "nope",
        "=0.5",
        "a=",
        "a=lots",
        "a=0.5x",
        "a=0.5xmany",
        "a=1.5",
        "a=-0.1",
        "a=0.5x0",
        "a=1,a=1",
    ],
)
def test_a_malformed_spec_names_the_variable_and_the_format(spec: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_faults(spec)
    assert caught.value.setting == FAULTS_ENV
    assert "name=probabilityxMAX" in caught.value.problem


def test_a_point_fires_by_its_probability() -> None:
    draws = iter([0.5, 0.2, 0.09])
    injector = FaultInjector({"p": FaultSpec("p", 0.1)}, draw=lambda: next(draws), kill=kill)
    injector.point("p")
    injector.point("p")
    injector.point("other")
    with pytest.raises(Killed):
        injector.point("p")
    assert injector.fires("p") == 1


def test_max_counts_per_process_without_a_state_file() -> None:
    injector = FaultInjector({"p": FaultSpec("p", 1.0, 2)}, draw=always, kill=kill)
    for _ in range(2):
        with pytest.raises(Killed):
            injector.point("p")
    injector.point("p")
    assert injector.fires("p") == 2


def test_max_counts_across_processes_in_the_state_file(tmp_path: Path) -> None:
    state = tmp_path / "faults"
    spec = {"p": FaultSpec("p", 1.0, 3), "q": FaultSpec("q", 1.0, 1)}
    fired = 0
    # Each "process" is a fresh injector; firing ends it, as SIGKILL would.
    for _ in range(6):
        injector = FaultInjector(spec, state_path=state, draw=always, kill=kill)
        try:
            injector.point("p")
        except Killed:
            fired += 1
    assert fired == 3
    assert state.read_text() == "p\np\np\n"
    with pytest.raises(Killed):
        FaultInjector(spec, state_path=state, draw=always, kill=kill).point("q")
    assert FaultInjector(spec, state_path=state).fires("p") == 3
    assert FaultInjector(spec, state_path=state).fires("q") == 1


def test_the_fire_is_durable_before_the_kill(tmp_path: Path) -> None:
    state = tmp_path / "faults"

    def check_then_kill() -> None:
        assert state.read_text() == "p\n"
        raise Killed

    injector = FaultInjector(
        {"p": FaultSpec("p", 1.0, 1)}, state_path=state, draw=always, kill=check_then_kill
    )
    with pytest.raises(Killed):
        injector.point("p")


def test_from_env(tmp_path: Path) -> None:
    assert FaultInjector.from_env({}) is None
    assert FaultInjector.from_env({FAULTS_ENV: ""}) is None
    injector = FaultInjector.from_env({FAULTS_ENV: "p=0x1", FAULTS_STATE_ENV: str(tmp_path / "s")})
    assert injector is not None
    injector.point("p")  # probability 0: never fires
    assert injector.fires("p") == 0
    with pytest.raises(ConfigError, match=FAULTS_ENV):
        FaultInjector.from_env({FAULTS_ENV: "p=maybe"})


def test_fault_point_is_a_no_op_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAULTS_ENV, raising=False)
    monkeypatch.setattr(faults, "_loaded", False)
    monkeypatch.setattr(faults, "_injector", None)
    fault_point("effect.after_call")
    assert faults._injector is None
    assert faults._loaded
    # the environment is read once: a later setting is not seen without a reload
    monkeypatch.setenv(FAULTS_ENV, "effect.after_call=0")
    fault_point("effect.after_call")
    assert faults._injector is None
    assert reload_faults() is not None
    assert reload_faults({}) is None
    assert os.environ[FAULTS_ENV] == "effect.after_call=0"

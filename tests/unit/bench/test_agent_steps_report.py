"""`bench.agent_steps` takes each ratio within a round: the median of the rounds' own ratios,
not a ratio of medians measured minutes apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.agent_steps import LANGGRAPH_MODES, Measured, Round, report

RUNS, STEPS = 2, 10


def _measured(steps_per_s: float) -> Measured:
    return Measured(RUNS * STEPS / steps_per_s, RUNS, STEPS, cpu=0.01, broker_cpu=0.0)


def _langgraph(steps_per_s: float) -> dict[str, Any]:
    """LangGraph's JSON line with every mode at ``steps_per_s``."""
    mode = {"elapsed_s": RUNS * STEPS / steps_per_s, "cpu_s": 0.01}
    return {
        **{key: mode for key in LANGGRAPH_MODES},
        "steps": STEPS,
        "versions": {"langgraph": "x"},
        "sqlite_pragmas": {"journal_mode": "wal", "synchronous": 2},
        "checkpoints_per_run": 2 * STEPS + 1,
    }


def _ours() -> dict[str, Measured]:
    direct = _measured(100.0)
    ours = {"plain": direct, "memory": direct, "kafka": direct}
    for name in ("job", "job_engine", "processes"):
        ours[name] = _measured(1000.0)
        ours[f"{name}_fastest"] = ours[f"{name}_slowest"] = ours[name]
    return ours


def test_each_ratio_is_the_median_of_the_rounds_own_ratios(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLUICEGATE_BENCH_OUT", str(tmp_path))
    # Round by round ours and LangGraph move together (a machine that slowed down): the
    # rounds' own ratios are 2, 4 and 3; a ratio of the medians would say 1000 / 300 = 3.33.
    rounds = [
        Round(_measured(600.0), _measured(700.0), _measured(600.0), _langgraph(300.0)),
        Round(_measured(1000.0), _measured(1100.0), _measured(1000.0), _langgraph(250.0)),
        Round(_measured(1200.0), _measured(1300.0), _measured(1200.0), _langgraph(400.0)),
    ]
    report(_ours(), rounds, RUNS, STEPS, processes=2)
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("sluicegate/langgraph")]
    assert lines[0].startswith("sluicegate/langgraph steps/s: 3.00x (2.00-4.00)  (LocalJob")
    assert "3 paired rounds" in lines[0]
    assert any(line.endswith("3.00x (2.00-4.00)") for line in out.splitlines())  # the column


def test_a_round_without_langgraph_reports_it_unavailable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLUICEGATE_BENCH_OUT", str(tmp_path))
    rounds = [
        Round(_measured(600.0), _measured(700.0), None, _langgraph(300.0)),
        Round(_measured(600.0), _measured(700.0), None, "uv: no network"),
    ]
    report(_ours(), rounds, RUNS, STEPS, processes=0)
    out = capsys.readouterr().out
    assert "langgraph: unavailable (uv: no network)" in out
    assert "sluicegate/langgraph" not in out

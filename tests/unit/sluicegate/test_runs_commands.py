"""``sluicegate runs``: its arguments, its patch file checks and its plain-text views."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluicegate.agents.history.events import RunSummary
from sluicegate.agents.history.replay import replay
from sluicegate.cli.main import _parser
from sluicegate.cli.run_text import history_text, replay_text, run_text, runs_table, short
from sluicegate.cli.runs import _read_patch
from sluicegate.operators.exceptions import ConfigError
from tests.unit.agents.test_replay import events_of, finished_run
from tests.unit.agents.test_replay_all_events import rolled_back_run


def test_the_runs_commands_parse() -> None:
    args = _parser().parse_args(
        ["runs", "fork", "r1", "--from-step", "2", "--run-id", "r1.b", "--recorded-only"]
    )
    assert (args.run_id, args.from_step, args.new_run_id) == ("r1", 2, "r1.b")
    assert args.recorded_only
    assert args.agent == "refund-desk"
    listing = _parser().parse_args(["runs", "list", "--status", "done", "--json"])
    assert (listing.status, listing.json, listing.limit) == ("done", True, 100)


def test_a_fork_with_a_malformed_run_id_is_refused_before_reading_kafka() -> None:
    args = _parser().parse_args(
        ["runs", "fork", "r1", "--from-step", "1", "--run-id", "a/b", "--bootstrap", "x"]
    )
    with pytest.raises(ConfigError, match="'a/b' is not a run id"):
        args.run(args)


def test_a_patch_file_is_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text('{"goal": "refund 8"}')
    assert _read_patch(good).model_dump() == {"goal": "refund 8"}
    bad = tmp_path / "bad.json"
    bad.write_text('{"goal": "a", "instructions": "b"}')
    with pytest.raises(ConfigError, match="is not a patch"):
        _read_patch(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        _read_patch(tmp_path / "missing.json")
    big = tmp_path / "big.json"
    big.write_text(" " * (1024 * 1024 + 1))
    with pytest.raises(ConfigError, match="larger than"):
        _read_patch(big)


async def test_the_views_show_every_step() -> None:
    turns = [[("look", {"x": 1}), ("refund", {"amount": 5.0}), ("nope", {})], "all done"]
    desk, state = await finished_run(turns, [False])  # type: ignore[arg-type]
    events = events_of(desk)
    text = history_text(events).splitlines()
    assert len(text) == len(events)
    kinds = [line.split(": ", 1)[0].rsplit(" ", 1)[-1] for line in text]
    assert kinds == [
        "started", "model", "tool", "approval_requested", "approval", "tool_rejected", "model",
    ]  # fmt: skip
    assert "look(" in text[1]
    assert "ms)" in text[1]
    assert "rejected by ann" in text[4]
    assert "answer all done" in text[6]
    replayed = replay_text(replay(events)).splitlines()
    assert replayed[-1].startswith("#6 model -> done, step 2")
    shown = run_text(state)
    assert "status   done" in shown
    assert "answer   all done" in shown
    table = runs_table([RunSummary("r1", "done", 2, 6, 1000.0, goal="refund 7")])
    assert "r1" in table.splitlines()[1]
    assert runs_table([]) == "no runs"
    assert short("x" * 500, 20) == "x" * 17 + "..."


async def test_the_views_show_a_rollback() -> None:
    events, state = await rolled_back_run()
    text = history_text(events)
    assert "rollback_started: to step 0 by ann; undo" in text
    assert "compensation_needed: pay r1/3/0: pay is irreversible" in text
    assert "approval: undoing r1/3/0 approved by ann" in text
    assert "compensation: unhold r1/2/0/compensate/1 undoing r1/2/0 -> released h-2b" in text
    assert text.splitlines()[-1].endswith("status: rolled_back to step 0 (asked by ann)")
    shown = run_text(state)
    assert "#1 to step 0 by ann" in shown
    assert "undone compensated" in shown
    assert "undone by_hand" in shown


def _tool_event(**fields: object) -> dict[str, object]:
    return {
        "seq": 3, "at": 1000.0, "step": 1, "type": "tool", "tool": "issue_refund",
        "call_id": "call_1", "key": "r1/1/call_1", "result": {"refund_id": "r-1"}, "error": None,
    } | fields  # fmt: skip


@pytest.mark.parametrize(
    ("settled_by", "mark"),
    [
        ("retry", "[retried after unknown outcome: the service must deduplicate]"),
        ("lookup", "[settled by lookup after unknown outcome]"),
        ("call_after_lookup", "[called after unknown outcome: the lookup found nothing]"),
    ],
)
def test_history_marks_a_result_that_settled_an_unknown_outcome(settled_by: str, mark: str) -> None:
    line = history_text([_tool_event(settled_by=settled_by)])
    assert f"tool: issue_refund call_1 {mark} -> " in line
    assert "unknown outcome" not in history_text([_tool_event()])


def test_history_names_the_call_and_key_a_run_failed_closed_on() -> None:
    failed = {
        "seq": 4, "at": 1000.0, "step": 1, "type": "status", "status": "failed",
        "reason": "outcome_unknown", "unknown_key": "r1/1/call_1", "tool": "issue_refund",
        "call_id": "call_1", "on_unknown": "fail",
    }  # fmt: skip
    assert history_text([failed]).endswith(
        "status: failed: outcome_unknown (issue_refund call call_1 key r1/1/call_1: it may or "
        "may not have happened; a person decides)"
    )
    del failed["tool"]  # an event written before the call was named
    assert "(key r1/1/call_1: it may" in history_text([failed])

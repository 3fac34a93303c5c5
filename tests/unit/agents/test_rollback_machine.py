"""The sans-IO rollback machine: order, keys, argument filling, blocking, refusals, statuses;
and the commands on the approvals topic, hostile ones included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from sluicegate.agents.journal import EffectKind, JournalEntry
from sluicegate.agents.messages import (
    MAX_COMMAND_BYTES,
    ApprovalDecision,
    RollbackRun,
    parse_command,
)
from sluicegate.agents.rollback import machine as rollback
from sluicegate.agents.runs.machine import ALLOWED, Idle, decide_approval
from sluicegate.agents.runs.state import EffectRecord, RunState, RunStatus
from sluicegate.agents.tools import ToolContext, ToolKind, tool


@tool(kind=ToolKind.REVERSIBLE, compensate="cancel_room")
async def book_room(ctx: ToolContext, hotel: str, nights: int) -> dict[str, Any]:
    """Book a room."""
    return {"booking_id": "b", "hotel": hotel}


@tool(kind=ToolKind.IRREVERSIBLE)
async def cancel_room(ctx: ToolContext, booking_id: str, hotel: str, note: str = "") -> str:
    """Cancel a booking."""
    return booking_id


@tool(kind=ToolKind.IRREVERSIBLE)
async def pay(ctx: ToolContext, amount: float) -> str:
    """Pay."""
    return "paid"


@tool(kind=ToolKind.IDEMPOTENT_WRITE)
async def upsert(ctx: ToolContext, row: int) -> str:
    """Write a row."""
    return "written"


TOOLS = {t.name: t for t in (book_room, cancel_room, pay, upsert)}


def effect(step: int, index: int, name: str, status: str = "done", **fields: Any) -> EffectRecord:
    kind = TOOLS[name].kind.value
    return EffectRecord.model_validate(
        {
            "key": f"r1/{step}/{index}",
            "tool": name,
            "call_id": f"c{step}-{index}",
            "step": step,
            "arguments": fields.pop("arguments", {}),
            "kind": kind,
            "compensate": TOOLS[name].compensate,
            "status": status,
            **fields,
        }
    )


def booking(step: int, index: int, booking_id: str, status: str = "done") -> EffectRecord:
    result = {"booking_id": booking_id} if status == "done" else None
    arguments = {"hotel": "h", "nights": 2}
    return effect(step, index, "book_room", status, arguments=arguments, result=result)


def run(*effects: EffectRecord, status: RunStatus = RunStatus.DONE, step: int = 5) -> RunState:
    return RunState(
        run_id="r1", goal="g", status=status, step=step, effects=effects,
        created_at=0.0, updated_at=0.0,
    )  # fmt: skip


def entry(key: str, status: str, *, result: Any = None, error: str | None = None) -> JournalEntry:
    return JournalEntry.model_validate(
        {"key": key, "run_id": "r1", "status": status, "kind": EffectKind.TOOL, "name": "x",
         "result": result, "error": error, "attempt": 1, "written_at": 0.0}
    )  # fmt: skip


def test_effects_after_the_step_are_undone_latest_first_each_under_its_own_key() -> None:
    state = run(
        booking(1, 0, "b1"),
        effect(2, 0, "pay", arguments={"amount": 5.0}, result="paid"),
        booking(3, 0, "b3"),
        booking(3, 1, "bx", status="failed"),
        effect(4, 0, "upsert", arguments={"row": 1}),
    )
    start = rollback.start_rollback(state, 1, "ann", "wrong hotel", 10.0)
    assert start.state.status is RunStatus.ROLLING_BACK
    assert start.event["type"] == "rollback_started"
    assert start.event["effects"] == ["r1/4/0", "r1/3/0", "r1/2/0"]
    assert start.event["nothing_to_undo"] == ["r1/3/1"]
    assert start.event["was"] == "done"
    state = start.state

    action = rollback.next_action(state, TOOLS)  # an idempotent write has no compensation
    assert isinstance(action, rollback.Block)
    assert "upsert is idempotent_write" in action.problem
    blocked = rollback.block(state, action, 11.0, webhook=False)
    assert blocked.state.status is RunStatus.WAITING_APPROVAL
    assert blocked.event["type"] == "compensation_needed"
    assert (blocked.event["tool"], blocked.event["key"]) == ("upsert", "r1/4/0")
    assert blocked.event["arguments"] == {"row": 1}
    assert rollback.next_action(blocked.state, TOOLS) == Idle()  # no webhook: nothing to do
    handled = rollback.decide_compensation(blocked.state, True, "bob", "fixed it", 12.0)
    assert handled is not None
    assert handled.state.status is RunStatus.ROLLING_BACK
    assert handled.event["approved"] is True

    action = rollback.next_action(handled.state, TOOLS)
    assert action == rollback.Compensate(
        handled.state.effects[2], cancel_room, {"booking_id": "b3", "hotel": "h", "note": ""},
        "r1/3/0/compensate/1",
    )  # fmt: skip
    assert isinstance(action, rollback.Compensate)
    compensated = rollback.after_compensation(handled.state, action, "b3", None, 13.0)
    assert compensated.event["type"] == "compensation"
    assert compensated.event["result"] == "b3"
    assert compensated.event["key"] == "r1/3/0/compensate/1"

    action = rollback.next_action(compensated.state, TOOLS)
    assert isinstance(action, rollback.Block)
    assert "pay is irreversible" in action.problem
    waiting = rollback.block(compensated.state, action, 14.0, webhook=False).state
    approved = rollback.decide_compensation(waiting, True, "bob", None, 15.0)
    assert approved is not None
    assert rollback.next_action(approved.state, TOOLS) == rollback.Finish()
    done = rollback.finish(approved.state, 16.0)
    assert done.state.status is RunStatus.ROLLED_BACK
    assert done.state.status.finished
    assert done.event["status"] == "rolled_back"
    assert [e.undone for e in done.state.effects] == [
        None,
        "by_hand",
        "compensated",
        None,
        "by_hand",
    ]
    assert rollback.next_action(done.state, TOOLS) == Idle()


def test_arguments_are_filled_from_the_result_then_the_arguments_and_validated() -> None:
    both = booking(1, 0, "b1").model_copy(update={"result": {"booking_id": "b1", "hotel": "r"}})
    assert rollback.compensation_arguments(cancel_room, both) == {
        "booking_id": "b1", "hotel": "r", "note": "",
    }  # fmt: skip
    not_a_dict = booking(1, 0, "b1").model_copy(update={"result": "ok"})
    problem = rollback.compensation_arguments(cancel_room, not_a_dict)
    assert isinstance(problem, str)
    assert "booking_id: Field required" in problem
    wrong_type = booking(1, 0, "b1").model_copy(update={"result": {"booking_id": 7}})
    assert "booking_id" in str(rollback.compensation_arguments(cancel_room, wrong_type))
    state = rollback.start_rollback(run(not_a_dict), 0, "ann", None, 1.0).state
    action = rollback.next_action(state, TOOLS)
    assert isinstance(action, rollback.Block)
    assert "cannot compensate book_room" in action.problem


def test_an_effect_left_issued_is_settled_by_the_journal_first() -> None:
    state = rollback.start_rollback(run(booking(2, 0, "", status="issued")), 1, "a", None, 1.0)
    action = rollback.next_action(state.state, TOOLS)
    assert isinstance(action, rollback.Settle)
    key = "r1/2/0"

    never = rollback.settle(state.state, action, None, None, 2.0)  # the call never started
    assert never.event["outcome"] == "issued"
    skip = rollback.next_action(never.state, TOOLS)
    assert isinstance(skip, rollback.Skip)
    assert "never started" in skip.why

    done = entry(key, "done", result={"booking_id": "b9"})
    settled = rollback.settle(state.state, action, entry(key, "issued"), done, 2.0)
    compensate = rollback.next_action(settled.state, TOOLS)
    assert isinstance(compensate, rollback.Compensate)
    assert compensate.arguments["booking_id"] == "b9"

    failed = entry(key, "done", error="boom")
    settled = rollback.settle(state.state, action, entry(key, "issued"), failed, 2.0)
    assert isinstance(rollback.next_action(settled.state, TOOLS), rollback.Skip)

    # Started, outcome unknown: the result is missing, so booking_id cannot be filled.
    unknown = rollback.settle(state.state, action, entry(key, "issued"), None, 2.0)
    assert unknown.event["outcome"] == "unknown"
    blocked = rollback.next_action(unknown.state, TOOLS)
    assert isinstance(blocked, rollback.Block)
    assert "outcome is unknown" in blocked.problem


def test_an_unknown_reversible_effect_is_compensated_when_its_arguments_suffice() -> None:
    @tool(kind=ToolKind.REVERSIBLE, compensate="unhold")
    async def hold(ctx: ToolContext, seat: str) -> str:
        """Hold a seat."""
        return seat

    @tool(kind=ToolKind.IRREVERSIBLE)
    async def unhold(ctx: ToolContext, seat: str) -> str:
        """Release a seat."""
        return seat

    record = EffectRecord(
        key="r1/1/0", tool="hold", call_id="c", step=1, arguments={"seat": "4a"},
        kind="reversible", compensate="unhold", status="unknown",
    )  # fmt: skip
    state = rollback.start_rollback(run(record), 0, "a", None, 1.0).state
    action = rollback.next_action(state, {"hold": hold, "unhold": unhold})
    assert isinstance(action, rollback.Compensate)
    assert action.arguments == {"seat": "4a"}


def test_a_failed_compensation_blocks_and_a_rejection_stops_the_rollback() -> None:
    state = rollback.start_rollback(run(booking(2, 0, "b2")), 1, "ann", None, 1.0).state
    action = rollback.next_action(state, TOOLS)
    assert isinstance(action, rollback.Compensate)
    failed = rollback.after_compensation(state, action, None, "409 already cancelled", 2.0)
    assert failed.event["error"] == "409 already cancelled"
    assert failed.state.status is RunStatus.ROLLING_BACK
    block = rollback.next_action(failed.state, TOOLS)
    assert isinstance(block, rollback.Block)
    assert "409 already cancelled" in block.problem
    waiting = rollback.block(failed.state, block, 3.0, webhook=True)
    assert waiting.state.pending_approval is not None
    assert waiting.state.pending_approval.kind == "compensation"
    notify = rollback.next_action(waiting.state, TOOLS)
    assert notify == rollback.Notify(waiting.state.effects[0], block.problem, "r1/2/0/alert/1")
    assert isinstance(notify, rollback.Notify)
    notified = rollback.after_notify(waiting.state, notify, None, 4.0)
    assert rollback.next_action(notified.state, TOOLS) == Idle()
    # A decision about a call is not one about a compensation.
    assert decide_approval(notified.state, "", True, "bob", None, 5.0) is None
    stopped = rollback.decide_compensation(notified.state, False, "bob", "leave it", 5.0)
    assert stopped is not None
    assert (stopped.state.status, stopped.state.reason) == (RunStatus.FAILED, "rollback_stopped")
    assert stopped.state.pending_approval is None
    assert rollback.decide_compensation(stopped.state, True, "bob", None, 6.0) is None


def test_a_second_rollback_goes_further_back_with_new_keys_and_skips_what_was_undone() -> None:
    state = run(booking(1, 0, "b1"), booking(3, 0, "b3"))
    first = rollback.start_rollback(state, 2, "ann", None, 1.0).state
    action = rollback.next_action(first, TOOLS)
    assert isinstance(action, rollback.Compensate)
    assert action.key == "r1/3/0/compensate/1"
    rolled = rollback.finish(rollback.after_compensation(first, action, "ok", None, 2.0).state, 3)
    with pytest.raises(ValueError, match="rolled back to step 2 already"):
        rollback.start_rollback(rolled.state, 2, "ann", None, 4.0)
    second = rollback.start_rollback(rolled.state, 0, "ann", None, 4.0)
    assert second.event["effects"] == ["r1/1/0"]
    action = rollback.next_action(second.state, TOOLS)
    assert isinstance(action, rollback.Compensate)
    assert action.key == "r1/1/0/compensate/2"


@pytest.mark.parametrize(
    ("status", "to_step", "problem"),
    [
        (RunStatus.DONE, 5, "is at step 5"),
        (RunStatus.DONE, 9, "is at step 5"),
        (RunStatus.ROLLING_BACK, 1, "being rolled back already"),
    ],
)
def test_a_rollback_that_cannot_apply_is_refused(
    status: RunStatus, to_step: int, problem: str
) -> None:
    state = run(booking(1, 0, "b1"), status=status)
    if status is RunStatus.ROLLING_BACK:
        state = rollback.start_rollback(run(booking(1, 0, "b1")), 0, "a", None, 1.0).state
    with pytest.raises(ValueError, match=problem):
        rollback.start_rollback(state, to_step, "mallory", None, 2.0)


@pytest.mark.parametrize(
    "status",
    [RunStatus.RUNNING, RunStatus.WAITING_APPROVAL, RunStatus.DONE, RunStatus.FAILED,
     RunStatus.CANCELLED, RunStatus.ROLLED_BACK],
)  # fmt: skip
def test_running_waiting_and_finished_runs_may_be_rolled_back(status: RunStatus) -> None:
    start = rollback.start_rollback(run(booking(1, 0, "b1"), status=status), 0, "a", None, 1.0)
    assert start.state.status is RunStatus.ROLLING_BACK
    assert (start.state.pending_calls, start.state.pending_approval) == ((), None)


def test_the_status_table_lets_a_rollback_in_and_out() -> None:
    assert RunStatus.ROLLING_BACK in ALLOWED[RunStatus.RUNNING]
    assert RunStatus.ROLLED_BACK not in ALLOWED[RunStatus.RUNNING]
    assert ALLOWED[RunStatus.ROLLING_BACK] == {
        RunStatus.WAITING_APPROVAL, RunStatus.ROLLED_BACK, RunStatus.FAILED,
    }  # fmt: skip
    for finished in (s for s in RunStatus if s.finished):
        assert ALLOWED[finished] == {RunStatus.ROLLING_BACK}


def test_old_decisions_parse_and_decisions_are_written_as_before() -> None:
    old = b'{"schema_version": 1, "run_id": "r1", "approved": true, "by": "ann"}'
    decision = parse_command(old)
    assert isinstance(decision, ApprovalDecision)
    assert "command" not in json.loads(decision.model_dump_json())
    command = RollbackRun(run_id="r1", to_step=2, by="ann")
    assert parse_command(command.model_dump_json().encode()) == command
    assert json.loads(command.model_dump_json())["command"] == "rollback"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (b"[]", "not an object"),
        (b"\xff{}", "codec can.t decode"),
        (b'{"command": 3, "run_id": "r1"}', "unknown command 3"),
        (b'{"command": "undo", "run_id": "r1"}', "unknown command 'undo'"),
        (b'{"command": "rollback", "run_id": "r1", "to_step": -1}', "greater than or equal"),
        (b'{"command": "rollback", "run_id": "a/b", "to_step": 1}', "should match pattern"),
        (b'{"command": "rollback", "run_id": "r1", "to_step": 1, "x": 1}', "Extra inputs"),
        (b'{"command": "rollback", "run_id": "r1", "to_step": "1"}', "valid integer"),
        (b'{"command": "rollback", "run_id": "r1"}', "to_step"),
        (b" " * (MAX_COMMAND_BYTES + 1), "at most"),
    ],
)
def test_hostile_commands_are_refused_with_a_reason(value: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_command(value)


def test_a_state_written_before_rollback_decodes_with_no_rollback() -> None:
    doc = run(booking(1, 0, "b1")).model_dump(mode="json")
    del doc["rollback"]
    for e in doc["effects"]:
        del e["undone"]
    state = RunState.decode(json.dumps(doc).encode())
    assert state.rollback is None
    assert state.effects[0].undone is None
    with pytest.raises(ValidationError):
        RunState.model_validate({**doc, "rollback": {"number": 0}})

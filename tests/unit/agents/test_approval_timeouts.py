"""The approval timeout rule: how long a pending call waits, and what its expiry does."""

from __future__ import annotations

from typing import Literal

from sluicegate.agents.models.contract import ToolCall
from sluicegate.agents.runs import machine
from sluicegate.agents.runs.approval_timeouts import ApprovalTimeouts
from sluicegate.agents.runs.state import Budget, PendingApproval, RunState, RunStatus

PROPOSED_AT = 100.0


def _waiting(kind: Literal["call", "compensation"] = "call") -> RunState:
    run = machine.start_run("r1", "goal", "be brief", Budget(), 0.0).state
    call = ToolCall(id="c1", name="refund", arguments="{}")
    pending = PendingApproval(
        call=call, key="r1/1/0", tool="refund", arguments={}, proposed_at=PROPOSED_AT, kind=kind
    )
    return run.model_copy(
        update={
            "status": RunStatus.WAITING_APPROVAL,
            "pending_approval": pending,
            "pending_calls": (call,),
        }
    )


def _rule(
    timeout_s: float | None, now: float, on_timeout: Literal["reject", "fail"] = "reject"
) -> ApprovalTimeouts:
    return ApprovalTimeouts(timeout_s, on_timeout, lambda: now)


def test_the_time_left_runs_from_the_proposal_and_never_goes_below_zero() -> None:
    assert _rule(30.0, now=110.0).remaining(_waiting()) == 20.0
    assert _rule(30.0, now=200.0).remaining(_waiting()) == 0.0
    assert _rule(30.0, now=110.0).remaining_since(105.0) == 25.0


def test_no_timeout_without_a_limit_a_pending_call_or_for_a_compensation() -> None:
    assert _rule(None, now=1e9).remaining(_waiting()) is None
    assert _rule(None, now=1e9).remaining_since(0.0) is None
    assert _rule(30.0, now=1e9).remaining(_waiting(kind="compensation")) is None
    idle = machine.start_run("r2", "goal", "be brief", Budget(), 0.0).state
    assert _rule(30.0, now=1e9).remaining(idle) is None
    assert _rule(30.0, now=1e9).expire(idle, 1e9) is None


def test_nothing_expires_before_its_time() -> None:
    assert _rule(30.0, now=129.0).expire(_waiting(), 129.0) is None


def test_an_expired_call_is_rejected_by_timeout_or_fails_the_run() -> None:
    rejected = _rule(30.0, now=130.0).expire(_waiting(), 130.0)
    assert rejected is not None
    assert rejected.event["by"] == "timeout"
    assert rejected.event["approved"] is False
    assert rejected.state.pending_approval is None
    failed = _rule(30.0, now=130.0, on_timeout="fail").expire(_waiting(), 130.0)
    assert failed is not None
    assert failed.state.status is RunStatus.FAILED
    assert failed.state.reason == "approval_timeout"

"""RunHeader.peek: which stored runs a restore may count without decoding them in full."""

from __future__ import annotations

import json

import pytest

from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.runs.header import RunHeader
from sluicegate.agents.runs.state import PendingApproval, RunState, RunStatus


def stored(status: RunStatus, kind: str | None = "call") -> RunState:
    call = ToolCall(id="c1", name="refund", arguments='{"amount": 5}')
    approval = None
    if kind is not None:
        approval = PendingApproval(
            call=call, key="r1/1/0", tool="refund", arguments={"amount": 5}, proposed_at=12.5,
            kind=kind,  # type: ignore[arg-type]
        )  # fmt: skip
    return RunState(
        run_id="r1", goal="refund", status=status, pending_approval=approval,
        messages=(ChatMessage(role="user", content="refund"),), created_at=1.0, updated_at=2.0,
    )  # fmt: skip


def test_a_run_parked_on_a_calls_approval_is_read_by_its_header() -> None:
    header = RunHeader.peek(stored(RunStatus.WAITING_APPROVAL).encode())
    assert header is not None
    assert (header.run_id, header.status, header.waiting_since) == (
        "r1", RunStatus.WAITING_APPROVAL, 12.5,
    )  # fmt: skip


@pytest.mark.parametrize("status", [s for s in RunStatus if s.finished])
def test_a_finished_run_is_read_by_its_header(status: RunStatus) -> None:
    header = RunHeader.peek(stored(status, kind=None).encode())
    assert header is not None
    assert (header.status, header.waiting_since) == (status, None)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (RunStatus.RUNNING, None),
        (RunStatus.ROLLING_BACK, None),
        (RunStatus.WAITING_APPROVAL, "compensation"),  # a rollback's wait: decoded in full
        (RunStatus.WAITING_APPROVAL, None),
    ],
)
def test_runs_with_work_or_a_rollback_are_decoded_in_full(
    status: RunStatus, kind: str | None
) -> None:
    assert RunHeader.peek(stored(status, kind).encode()) is None


def test_older_versions_and_unreadable_documents_are_decoded_in_full() -> None:
    doc = json.loads(stored(RunStatus.WAITING_APPROVAL).encode())
    doc["schema_version"] = 2  # upgraders run only in the full decode
    assert RunHeader.peek(json.dumps(doc, separators=(",", ":")).encode()) is None
    current = stored(RunStatus.DONE, kind=None).encode()
    assert RunHeader.peek(current[: len(current) // 2]) is None  # cut short
    assert RunHeader.peek(current.replace(b'"status":"done"', b'"status":"asleep"')) is None
    assert RunHeader.peek(b"\xff\xfe") is None

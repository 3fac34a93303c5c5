"""`RunHeader`: what opening a subtask needs of a stored run, without decoding all of it.

`AgentOperator.open` looks at every run in its state: to count it, to re-drive it if it has
work pending, to set its approval timeout. A full `RunState.decode` (messages, effects, every
model validated) of each run made a restore with 100,000 runs parked for approval take about
13 s of decoding (docs/performance.md, "Parked runs"). A run that waits for a person's
decision on a call, or has finished, needs only its id, status and pending approval's start
and kind: `RunHeader.peek` reads those (the document parsed by pydantic's JSON parser, only
these fields validated and built) and answers None for any other run, and for a document not
of the current version as `RunState.encode` writes it, which then take the full decode (and
its upgraders). The rest of a peeked document is decoded, and validated, when the run is next
used (`RunCache.get`): a corrupt document still fails then, loudly, as it did at open.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from sluicegate.agents.runs.state import CURRENT_PREFIX, RunStatus

__all__ = ["RunHeader"]


class _PendingHeader(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    proposed_at: float
    kind: Literal["call", "compensation"] = "call"


class RunHeader(BaseModel):
    """A stored run's id, status and pending approval; see the module docstring."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    run_id: str
    status: RunStatus
    pending_approval: _PendingHeader | None = None

    @property
    def waiting_since(self) -> float | None:
        """When the run began to wait for a person (None: it does not wait)."""
        if self.status is not RunStatus.WAITING_APPROVAL or self.pending_approval is None:
            return None
        return self.pending_approval.proposed_at

    @classmethod
    def peek(cls, data: bytes) -> RunHeader | None:
        """The header of a current-version document of a run parked on a call's approval or
        finished; None for any other (decode it in full)."""
        if not data.startswith(CURRENT_PREFIX):
            return None
        try:
            header = cls.model_validate_json(data)
        except ValidationError:
            return None  # the full decode says what is wrong with it
        pending = header.pending_approval
        if header.status.finished:
            return header
        if header.status is RunStatus.WAITING_APPROVAL and pending is not None:
            return header if pending.kind == "call" else None
        return None

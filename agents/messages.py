"""The records an agent operator reads and writes, as versioned JSON documents.

* tasks topic (key ``run_id``, any partitioner): `TaskRequest` starts a run; a second one for
  the same run is ignored (a producer's retry must not start the run twice).
* approvals topic (key ``run_id``, any partitioner): a person's commands about runs, read with
  `parse_command`: `ApprovalDecision` (no ``command`` field, or ``"command": "decide"``) and
  `RollbackRun` (``"command": "rollback"``). The routing operator re-keys tasks and commands
  by the ``run_id`` of the value, so they meet in one partition of the agent.
* events sink (key ``run_id``): one JSON event per step, effect and status change, numbered
  per run by ``seq``.
* results sink, or a topic that downstream operators and agents read (key ``run_id``): one
  `RunResult` each time a run finishes (a run rolled back later finishes again: a second
  result, status ``rolled_back`` or ``failed``), carrying the task's ``metadata`` on, so a
  stage downstream knows the customer or tenant without a lookup.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agents.state import Budget, EffectRecord, RunState

__all__ = [
    "MAX_COMMAND_BYTES",
    "ApprovalDecision",
    "RollbackRun",
    "RunResult",
    "TaskRequest",
    "parse_command",
]

MAX_COMMAND_BYTES = 64 * 1024
"""The largest command document `parse_command` reads."""


class TaskRequest(BaseModel):
    """Start run ``run_id`` towards ``goal``.

    ``metadata`` (added in schema_version 1 with a default, so tasks without it still parse)
    is what the run carries for its tools, e.g. ``{"customer_id": "c-9", "tenant": "eu"}``:
    kept in `RunState` and shown to every tool call as ``ctx.metadata``; the model does not see
    it. Other top-level fields are refused, so a misspelt field is an error, not ignored.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    run_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")
    goal: str = Field(min_length=1)
    budget: Budget | None = None
    """Limits for this run: the ones it sets replace the agent's default budget's, each capped
    at the agent's ``budget_ceiling`` (`Agent.budget_for`)."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """JSON values the run's tools read as ``ctx.metadata``."""

    def encode(self) -> bytes:
        """The record value for the tasks topic; the budget names only the limits it sets, so
        that the others stay the agent's (``Budget(max_cost_usd=0.1)`` keeps its step limit)."""
        data = self.model_dump(mode="json", exclude_none=True, exclude={"budget"})
        if self.budget is not None:
            data["budget"] = self.budget.model_dump(mode="json", exclude_unset=True)
        return json.dumps(data).encode()


class ApprovalDecision(BaseModel):
    """Approve or reject what run ``run_id`` waits on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    command: Literal["decide"] = Field(default="decide", exclude=True)
    """Read but never written: decision documents stay as they were before commands."""
    run_id: str
    approved: bool
    call_id: str = ""
    """The call decided on; empty means whatever call the run is waiting on."""
    by: str = "unknown"
    reason: str | None = None


class RollbackRun(BaseModel):
    """Undo the effects of run ``run_id``'s steps after ``to_step`` (`agents.rollback`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    schema_version: Literal[1] = 1
    command: Literal["rollback"] = "rollback"
    run_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")
    to_step: int = Field(ge=0, le=1_000_000)
    by: str = Field(default="unknown", min_length=1, max_length=200)
    reason: str | None = Field(default=None, max_length=2000)


_COMMANDS: dict[str, type[ApprovalDecision] | type[RollbackRun]] = {
    "decide": ApprovalDecision,
    "rollback": RollbackRun,
}


def parse_command(value: bytes) -> ApprovalDecision | RollbackRun:
    """The command a record of the approvals topic holds, by its ``command`` field (absent:
    a decision, as written before commands existed).

    Raises:
        ValueError: too large, not a JSON object, an unknown command, or a document that
            does not validate (pydantic's ``ValidationError`` is a ``ValueError``).
    """
    if len(value) > MAX_COMMAND_BYTES:
        raise ValueError(f"a command of {len(value)} bytes; at most {MAX_COMMAND_BYTES}")
    doc = json.loads(value)
    if not isinstance(doc, dict):
        raise ValueError(f"a command is a JSON object, not {type(doc).__name__}")
    name = doc.get("command", "decide")
    model = _COMMANDS.get(name) if isinstance(name, str) else None
    if model is None:
        raise ValueError(f"unknown command {name!r}; known: {sorted(_COMMANDS)}")
    return model.model_validate(doc)


class RunResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = 1
    run_id: str
    status: str
    answer: str | None
    reason: str | None
    steps: int
    model_calls: int
    tokens: int
    cost_usd: float
    effects: list[dict[str, Any]]
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """The task's metadata (absent in results written before it was added: empty)."""

    @classmethod
    def of(cls, state: RunState) -> RunResult:
        return cls(
            run_id=state.run_id,
            status=state.status.value,
            answer=state.answer,
            reason=state.reason,
            steps=state.step,
            model_calls=state.usage.model_calls,
            tokens=state.usage.tokens,
            cost_usd=state.usage.cost_usd,
            effects=[_effect_summary(e) for e in state.effects],
            metadata=dict(state.metadata),
        )


def _effect_summary(effect: EffectRecord) -> dict[str, Any]:
    summary: dict[str, Any] = {"key": effect.key, "tool": effect.tool, "status": effect.status}
    if effect.undone is not None:
        summary["undone"] = effect.undone
    return summary

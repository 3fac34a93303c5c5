"""The records an agent operator reads and writes, as versioned JSON documents.

* tasks topic (key ``run_id``, any partitioner): `TaskRequest` starts a run; a second one for
  the same run is ignored (a producer's retry must not start the run twice).
* approvals topic (key ``run_id``, any partitioner): a person's commands about runs, told
  apart by their ``command`` field (`parse_command`): `ApprovalDecision` (``decision``, the
  default, so decisions written before the field still parse), `ForkRun` (``fork``: start a
  new run from another's step) and `RollbackRun` (``rollback``: undo the effects after a
  step), and `EraseMemory` (``erase_memory``: an agent with memory forgets a key). The
  routing operator re-keys tasks and commands by the ``run_id`` of the value (a
  fork's is the NEW run's), so they meet in one partition of the agent.
* events sink (key ``run_id``): one JSON event per step, effect and status change, numbered
  per run by ``seq``.
* results sink, or a topic that downstream operators and agents read (key ``run_id``): one
  `RunResult` each time a run finishes (a run rolled back later finishes again: a second
  result, status ``rolled_back`` or ``failed``), carrying the task's ``metadata`` on, so a
  stage downstream knows the customer or tenant without a lookup.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.runs.state import (
    Budget,
    EffectRecord,
    ForkOrigin,
    RecordedCall,
    RunState,
    RunUsage,
)

__all__ = [
    "MAX_COMMAND_BYTES",
    "MAX_FORK_MESSAGES",
    "ApprovalDecision",
    "EraseMemory",
    "ForkRun",
    "RollbackRun",
    "RunCommand",
    "RunResult",
    "TaskRequest",
    "parse_command",
]

MAX_COMMAND_BYTES = 4 * 1024 * 1024
"""The largest approvals-topic record `parse_command` reads (a fork carries a conversation)."""
MAX_FORK_MESSAGES = 2000
"""The most messages a fork's seed may carry."""
_RUN_ID = r"^[A-Za-z0-9._:-]+$"
_BLOB_ID = r"^[0-9a-f]{32}$"


class TaskRequest(BaseModel):
    """Start run ``run_id`` towards ``goal``.

    ``metadata`` (added in schema_version 1 with a default, so tasks without it still parse)
    is what the run carries for its tools, e.g. ``{"customer_id": "c-9", "tenant": "eu"}``:
    kept in `RunState` and shown to every tool call as ``ctx.metadata``; the model does not see
    it. Other top-level fields are refused, so a misspelt field is an error, not ignored.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    run_id: str = Field(min_length=1, max_length=200, pattern=_RUN_ID)
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

    command: Literal["decision"] = Field(default="decision", exclude=True)
    """Never written (a decision is the default command), so readers that predate
    `parse_command` still read new decisions."""
    schema_version: Literal[1] = 1
    run_id: str
    approved: bool
    call_id: str = ""
    """The call decided on; empty means whatever call the run is waiting on."""
    by: str = "unknown"
    reason: str | None = None


class ForkRun(BaseModel):
    """Start run ``run_id`` from ``parent_run_id`` after its step ``from_step``
    (`agents.fork.patch`).

    The seed is what the writer replayed from the parent's events and patched: ``messages``
    (the conversation up to the step boundary), ``usage`` so far (the budget carries over),
    ``budget`` (capped again by the agent's ceiling when the run starts), ``goal`` and
    ``metadata``. The agent validates it like any input (`agents.fork.patch.check_seed`); a fork
    whose ``run_id`` exists is ignored like a duplicate task.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: Literal["fork"] = "fork"
    schema_version: Literal[1] = 1
    run_id: str = Field(min_length=1, max_length=200, pattern=_RUN_ID)
    """The NEW run's id."""
    parent_run_id: str = Field(min_length=1, max_length=200)
    from_step: int = Field(ge=0)
    goal: str = Field(min_length=1)
    messages: tuple[ChatMessage, ...] = Field(min_length=2, max_length=MAX_FORK_MESSAGES)
    usage: RunUsage = Field(default_factory=RunUsage)
    budget: Budget = Field(default_factory=Budget)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    recorded_only: bool = False
    recorded: tuple[RecordedCall, ...] = Field(default=(), max_length=MAX_FORK_MESSAGES)
    """Recorded-only forks: the parent's tool calls after ``from_step`` (`RecordedCall`)."""
    by: str = Field(default="unknown", max_length=200)
    note: str | None = Field(default=None, max_length=2000)
    """What the fork changed (the patch, described), shown in its history."""
    blobs: tuple[Annotated[str, Field(pattern=_BLOB_ID)], ...] = Field(
        default=(), max_length=MAX_FORK_MESSAGES
    )
    """Ids of the parent's handles (`RunState.blobs`) the seed's messages hold: the fork
    resolves these (`agents.fork.patch.check_blobs`). Absent in older commands: none."""
    offered_tools: dict[str, Annotated[str, Field(max_length=64)]] = Field(
        default_factory=dict, max_length=MAX_FORK_MESSAGES
    )
    """The tools the parent was offered (`RunState.offered_tools`): the fork refuses a call of
    one that is gone. Absent in older commands: none."""
    memory_as_of: float | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    """When the parent settled after ``from_step``: an agent with memory gives the fork only
    the entries of its key written up to then, and its own (``docs/memory.md``). Not written
    when None (older readers refuse unknown fields); absent: the key's memory as it is."""

    def origin(self) -> ForkOrigin:
        return ForkOrigin(
            run_id=self.parent_run_id,
            step=self.from_step,
            recorded_only=self.recorded_only,
            recorded=self.recorded,
        )


class RollbackRun(BaseModel):
    """Undo the effects of run ``run_id``'s steps after ``to_step`` (`agents.rollback.machine`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    schema_version: Literal[1] = 1
    command: Literal["rollback"] = "rollback"
    run_id: str = Field(min_length=1, max_length=200, pattern=_RUN_ID)
    to_step: int = Field(ge=0, le=1_000_000)
    by: str = Field(default="unknown", min_length=1, max_length=200)
    reason: str | None = Field(default=None, max_length=2000)


class EraseMemory(BaseModel):
    """Erase every memory entry of ``key`` (an agent with `Memory`: ``docs/memory.md``).

    Not about a run: `parse_command` returns it beside the run commands, and the router places
    it in the partition of the key's memory. ``run_id`` is empty."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    schema_version: Literal[1] = 1
    command: Literal["erase_memory"] = "erase_memory"
    key: str = Field(min_length=1, max_length=200)
    by: str = Field(default="unknown", min_length=1, max_length=200)
    reason: str | None = Field(default=None, max_length=2000)

    @property
    def run_id(self) -> str:
        return ""


RunCommand = ApprovalDecision | ForkRun | RollbackRun | EraseMemory
"""What the approvals topic carries, in the order of `_COMMANDS`."""

_COMMANDS: dict[
    str, type[ApprovalDecision] | type[ForkRun] | type[RollbackRun] | type[EraseMemory]
] = {
    "decision": ApprovalDecision,
    "fork": ForkRun,
    "rollback": RollbackRun,
    "erase_memory": EraseMemory,
}


def parse_command(data: bytes | None) -> RunCommand:
    """The command of an approvals-topic record; raise ``ValueError`` (a pydantic
    ``ValidationError`` is one) saying what is wrong with a record that is not one.

    A record without ``command`` is a decision (the only command before forks)."""
    if data is None or len(data) > MAX_COMMAND_BYTES:
        size = "no value" if data is None else f"{len(data)} bytes"
        raise ValueError(f"approvals record: {size}; expected JSON of at most {MAX_COMMAND_BYTES}")
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"approvals record is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"approvals record is a JSON {type(doc).__name__}, not an object")
    command = doc.get("command", "decision")
    model = _COMMANDS.get(command) if isinstance(command, str) else None
    if model is None:
        raise ValueError(f"approvals record: unknown command {command!r}; known: {list(_COMMANDS)}")
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

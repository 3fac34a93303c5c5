"""`RunState`: everything an agent run is, as one versioned pydantic document (no pickle).

A run's state is written only at safe points (after a model call returned, before a tool with
an effect runs, after a tool's result is recorded, on a decision about an approval), so a
snapshot never holds half a step. Stored as JSON under ``run/<run_id>`` in the keyed state of
the run's tasks partition; each safe point also appends the control state to the run's history.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from sluicegate.agents.models.contract import ChatMessage, ToolCall, Usage
from sluicegate.agents.runs.versions import upgrade_document

__all__ = [
    "CURRENT_PREFIX",
    "DEFAULT_MAX_STEPS",
    "SCHEMA_VERSION",
    "Budget",
    "EffectRecord",
    "ForkOrigin",
    "PendingApproval",
    "RecordedCall",
    "Rollback",
    "RunState",
    "RunStatus",
    "RunUsage",
    "run_key",
]

SCHEMA_VERSION: Literal[3] = 3
"""History and upgraders in `agents.runs.versions`."""

CURRENT_PREFIX = b'{"schema_version":%d,' % SCHEMA_VERSION
"""How `RunState.encode` starts a document: ``schema_version`` is its first field."""


class RunStatus(StrEnum):
    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ROLLING_BACK = "rolling_back"
    """Undoing the effects after a step (`agents.rollback.machine`); a person's wait during a
    rollback is ``waiting_approval`` with a pending approval of kind ``compensation``."""
    ROLLED_BACK = "rolled_back"

    @property
    def finished(self) -> bool:
        return self in _FINISHED


_FINISHED = frozenset(
    {RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.ROLLED_BACK}
)


DEFAULT_MAX_STEPS = 20
"""The step limit of a `Budget` that does not set one (an `Agent`'s default budget)."""


class Budget(BaseModel):
    """Limits enforced before each model call; None means no limit.

    The default is ``max_steps=20`` (`DEFAULT_MAX_STEPS`), no cost and no token limit. A step is
    one model call; a run that reaches a limit fails with reason ``budget_exceeded: ...``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)

    def overridden_by(self, requested: Budget) -> Budget:
        """This budget with the limits ``requested`` sets (``model_fields_set``: the fields
        its JSON named) in place of its own; the others stay as they are here."""
        return self.model_copy(
            update={f: getattr(requested, f) for f in requested.model_fields_set}
        )

    def capped_by(self, ceiling: Budget) -> Budget:
        """Each limit no higher than ``ceiling``'s (no limit counts as the highest)."""
        return Budget(
            max_steps=min(self.max_steps, ceiling.max_steps),
            max_cost_usd=_lowest(self.max_cost_usd, ceiling.max_cost_usd),
            max_tokens=_lowest(self.max_tokens, ceiling.max_tokens),
        )


_Limit = TypeVar("_Limit", int, float)


def _lowest(limit: _Limit | None, ceiling: _Limit | None) -> _Limit | None:
    if limit is None:
        return ceiling
    return limit if ceiling is None else min(limit, ceiling)


class RunUsage(BaseModel):
    model_config = ConfigDict(frozen=True)

    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, usage: Usage) -> RunUsage:
        return RunUsage(
            model_calls=self.model_calls + 1,
            prompt_tokens=self.prompt_tokens + usage.prompt_tokens,
            completion_tokens=self.completion_tokens + usage.completion_tokens,
            cost_usd=self.cost_usd + usage.cost_usd,
        )


class EffectRecord(BaseModel):
    """One tool call with an effect, as the run knows it (the journal holds the truth)."""

    model_config = ConfigDict(frozen=True)

    key: str
    tool: str
    call_id: str
    step: int
    arguments: dict[str, Any]
    kind: Literal["idempotent_write", "reversible", "irreversible"]
    """The tool's `ToolKind` (never ``read_only``: a read is no effect)."""
    compensate: str | None = None
    status: Literal["issued", "done", "failed", "unknown"] = "issued"
    result: Any = None
    undone: Literal["compensated", "by_hand"] | None = None
    """Set by a rollback (`agents.rollback.machine`): its compensating tool ran, or a person said
    they handled it by hand. Absent in states written before rollback existed: None."""


class PendingApproval(BaseModel):
    """A proposed irreversible call waiting for a person; or, of kind ``compensation``, an
    effect a rollback cannot undo by itself (approving means "handled by hand")."""

    model_config = ConfigDict(frozen=True)

    call: ToolCall
    key: str
    """The idempotency key the call will run under once approved (for a compensation: the
    key of the effect to undo)."""
    tool: str
    arguments: dict[str, Any]
    proposed_at: float
    kind: Literal["call", "compensation"] = "call"
    """Absent in states written before rollback existed: ``call``."""
    problem: str | None = None
    """For a compensation: why the rollback cannot undo the effect by itself."""


class Rollback(BaseModel):
    """The rollback of a run to ``to_step`` (the latest one; see `agents.rollback.machine`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: int = Field(ge=1)
    """1 for the run's first rollback, 2 for its second, ...: part of the journal keys."""
    to_step: int = Field(ge=0)
    by: str
    reason: str | None = None
    requested_at: float
    was: RunStatus
    """The run's status when the rollback began."""
    queue: tuple[str, ...] = ()
    """Keys of the effects still to undo, the next one first (the latest effect first)."""
    settled: tuple[str, ...] = ()
    """Keys of effects left ``issued``/``unknown`` whose outcome the journal was asked for."""
    failure: str | None = None
    """Why the compensation of the queue's head failed for good (the next action blocks)."""
    notified: bool = True
    """Whether the alert webhook was called for the current wait (no webhook: True)."""


class RecordedCall(BaseModel):
    """A tool call a parent run recorded, for a recorded-only fork: what the call answered."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: int = Field(ge=1)
    tool: str = Field(min_length=1, max_length=200)
    arguments: dict[str, JsonValue]
    result: JsonValue = None
    error: str | None = None


class ForkOrigin(BaseModel):
    """Where a forked run comes from: run ``run_id`` after its step ``step``
    (`agents.fork.patch`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    step: int = Field(ge=0)
    recorded_only: bool = False
    """Never execute a tool with an effect: a call the parent recorded (same step, tool and
    arguments) answers what it answered then, any other answers a tool error."""
    recorded: tuple[RecordedCall, ...] = ()
    """The parent's tool calls after ``step`` (recorded-only forks only)."""

    def recorded_outcome(
        self, step: int, tool: str, arguments: dict[str, Any]
    ) -> tuple[Any, str | None]:
        """What a recorded-only fork's call answers: (result, error)."""
        for call in self.recorded:
            if (call.step, call.tool, call.arguments) == (step, tool, arguments):
                return call.result, call.error
        return None, "not executed: recorded-only fork"


class RunState(BaseModel):
    """One agent run. ``schema_version`` says which version a stored document is; older ones
    are upgraded on restore and on `decode` (`agents.runs.versions`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[3] = SCHEMA_VERSION
    run_id: str
    goal: str
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """The task's metadata, shown to tools as ``ctx.metadata``. Added with a default within
    schema_version 1 (states written before it meant ``{}``); always stored from version 2."""
    status: RunStatus = RunStatus.RUNNING
    reason: str | None = None
    answer: str | None = None
    messages: tuple[ChatMessage, ...] = ()
    plan: tuple[str, ...] = ()
    scratchpad: dict[str, Any] = Field(default_factory=dict)
    step: int = 0
    """Model calls made so far; step ``n``'s tool calls belong to the ``n``-th model reply."""
    pending_calls: tuple[ToolCall, ...] = ()
    """Tool calls of the last model reply not yet settled, in order."""
    call_index: int = 0
    """Index in the last model reply of ``pending_calls[0]``."""
    approved_calls: tuple[str, ...] = ()
    """Effect keys of irreversible calls a person approved."""
    usage: RunUsage = Field(default_factory=RunUsage)
    budget: Budget = Field(default_factory=Budget)
    effects: tuple[EffectRecord, ...] = ()
    pending_approval: PendingApproval | None = None
    rollback: Rollback | None = None
    """The run's latest rollback; None if it was never rolled back (and in states written
    before rollback existed)."""
    blobs: tuple[str, ...] = ()
    """Ids of the handles this run stored (`agents.blobs`); only these are resolved. A handle
    that could not be read any more leaves it (event ``blob_unavailable``)."""
    events: int = 0
    """Events emitted so far: the next event's sequence number."""
    forked_from: ForkOrigin | None = None
    """The run and step this run was forked from (None: started by a task). Added with a
    default within schema_version 2."""
    offered_tools: dict[str, str] = Field(default_factory=dict)
    """Every tool the model was offered in this run, by name, with the digest of the schema it
    was last offered with (`agents.tools.offered_digests`). A tool the model calls that was
    offered and is no longer among the agent's tools (an MCP server lost it) fails the run with
    ``tool_gone: <name>``, in a replay or a fork too, instead of the model being told it does
    not exist. Added in schema_version 3 (``{}`` before: not recorded)."""
    created_at: float
    updated_at: float

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, data: bytes) -> RunState:
        """Read a stored document of any version this code knows (older ones upgraded).

        A document of the current version as `encode` writes it is parsed and validated in one
        pass: the run loop decodes its run on every wake-up."""
        if data.startswith(CURRENT_PREFIX):
            return cls.model_validate_json(data)
        doc = json.loads(data)
        if isinstance(doc, dict) and doc.get("schema_version", 1) != SCHEMA_VERSION:
            doc = upgrade_document(doc)
        return cls.model_validate(doc)


def run_key(run_id: str) -> bytes:
    """The state key of a run."""
    return b"run/" + run_id.encode()

"""What an agent is: `Agent` (model, tools, instructions, budgets), the `AgentTopics` it uses
and the `TaskFeed` topics its runs start from.

Values only: `agents.agent.add_agent` puts an agent into a pipeline, and
`agents.operator.AgentOperator` runs it; both import this module, neither is imported here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from sluicegate.agents.blobs.policy import BlobPolicy
from sluicegate.agents.memory.config import Memory
from sluicegate.agents.memory.tool import FORGET, REMEMBER
from sluicegate.agents.messages import TaskRequest
from sluicegate.agents.models.contract import ModelClient
from sluicegate.agents.runs.state import Budget
from sluicegate.agents.tools import Tool, ToolDeclarationError, ToolResources, ToolSource
from sluicegate.operators.contract import Record

__all__ = ["JOURNAL_SUFFIX", "Agent", "AgentTopics", "TaskFeed", "TaskOf", "task_from_json"]

JOURNAL_SUFFIX = "journal"


@dataclass(frozen=True, slots=True)
class Agent:
    """An agent: a model, tools, instructions and default budgets.

    ``model`` is a `ModelClient` or a zero-argument factory of one (called once per subtask,
    for clients that hold connections).
    """

    name: str
    model: ModelClient | Callable[[], ModelClient]
    tools: Sequence[Tool | ToolSource]
    """Tools declared with `@tool`, and sources of tools listed when the agent runs (an MCP
    server: `agents.mcp.mcp_server`)."""
    instructions: str
    budget: Budget = field(default_factory=Budget)
    """A run's budget when its task sets none: by default 20 steps (model calls), no cost and
    no token limit (`Budget`)."""
    budget_ceiling: Budget | None = None
    """The most a task may ask for in its ``budget``; None: ``budget`` (a task may only
    tighten it). See `budget_for`."""
    approval_timeout_s: float | None = None
    """Give up waiting for a person after this long; None waits forever."""
    on_approval_timeout: Literal["reject", "fail"] = "reject"
    """``reject``: tell the model the call was not approved; ``fail``: end the run."""
    model_name: str = "model"
    """The name effects of model calls carry in the journal and events."""
    resources: ToolResources | None = None
    """What the tools hold open; acquired when a subtask opens, released when it closes."""
    blobs: BlobPolicy | None = None
    """Store tool results and model messages above a size threshold by reference (a handle
    in the run, the payload in the blob store: ``docs/blobs.md``); None: never."""
    alert_webhook: str | None = None
    """A URL POSTed once (JSON, ``Idempotency-Key`` header) when a rollback waits for a
    person about an effect it cannot undo (`agents.alerts`); None: the alert is the event
    ``compensation_needed`` and the metrics only."""
    memory: Memory | None = None
    """Memory per key across runs (``docs/memory.md``): the built-in ``remember`` tool, the
    key's recent entries given to every model call, runs of one key placed in one partition;
    None: a run knows only itself."""

    def __post_init__(self) -> None:
        names = [t.name for t in self.declared_tools]
        for builtin in (REMEMBER, FORGET):
            if self.memory is not None and builtin in names:
                raise ToolDeclarationError(builtin, "an agent with memory has this tool built in")
        if len(set(names)) != len(names):
            raise ToolDeclarationError(self.name, f"duplicate tool names in {names}")
        for t in self.declared_tools:
            if t.compensate and t.compensate not in names:
                raise ToolDeclarationError(
                    t.name, f"its compensating tool {t.compensate!r} is not among the tools"
                )

    @property
    def declared_tools(self) -> list[Tool]:
        """The tools declared in Python (`@tool`); compensations are among them."""
        return [t for t in self.tools if isinstance(t, Tool)]

    @property
    def tool_sources(self) -> list[ToolSource]:
        """The sources of the tools listed when the agent runs."""
        return [t for t in self.tools if not isinstance(t, Tool)]

    def budget_for(self, requested: Budget | None) -> Budget:
        """The budget of a run whose task asks for ``requested``.

        1. Start from ``budget``; the limits ``requested`` sets replace its own (a task that
           sets only ``max_cost_usd`` keeps the agent's step limit).
        2. Cap each limit at ``budget_ceiling`` (or ``budget``, when no ceiling is set): a task
           asking for more, or for no limit, gets the ceiling's.
        """
        ceiling = self.budget if self.budget_ceiling is None else self.budget_ceiling
        wanted = self.budget if requested is None else self.budget.overridden_by(requested)
        return wanted.capped_by(ceiling)

    def make_model(self) -> ModelClient:
        model = self.model
        if callable(model) and not hasattr(model, "complete"):
            return model()
        return model


@dataclass(frozen=True, slots=True)
class AgentTopics:
    """The topics the outside world sees: tasks and approvals it writes (with any
    partitioner), events and results it reads."""

    tasks: str
    approvals: str
    events: str
    results: str

    @classmethod
    def named(cls, agent: str, **names: str) -> AgentTopics:
        """``<agent>.tasks``, ``.approvals``, ``.events`` and ``.results``, except those given
        in ``names`` (``AgentTopics.named("triage", results="triage.results")``)."""
        return cls(
            **{
                "tasks": f"{agent}.tasks",
                "approvals": f"{agent}.approvals",
                "events": f"{agent}.events",
                "results": f"{agent}.results",
                **names,
            }
        )


TaskOf = Callable[[Record], TaskRequest | None]
"""Maps a record of a feed topic to the task it asks for; None: the record is not for the
agent (skipped). Raising dead-letters the record with the error as its reason."""


def task_from_json(record: Record) -> TaskRequest:
    """The default mapping: the record's value is a `TaskRequest` document."""
    return TaskRequest.model_validate_json(record.value)


@dataclass(frozen=True, slots=True)
class TaskFeed:
    """A topic whose records start an agent's runs, through ``task_of``.

    ``topic`` is any topic of the pipeline: a source the outside world writes, or a topic an
    operator or another agent writes (an agent upstream, whose `RunResult` records then start
    the runs of this one). `add_agent` declares it as a source when the pipeline does not
    declare it yet. ``task_of`` runs in the agent's routing stage; give each run an id derived
    from the record (``f"refund-{result.run_id}"``), so that a record read twice (a replay
    after a restore, a producer's retry) names the same run, whose second task is ignored.
    """

    topic: str
    task_of: TaskOf = task_from_json

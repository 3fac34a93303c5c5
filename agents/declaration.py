"""What an agent is: `Agent` (model, tools, instructions, budgets) and the `AgentTopics` it uses.

Values only: `agents.agent.add_agent` puts an agent into a pipeline, and
`agents.operator.AgentOperator` runs it; both import this module, neither is imported here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agents.models.contract import ModelClient
from agents.state import Budget
from agents.tools import Tool, ToolDeclarationError, ToolResources

__all__ = ["JOURNAL_SUFFIX", "Agent", "AgentTopics"]

JOURNAL_SUFFIX = "journal"


@dataclass(frozen=True, slots=True)
class Agent:
    """An agent: a model, tools, instructions and default budgets.

    ``model`` is a `ModelClient` or a zero-argument factory of one (called once per subtask,
    for clients that hold connections).
    """

    name: str
    model: ModelClient | Callable[[], ModelClient]
    tools: Sequence[Tool]
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

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ToolDeclarationError(self.name, f"duplicate tool names in {names}")
        for t in self.tools:
            if t.compensate and t.compensate not in names:
                raise ToolDeclarationError(
                    t.name, f"its compensating tool {t.compensate!r} is not among the tools"
                )

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

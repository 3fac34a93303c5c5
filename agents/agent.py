"""`Agent`, and `add_agent`, which puts one into a pipeline as an operator.

::

    desk = Agent("refund-desk", model=ScriptedModel(policy), tools=[lookup_order, issue_refund],
                 instructions="You settle refund requests.", budget=Budget(max_steps=12))
    p = Pipeline("support")
    topics = add_agent(p, desk, partitions=4, parallelism=2)
    graph = p.build()

The agent reads ``<name>.tasks`` and ``<name>.approvals`` (sources, co-partitioned by run_id),
writes ``<name>.events`` and ``<name>.results`` (exactly-once sinks), and keeps its effect
journal in the compacted topic ``sluicegate.<pipeline>.<name>.journal``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Literal

from agents.models.contract import ModelClient
from agents.state import Budget
from agents.tools import Tool, ToolDeclarationError, ToolResources
from operators.contract import Operator
from operators.graph import JobGraph
from operators.pipeline import OwnedTopic, Pipeline

__all__ = ["JOURNAL_SUFFIX", "Agent", "AgentTopics", "add_agent", "agents_in"]

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

    def make_model(self) -> ModelClient:
        model = self.model
        if callable(model) and not hasattr(model, "complete"):
            return model()
        return model


@dataclass(frozen=True, slots=True)
class AgentTopics:
    tasks: str
    approvals: str
    events: str
    results: str


def add_agent(
    pipeline: Pipeline,
    agent: Agent,
    *,
    partitions: int,
    parallelism: int = 1,
    topics: AgentTopics | None = None,
) -> AgentTopics:
    """Declare the agent's topics and operator (uid = the agent's name) in ``pipeline``."""
    from agents.operator import AgentOperator

    names = topics or AgentTopics(
        tasks=f"{agent.name}.tasks",
        approvals=f"{agent.name}.approvals",
        events=f"{agent.name}.events",
        results=f"{agent.name}.results",
    )
    pipeline.source(names.tasks, partitions=partitions)
    pipeline.source(names.approvals, partitions=partitions)
    pipeline.sink(names.events, partitions=partitions)
    pipeline.sink(names.results, partitions=partitions)

    def factory() -> Operator:
        return AgentOperator(agent, names, pipeline=pipeline.name)

    pipeline.operator(
        agent.name,
        factory=factory,
        inputs=[names.tasks, names.approvals],
        outputs=[names.events, names.results],
        parallelism=parallelism,
        owned_topics=[OwnedTopic(JOURNAL_SUFFIX, compact=True)],
        labels={"kind": "agent", **{f"topic.{k}": v for k, v in asdict(names).items()}},
    )
    return names


def agents_in(graph: JobGraph) -> dict[str, AgentTopics]:
    """The agents of ``graph`` (declared with `add_agent`) and their topics, by name."""
    found: dict[str, AgentTopics] = {}
    for spec in graph.operators.values():
        if spec.label("kind") == "agent":
            topics = {f.name: spec.label(f"topic.{f.name}") or "" for f in fields(AgentTopics)}
            found[spec.uid] = AgentTopics(**topics)
    return found

"""`Agent`, and `add_agent`, which puts one into a pipeline as an operator.

::

    desk = Agent("refund-desk", model=ScriptedModel(policy), tools=[lookup_order, issue_refund],
                 instructions="You settle refund requests.", budget=Budget(max_steps=12))
    p = Pipeline("support")
    topics = add_agent(p, desk, partitions=4, parallelism=2)
    graph = p.build()

The outside world writes ``<name>.tasks`` and ``<name>.approvals`` (sources) with any client
and any partitioner; a routing operator (uid ``<name>.router``, `agents.routing`) re-keys both
by run_id into ``sluicegate.<pipeline>.<name>.tasks-by-run`` and ``.approvals-by-run``, which
the agent reads, so a run and its decisions always meet in one partition. The agent writes
``<name>.events`` and ``<name>.results`` (exactly-once sinks) and keeps its effect journal in
the compacted topic ``sluicegate.<pipeline>.<name>.journal``.
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

__all__ = ["JOURNAL_SUFFIX", "ROUTER_SUFFIX", "Agent", "AgentTopics", "add_agent", "agents_in"]

JOURNAL_SUFFIX = "journal"
ROUTER_SUFFIX = ".router"


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


def add_agent(
    pipeline: Pipeline,
    agent: Agent,
    *,
    partitions: int,
    parallelism: int = 1,
    router_parallelism: int = 1,
    topics: AgentTopics | None = None,
) -> AgentTopics:
    """Declare the agent's topics, its operator (uid = the agent's name) and its routing
    operator (uid ``<name>.router``, ``router_parallelism`` subtasks) in ``pipeline``.

    The router is one more subtask per ``router_parallelism`` for workers to host: size slots
    for ``parallelism + router_parallelism``. It only parses and re-keys records, so one
    subtask keeps up with far more tasks and decisions than agent runs can take."""
    from agents.operator import AgentOperator
    from agents.routing import RunRouter, routed_topic

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
    routed = AgentTopics(
        tasks=pipeline.topic(
            routed_topic(pipeline.name, agent.name, "tasks"), partitions=partitions
        ),
        approvals=pipeline.topic(
            routed_topic(pipeline.name, agent.name, "approvals"), partitions=partitions
        ),
        events=names.events,
        results=names.results,
    )

    def factory() -> Operator:
        return AgentOperator(agent, routed, pipeline=pipeline.name)

    pipeline.operator(
        agent.name,
        factory=factory,
        inputs=[routed.tasks, routed.approvals],
        outputs=[names.events, names.results],
        parallelism=parallelism,
        owned_topics=[OwnedTopic(JOURNAL_SUFFIX, compact=True)],
        labels={"kind": "agent", **{f"topic.{k}": v for k, v in asdict(names).items()}},
    )
    # Declared after the agent: subtasks are placed in declaration order, so each worker
    # gets agent subtasks first.
    pipeline.operator(
        agent.name + ROUTER_SUFFIX,
        RunRouter(names.tasks, names.approvals, routed.tasks, routed.approvals),
        inputs=[names.tasks, names.approvals],
        outputs=[routed.tasks, routed.approvals],
        parallelism=router_parallelism,
        labels={"kind": "agent-router", "agent": agent.name},
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

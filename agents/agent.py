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

from dataclasses import asdict, fields

from agents.declaration import JOURNAL_SUFFIX, Agent, AgentTopics
from agents.state_versions import run_state_versions
from operators.contract import Operator
from operators.graph import JobGraph
from operators.pipeline import Pipeline
from operators.specs import OwnedTopic

__all__ = ["JOURNAL_SUFFIX", "ROUTER_SUFFIX", "Agent", "AgentTopics", "add_agent", "agents_in"]

ROUTER_SUFFIX = ".router"


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
        state_versions=run_state_versions(),  # RunState upgraders, applied on restore
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

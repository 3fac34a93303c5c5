"""`Agent`, and `add_agent`, which puts one into a pipeline as an operator.

::

    desk = Agent("refund-desk", model=ScriptedModel(policy), tools=[lookup_order, issue_refund],
                 instructions="You settle refund requests.", budget=Budget(max_steps=12))
    p = Pipeline("support")
    topics = add_agent(p, desk, partitions=4, parallelism=2)
    graph = p.build()

By default the outside world writes ``<name>.tasks`` and ``<name>.approvals`` (sources) with
any client and any partitioner; a routing operator (uid ``<name>.router``, `agents.routing`)
re-keys both by run_id into ``sluicegate.<pipeline>.<name>.tasks-by-run`` and
``.approvals-by-run``, which the agent reads, so a run and its decisions always meet in one
partition. The agent writes ``<name>.events`` and ``<name>.results`` (exactly-once sinks) and
keeps its effect journal in the compacted topic ``sluicegate.<pipeline>.<name>.journal``.

Anywhere in a pipeline: ``feeds`` start runs from any topics (an operator's output, another
agent's results), each record mapped to a task by its `TaskFeed`; and a results (or events)
topic the pipeline already declares with `Pipeline.topic` is written as a topic between
operators, which downstream operators and agents read. One job, one consistent snapshot::

    p.source("tickets", partitions=4)
    p.topic("classified", partitions=4)
    p.topic("triage.results", partitions=4)
    p.operator("classify", classify, inputs="tickets", outputs="classified")
    add_agent(p, triage, partitions=4, feeds=[TaskFeed("classified", triage_task)],
              topics=AgentTopics.named("triage", results="triage.results"))
    add_agent(p, refunds, partitions=4, feeds=[TaskFeed("triage.results", refund_task)])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, fields, replace

from sluicegate.agents.declaration import JOURNAL_SUFFIX, Agent, AgentTopics, TaskFeed
from sluicegate.agents.runs.versions import run_state_versions
from sluicegate.operators.contract import Operator
from sluicegate.operators.exceptions import PipelineError
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.specs import OwnedTopic, TopicKind

__all__ = ["ROUTER_SUFFIX", "add_agent", "agents_in"]

ROUTER_SUFFIX = ".router"


def add_agent(
    pipeline: Pipeline,
    agent: Agent,
    *,
    partitions: int,
    parallelism: int = 1,
    router_parallelism: int = 1,
    topics: AgentTopics | None = None,
    feeds: Sequence[TaskFeed] | None = None,
) -> AgentTopics:
    """Declare the agent's topics, its operator (uid = the agent's name) and its routing
    operator (uid ``<name>.router``, ``router_parallelism`` subtasks) in ``pipeline``; returns
    the agent's topics (with ``feeds``, ``tasks`` is the first feed's topic).

    * ``feeds``: where runs start (default: the ``tasks`` source, `TaskRequest` documents).
      A feed topic not declared yet is declared as a source; every feed topic has
      ``partitions`` partitions (the router reads them together with the approvals).
    * ``topics``: names (default ``AgentTopics.named(agent.name)``). ``approvals`` is always a
      source. ``events`` and ``results`` are declared as exactly-once sinks unless the
      pipeline declares them already: a topic declared with `Pipeline.topic` is written for
      downstream operators and agents to read (each result is a `RunResult` document keyed by
      run_id).

    The router is one more subtask per ``router_parallelism`` for workers to host: size slots
    for ``parallelism + router_parallelism``. It only parses and re-keys records, so one
    subtask keeps up with far more tasks and decisions than agent runs can take."""
    from sluicegate.agents.operator import AgentOperator
    from sluicegate.agents.routing import RunRouter, routed_topic

    names = topics or AgentTopics.named(agent.name)
    wanted = tuple(feeds) if feeds is not None else (TaskFeed(names.tasks),)
    if not wanted:
        raise PipelineError(agent.name, "an agent needs at least one task feed")
    names = replace(names, tasks=wanted[0].topic)
    for feed in wanted:
        _check_feed(pipeline, agent.name, feed.topic, partitions)
    for feed in wanted:
        if feed.topic not in pipeline.topics:
            pipeline.source(feed.topic, partitions=partitions)
    if names.approvals in pipeline.topics:
        raise PipelineError(names.approvals, f"the approvals of {agent.name}: declared already")
    pipeline.source(names.approvals, partitions=partitions)
    for written in (names.events, names.results):
        if written not in pipeline.topics:
            pipeline.sink(written, partitions=partitions)
        elif pipeline.topics[written].kind is TopicKind.SOURCE:
            raise PipelineError(written, f"{agent.name} writes it: declare it with topic()")
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
        RunRouter(
            {feed.topic: feed.task_of for feed in wanted},
            names.approvals,
            routed.tasks,
            routed.approvals,
            memory=agent.memory,
            partitions=partitions,
        ),
        inputs=[*dict.fromkeys(feed.topic for feed in wanted), names.approvals],
        outputs=[routed.tasks, routed.approvals],
        parallelism=router_parallelism,
        labels={"kind": "agent-router", "agent": agent.name},
    )
    return names


def _check_feed(pipeline: Pipeline, agent: str, topic: str, partitions: int) -> None:
    """Raise unless ``agent`` can read ``topic`` as a feed (a new one becomes a source)."""
    spec = pipeline.topics.get(topic)
    if spec is None:
        return
    if spec.kind is TopicKind.SINK:
        raise PipelineError(topic, f"{agent} reads it: declare it with topic(), not sink()")
    if spec.partitions != partitions:
        raise PipelineError(
            topic,
            f"a feed of {agent} has {spec.partitions} partitions, the agent {partitions}: "
            "declare the topic with the agent's partition count",
        )


def agents_in(graph: JobGraph) -> dict[str, AgentTopics]:
    """The agents of ``graph`` (declared with `add_agent`) and their topics, by name."""
    found: dict[str, AgentTopics] = {}
    for spec in graph.operators.values():
        if spec.label("kind") == "agent":
            topics = {f.name: spec.label(f"topic.{f.name}") or "" for f in fields(AgentTopics)}
            found[spec.uid] = AgentTopics(**topics)
    return found

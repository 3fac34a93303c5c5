"""A `FaustPlan` as a sluicegate `Pipeline`.

* A topic an agent reads and no agent writes is a **source** (the outside world writes it);
  one agents write and no agent reads is an exactly-once **sink**; one both read and write is a
  **topic** between operators (its records carry sluicegate's headers; the outside world must
  not write it).
* Each agent is one operator, uid the agent's name (lower case); one that groups is two: the
  re-keying stage ``<uid>.group-by`` and the body ``<uid>``, joined by the repartition topic
  ``sluicegate.<pipeline>.<faust's repartition topic name>``.
* Tables are the keyed state of the operator whose records write them; so is the buffer of an
  agent that iterates ``stream.take(...)`` (operator `operators.TakeOperator`).
* Each timer and crontab is an operator (`timers.TimerOperator`, uid the timer's name) of
  parallelism 1 over the job's one-partition clock source ``sluicegate.<pipeline>.clock``,
  which nothing writes: it keeps the timer's last tick and is woken at the next.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sluicegate.faust_adapter.operators import AgentOperator, GroupByOperator, TakeOperator
from sluicegate.faust_adapter.plan import AgentPlan, FaustPlan, TimerPlan
from sluicegate.faust_adapter.timers import TimerOperator
from sluicegate.operators.contract import Operator
from sluicegate.operators.pipeline import Pipeline

__all__ = ["build_pipeline"]


def build_pipeline(
    plan: FaustPlan, *, parallelism: int = 1, clock: Callable[[], float] = time.time
) -> Pipeline:
    """The job of ``plan`` (refused first if it uses what sluicegate does not run); every
    operator at ``parallelism``, capped by its input's partitions; ``clock`` is the wall clock
    that ``stream.take``'s ``within`` and the timers' ticks are measured by."""
    plan.check()
    reads = {a.body_input.name for a in plan.agents} | {a.source.name for a in plan.agents}
    writes = {t for a in plan.agents for t in (*a.sends, *a.sinks)}
    writes |= {a.repartition.topic.name for a in plan.agents if a.repartition is not None}
    writes |= {t for timer in plan.timers for t in timer.sends}
    p = Pipeline(plan.pipeline)
    for topic in plan.topics:
        if topic.name in reads and topic.name in writes:
            p.topic(topic.name, partitions=topic.partitions)
        elif topic.name in reads:
            p.source(topic.name, partitions=topic.partitions)
        else:
            p.sink(topic.name, partitions=topic.partitions)
    for agent in plan.agents:
        _add_agent(p, plan, agent, parallelism, clock)
    if plan.timers:
        p.source(plan.clock_topic, partitions=1)
    for timer in plan.timers:
        _add_timer(p, plan, timer, clock)
    return p


def _add_timer(p: Pipeline, plan: FaustPlan, timer: TimerPlan, clock: Callable[[], float]) -> None:
    def make() -> Operator:
        return TimerOperator(plan.app, timer, clock=clock)

    p.operator(timer.uid, factory=make, inputs=plan.clock_topic, outputs=timer.sends)


def _add_agent(
    p: Pipeline, plan: FaustPlan, agent: AgentPlan, parallelism: int, clock: Callable[[], float]
) -> None:
    app = plan.app
    repartition = agent.repartition
    if repartition is not None:

        def group_by() -> Operator:
            return GroupByOperator(app, agent, repartition)

        p.operator(
            f"{agent.uid}.group-by", factory=group_by, inputs=agent.source.name,
            outputs=repartition.topic.name,
            parallelism=min(parallelism, agent.source.partitions),
        )  # fmt: skip
    sinks = {name: _sink_object(app, agent, name) for name in agent.sinks}

    def body() -> Operator:
        if agent.take is not None:
            return TakeOperator(app, agent, sinks, clock=clock)
        return AgentOperator(app, agent, sinks)

    p.operator(
        agent.uid, factory=body, inputs=agent.body_input.name,
        outputs=tuple(dict.fromkeys((*agent.sends, *agent.sinks))),
        parallelism=min(parallelism, agent.body_input.partitions),
    )  # fmt: skip


def _sink_object(app: Any, agent: AgentPlan, name: str) -> Any:
    """The faust object (topic or agent) of ``agent``'s sink ``name``."""
    faust_agent = next(a for a in app.agents.values() if a.name == agent.name)
    for sink in faust_agent._sinks or ():
        channel = getattr(sink, "channel", sink)
        if channel.get_topic_name() == name:
            return sink
    raise LookupError(name)

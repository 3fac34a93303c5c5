"""The routing stage `add_agent` puts in front of an agent: re-keyed by the run_id of the value."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agents.agent import AgentTopics, add_agent, agents_in
from agents.messages import ApprovalDecision, TaskRequest
from agents.routing import RunRouter, routed_topic
from operators.contract import Record
from operators.pipeline import Pipeline, TopicKind
from operators.runtime.context import RecordContext
from sluicegate.demos.refund_desk.agent import refund_desk

ROUTER = RunRouter("desk.tasks", "desk.approvals", "routed.tasks", "routed.approvals")


def route(topic: str, value: bytes, key: bytes | None) -> list[tuple[str, bytes | None, bytes]]:
    record = Record(topic, 2, 7, key, value, 0)

    def no_state(topic: str, partition: int) -> None:
        raise AssertionError("the router keeps no state")

    ctx = RecordContext(topic, 2, record, no_state, lambda: 0.0)  # type: ignore[arg-type]
    ROUTER(record, ctx)
    return [(e.topic, e.key, e.value) for e in ctx.emitted]


def test_tasks_and_decisions_are_keyed_by_the_run_id_of_their_value() -> None:
    task = TaskRequest(run_id="r-1", goal="refund").model_dump_json().encode()
    decision = ApprovalDecision(run_id="r-1", approved=True).model_dump_json().encode()
    # Whatever key (or none) the producer used.
    assert route("desk.tasks", task, b"something else") == [("routed.tasks", b"r-1", task)]
    assert route("desk.approvals", decision, None) == [("routed.approvals", b"r-1", decision)]


def test_a_malformed_record_raises_so_the_router_dead_letters_it() -> None:
    with pytest.raises(ValidationError):
        route("desk.tasks", b'{"goal": "no run id"}', b"k")
    with pytest.raises(ValidationError):
        route("desk.approvals", b"not json", b"k")


def test_add_agent_puts_the_router_between_the_sources_and_the_agent() -> None:
    p = Pipeline("support")
    topics = add_agent(p, refund_desk("http://127.0.0.1:1"), partitions=4, parallelism=2)
    graph = p.build()
    tasks, approvals = (routed_topic("support", "refund-desk", s) for s in ("tasks", "approvals"))
    assert tasks == "sluicegate.support.refund-desk.tasks-by-run"
    router, agent = graph.operators["refund-desk.router"], graph.operators["refund-desk"]
    assert (router.inputs, router.outputs) == ((topics.tasks, topics.approvals), (tasks, approvals))
    assert router.parallelism == 1
    assert agent.inputs == (tasks, approvals)
    assert graph.topics[tasks].kind is TopicKind.TOPIC
    assert graph.topics[tasks].partitions == graph.topics[approvals].partitions == 4
    # Tools that find agents in the graph still see the topics the outside world uses.
    assert agents_in(graph) == {"refund-desk": topics}
    assert topics == AgentTopics(
        "refund-desk.tasks", "refund-desk.approvals", "refund-desk.events", "refund-desk.results"
    )

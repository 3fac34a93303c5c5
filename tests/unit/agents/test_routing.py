"""The routing stage `add_agent` puts in front of an agent: re-keyed by the run_id of the value."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from sluicegate import Agent, AgentTopics, add_agent
from sluicegate.agents.agent import agents_in
from sluicegate.agents.declaration import TaskFeed, task_from_json
from sluicegate.agents.messages import ApprovalDecision, ForkRun, RunResult, TaskRequest
from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.routing import RunRouter, routed_topic
from sluicegate.agents.runs.state import Budget
from sluicegate.demos.refund_desk.agent import refund_desk
from sluicegate.operators.contract import Record
from sluicegate.operators.exceptions import PipelineError
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.context import RecordContext
from sluicegate.operators.specs import TopicKind


def ticket_task(record: Record) -> TaskRequest | None:
    """A feed mapping: tickets of category refund start a run named after the ticket."""
    ticket = json.loads(record.value)
    if ticket["category"] != "refund":
        return None
    return TaskRequest(run_id=f"refund-{ticket['id']}", goal=ticket["text"], metadata=ticket)


ROUTER = RunRouter(
    {"desk.tasks": task_from_json, "tickets": ticket_task},
    "desk.approvals",
    "routed.tasks",
    "routed.approvals",
)


def route(topic: str, value: bytes, key: bytes | None) -> list[tuple[str, bytes | None, bytes]]:
    record = Record(topic, 2, 7, key, value, 0)

    def no_state(topic: str, partition: int) -> None:
        raise AssertionError("the router keeps no state")

    ctx = RecordContext(topic, 2, record, no_state, lambda: 0.0)  # type: ignore[arg-type]
    ROUTER(record, ctx)
    return [(e.topic, e.key, e.value) for e in ctx.emitted]


def test_tasks_and_decisions_are_keyed_by_the_run_id_of_their_value() -> None:
    task = TaskRequest(run_id="r-1", goal="refund", budget=Budget(max_steps=3))
    decision = ApprovalDecision(run_id="r-1", approved=True).model_dump_json().encode()
    # Whatever key (or none) the producer used.
    [(topic, key, value)] = route("desk.tasks", task.encode(), b"else")
    assert (topic, key) == ("routed.tasks", b"r-1")
    assert TaskRequest.model_validate_json(value) == task
    assert json.loads(value)["budget"] == {"max_steps": 3}  # only the limits the task set
    assert route("desk.approvals", decision, None) == [("routed.approvals", b"r-1", decision)]


def test_a_fork_is_keyed_by_the_new_run_s_id() -> None:
    messages = (ChatMessage(role="system", content="s"), ChatMessage(role="user", content="g"))
    fork = ForkRun(run_id="r-1.b", parent_run_id="r-1", from_step=0, goal="g", messages=messages)
    value = fork.model_dump_json().encode()
    assert route("desk.approvals", value, b"r-1") == [("routed.approvals", b"r-1.b", value)]


def test_a_feed_maps_its_records_to_tasks_or_skips_them() -> None:
    ticket = {"id": "t-9", "category": "refund", "text": "broken kettle"}
    [(topic, key, value)] = route("tickets", json.dumps(ticket).encode(), None)
    assert (topic, key) == ("routed.tasks", b"refund-t-9")
    task = TaskRequest.model_validate_json(value)
    assert (task.goal, task.metadata) == ("broken kettle", ticket)
    other = {"id": "t-10", "category": "billing", "text": "invoice"}
    assert route("tickets", json.dumps(other).encode(), None) == []


def test_a_feed_mapping_that_fails_raises_so_the_router_dead_letters_the_record() -> None:
    with pytest.raises(json.JSONDecodeError):
        route("tickets", b"not json", None)
    with pytest.raises(KeyError):
        route("tickets", b"{}", None)
    wrong = RunRouter({"t": lambda r: r.value}, "a", "rt", "ra")  # type: ignore[dict-item,return-value]
    with pytest.raises(TypeError, match="returned bytes"):
        wrong(Record("t", 0, 0, None, b"x", 0), None)  # type: ignore[arg-type]


def test_a_malformed_record_raises_so_the_router_dead_letters_it() -> None:
    with pytest.raises(ValidationError):
        route("desk.tasks", b'{"goal": "no run id"}', b"k")
    with pytest.raises(ValueError, match="not JSON"):
        route("desk.approvals", b"not json", b"k")
    with pytest.raises(ValueError, match="unknown command 'explode'"):
        route("desk.approvals", b'{"command": "explode", "run_id": "r1"}', b"k")
    with pytest.raises(ValidationError):
        route("desk.approvals", b'{"command": "rollback", "run_id": "r1", "to_step": -1}', b"k")


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


def refund_task(record: Record) -> TaskRequest | None:
    """The second stage's mapping: a triage result that says refund starts a refund run."""
    result = RunResult.model_validate_json(record.value)
    if result.answer != "refund":
        return None
    return TaskRequest(run_id=f"refund-{result.run_id}", goal="refund", metadata=result.metadata)


def test_agents_anywhere_an_operator_feeds_an_agent_which_feeds_another_and_an_operator() -> None:
    desk = refund_desk("http://127.0.0.1:1")
    triage = Agent("triage", desk.model, desk.tools, "Triage.")
    p = Pipeline("support")
    p.source("tickets", partitions=4)
    p.topic("classified", partitions=4)
    p.topic("triage.results", partitions=4)
    p.topic("refunds.results", partitions=4)
    p.sink("notices", partitions=4)
    p.operator("classify", lambda r, c: None, inputs="tickets", outputs="classified")
    first = add_agent(
        p, triage, partitions=4, feeds=[TaskFeed("classified", ticket_task)],
        topics=AgentTopics.named("triage", results="triage.results"),
    )  # fmt: skip
    second = add_agent(
        p, desk, partitions=4, feeds=[TaskFeed("triage.results", refund_task)],
        topics=AgentTopics.named("refund-desk", results="refunds.results"),
    )  # fmt: skip
    p.operator("notify", lambda r, c: None, inputs=["triage.results", second.results],
               outputs="notices")  # fmt: skip
    graph = p.build()

    assert first.tasks == "classified"
    assert second == AgentTopics(
        "triage.results", "refund-desk.approvals", "refund-desk.events", "refunds.results"
    )
    assert graph.topics["triage.results"].kind is TopicKind.TOPIC  # written for readers inside
    assert graph.topics["triage.events"].kind is TopicKind.SINK  # not declared: a sink
    assert graph.topics["refund-desk.events"].kind is TopicKind.SINK
    assert "refund-desk.tasks" not in graph.topics  # fed from triage only
    assert graph.operators["triage.router"].inputs == ("classified", "triage.approvals")
    # Fan-out: triage's results feed the refund desk's router and the notifier.
    readers = sorted(op.uid for op in graph.operators.values() if "triage.results" in op.inputs)
    assert readers == ["notify", "refund-desk.router"]
    assert graph.writers("triage.results") == ["triage#0"]
    # Fan-in: the notifier reads both agents' results.
    assert graph.operators["notify"].inputs == ("triage.results", "refunds.results")
    assert agents_in(graph) == {"triage": first, "refund-desk": second}


def test_add_agent_refuses_feeds_it_cannot_read() -> None:
    desk = refund_desk("http://127.0.0.1:1")
    p = Pipeline("support")
    p.sink("out", partitions=4)
    p.topic("narrow", partitions=2)
    with pytest.raises(PipelineError, match="declare it with topic"):
        add_agent(p, desk, partitions=4, feeds=[TaskFeed("out")])
    with pytest.raises(PipelineError, match="has 2 partitions, the agent 4"):
        add_agent(p, desk, partitions=4, feeds=[TaskFeed("new"), TaskFeed("narrow")])
    assert "new" not in p.topics  # refused before anything was declared
    with pytest.raises(PipelineError, match="at least one task feed"):
        add_agent(Pipeline("s3"), desk, partitions=4, feeds=[])

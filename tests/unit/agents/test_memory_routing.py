"""The router of an agent with memory: runs of one key in the key's partition, commands about
a run to every partition, an erasure to its key's."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from sluicegate.agents.declaration import task_from_json
from sluicegate.agents.memory.config import Memory
from sluicegate.agents.messages import (
    ApprovalDecision,
    EraseMemory,
    ForkRun,
    RollbackRun,
    TaskRequest,
)
from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.routing import RunRouter, memory_partition
from sluicegate.operators.contract import Record
from sluicegate.operators.runtime.context import RecordContext

PARTITIONS = 8


def router(memory: Memory | None) -> RunRouter:
    return RunRouter(
        {"desk.tasks": task_from_json}, "desk.approvals", "routed.tasks", "routed.approvals",
        memory=memory, partitions=PARTITIONS,
    )  # fmt: skip


def route(r: RunRouter, topic: str, value: bytes) -> list[tuple[str, bytes | None, int | None]]:
    record = Record(topic, 2, 7, None, value, 0)

    def no_state(topic: str, partition: int) -> None:
        raise AssertionError("the router keeps no state")

    ctx = RecordContext(topic, 2, record, no_state, lambda: 0.0)  # type: ignore[arg-type]
    r(record, ctx)
    return [(e.topic, e.key, e.partition) for e in ctx.emitted]


def task(run_id: str, customer: str | None) -> bytes:
    metadata: dict[str, JsonValue] = {} if customer is None else {"customer_id": customer}
    return TaskRequest(run_id=run_id, goal="g", metadata=metadata).encode()


def test_every_run_of_a_key_goes_to_the_key_s_partition_keyed_by_its_run() -> None:
    r = router(Memory(key="customer_id"))
    where = memory_partition("c-1", PARTITIONS)
    placed = {route(r, "desk.tasks", task(f"run-{i}", "c-1"))[0] for i in range(20)}
    assert placed == {("routed.tasks", f"run-{i}".encode(), where) for i in range(20)}
    # Keys spread over the partitions; a task without a key goes by its run id.
    spread = {route(r, "desk.tasks", task("x", f"c-{i}"))[0][2] for i in range(50)}
    assert len(spread) > PARTITIONS // 2
    assert route(r, "desk.tasks", task("run-9", None)) == [("routed.tasks", b"run-9", None)]


def test_decisions_and_rollbacks_go_to_every_partition_forks_to_their_key_s() -> None:
    r = router(Memory(key="customer_id"))
    everywhere = [("routed.approvals", b"run-1", p) for p in range(PARTITIONS)]
    decision = ApprovalDecision(run_id="run-1", approved=True).model_dump_json().encode()
    assert route(r, "desk.approvals", decision) == everywhere
    rollback = RollbackRun(run_id="run-1", to_step=1).model_dump_json().encode()
    assert route(r, "desk.approvals", rollback) == everywhere
    messages = (ChatMessage(role="system", content="s"), ChatMessage(role="user", content="g"))
    fork = ForkRun(
        run_id="run-1.b", parent_run_id="run-1", from_step=0, goal="g", messages=messages,
        metadata={"customer_id": "c-1"},
    ).model_dump_json().encode()  # fmt: skip
    where = memory_partition("c-1", PARTITIONS)
    assert route(r, "desk.approvals", fork) == [("routed.approvals", b"run-1.b", where)]


def test_an_erasure_goes_to_its_key_s_partition_and_needs_memory() -> None:
    erase = EraseMemory(key="c-1", by="dpo").model_dump_json().encode()
    where = memory_partition("c-1", PARTITIONS)
    assert route(router(Memory(key="customer_id")), "desk.approvals", erase) == [
        ("routed.approvals", b"c-1", where)
    ]
    with pytest.raises(ValueError, match="has no memory"):
        route(router(None), "desk.approvals", erase)


def test_without_memory_nothing_changes() -> None:
    r = router(None)
    assert route(r, "desk.tasks", task("run-1", "c-1")) == [("routed.tasks", b"run-1", None)]
    decision = ApprovalDecision(run_id="run-1", approved=True).model_dump_json().encode()
    assert route(r, "desk.approvals", decision) == [("routed.approvals", b"run-1", None)]


def test_a_task_whose_key_cannot_be_read_raises_so_it_is_dead_lettered() -> None:
    r = router(Memory(key="customer_id"))
    bad = TaskRequest(run_id="r", goal="g", metadata={"customer_id": {"x": 1}}).encode()
    with pytest.raises(ValueError, match="not a memory key"):
        route(r, "desk.tasks", bad)

"""`RunCache`: decoded runs kept between wake-ups never outlive a restore and never go stale."""

from __future__ import annotations

from typing import Any

import pytest

from sluicegate import Agent
from sluicegate.agents.messages import ApprovalDecision, TaskRequest
from sluicegate.agents.runs.cache import RunCache, StaleRunError, json_value
from sluicegate.agents.runs.machine import start_run
from sluicegate.agents.runs.state import Budget, RunState, RunStatus, run_key
from sluicegate.agents.tools import ToolContext, ToolKind, tool
from tests.unit.agents.test_agent_operator import (
    TOPICS,
    DictState,
    FakeOpenContext,
    World,
    make_tools,
    opened,
)


def run(run_id: str, *, status: RunStatus = RunStatus.RUNNING) -> RunState:
    state = start_run(run_id, "goal", "Settle.", Budget(), 1000.0).state
    return state.model_copy(update={"status": status})


def test_a_put_writes_the_state_and_a_get_answers_from_memory() -> None:
    cache, state = RunCache(), DictState()
    cache.put(state, 0, run("r1"))
    assert RunState.decode(state.rows[run_key("r1")]) == run("r1")
    assert cache.get(state, 0, "r1") == run("r1")
    assert (cache.hits, cache.misses) == (1, 0)
    assert cache.get(state, 0, "r2") is None


def test_the_least_recently_used_run_is_evicted_and_decoded_again() -> None:
    cache, state = RunCache(capacity=2), DictState()
    for run_id in ("r1", "r2"):
        cache.put(state, 0, run(run_id))
    cache.get(state, 0, "r1")  # r2 is now the least recently used
    cache.put(state, 0, run("r3"))
    assert len(cache) == 2
    assert cache.get(state, 0, "r2") == run("r2")
    assert cache.misses == 1


def test_runs_past_max_bytes_are_evicted_least_recently_used_first() -> None:
    size = len(run("r1").encode())
    cache, state = RunCache(max_bytes=2 * size), DictState()
    for run_id in ("r1", "r2", "r3"):
        cache.put(state, 0, run(run_id))
    assert (len(cache), cache.bytes) == (2, 2 * size)
    assert cache.get(state, 0, "r1") == run("r1")  # evicted: decoded again
    assert cache.misses == 1
    too_big = RunCache(max_bytes=size - 1)
    too_big.put(state, 0, run("r1"))
    assert (len(too_big), too_big.bytes) == (0, 0)


def test_a_finished_run_is_written_but_not_kept() -> None:
    cache, state = RunCache(), DictState()
    cache.put(state, 0, run("r1"))
    cache.put(state, 0, run("r1", status=RunStatus.DONE))
    assert (len(cache), cache.bytes) == (0, 0)
    assert cache.get(state, 0, "r1") == run("r1", status=RunStatus.DONE)


def test_runs_of_two_partitions_do_not_mix() -> None:
    cache, p0, p1 = RunCache(), DictState(), DictState()
    cache.put(p0, 0, run("r1"))
    assert cache.get(p1, 1, "r1") is None


def test_verify_refuses_a_run_changed_behind_the_cache() -> None:
    cache, state = RunCache(verify=True), DictState()
    cache.put(state, 0, run("r1"))
    state.put(run_key("r1"), run("r1", status=RunStatus.FAILED).encode())
    with pytest.raises(StaleRunError) as refused:
        cache.get(state, 0, "r1")
    assert (refused.value.run_id, refused.value.partition) == ("r1", 0)
    cache.clear()
    assert cache.get(state, 0, "r1") == run("r1", status=RunStatus.FAILED)


def test_a_negative_capacity_is_refused_and_zero_keeps_nothing() -> None:
    with pytest.raises(ValueError, match="0 runs"):
        RunCache(capacity=-1)
    with pytest.raises(ValueError, match="0 runs"):
        RunCache(max_bytes=-1)
    cache, state = RunCache(capacity=0), DictState()
    cache.put(state, 0, run("r1"))
    assert len(cache) == 0
    assert cache.get(state, 0, "r1") == run("r1")


def test_json_value_is_what_a_decode_gives_back() -> None:
    assert json_value((1, {"a": (2, 3)})) == [1, {"a": [2, 3]}]
    assert json_value("x") == "x"
    assert json_value(None) is None


async def test_a_run_is_decoded_once_between_restores_not_on_every_wake_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decodes: list[bytes] = []
    decode = RunState.decode

    def counting(data: bytes) -> RunState:
        decodes.append(data)
        return decode(data)

    monkeypatch.setattr(RunCache, "verify_all", False)  # verifying decodes on every hit
    desk = await opened([[("look", {"x": 1})], [("look", {"x": 2})], "done"])
    monkeypatch.setattr(RunState, "decode", staticmethod(counting))
    await desk.task()
    await desk.drain()
    (result,) = desk.world.results()
    assert (result.status, result.steps) == ("done", 3)
    assert decodes == []


async def test_a_reopened_operator_reads_the_restored_run_not_its_cached_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Same operator object, state rewound to a checkpoint, then `open` again (a restore):
    the run goes on from the checkpoint's state, not from the later one it had cached."""
    monkeypatch.setattr(RunCache, "verify_all", False)  # the events must show it by themselves
    turns: list[Any] = [[("look", {"x": n})] for n in range(4)] + ["done"]
    desk = await opened(turns)
    await desk.task()
    for _ in range(2):  # each wake-up: a model call and the look it asks for
        assert await desk.step()
    checkpoint = {topic: DictState(s.rows) for topic, s in desk.world.states.items()}
    restored = RunState.decode(checkpoint[TOPICS.tasks].rows[run_key("r1")])
    for _ in range(2):  # the cache now holds a run 2 steps past the checkpoint
        assert await desk.step()
    desk.world = World(states=checkpoint)
    await desk.op.open(FakeOpenContext(desk.world))
    await desk.drain()
    events = desk.world.events()
    assert [e["seq"] for e in events] == list(range(restored.events, restored.events + len(events)))
    (result,) = desk.world.results()
    assert (result.status, result.steps) == ("done", 5)


async def test_a_tool_result_the_run_keeps_is_the_one_its_stored_document_holds() -> None:
    """An effect returning a tuple: the cached run holds the list a decode gives (verified)."""

    @tool(kind=ToolKind.IDEMPOTENT_WRITE)
    async def pair(ctx: ToolContext) -> Any:
        return (1, (2, 3))

    desk = await opened([[("pair", {})], [("pair", {})], "done"])
    desk.agent = Agent("desk", desk.model, [*make_tools(desk.calls), pair], "Settle.")
    desk.op = desk._operator()
    await desk.open()
    await desk.task()
    await desk.drain()  # RunCache.verify_all (conftest): every hit compared with a decode
    (result,) = desk.world.results()
    assert (result.status, result.steps) == ("done", 3)


async def test_a_run_started_after_the_restored_checkpoint_is_unknown_after_a_reopen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(RunCache, "verify_all", False)
    desk = await opened([[("look", {"x": 1})], "done"])
    checkpoint = {topic: DictState(s.rows) for topic, s in desk.world.states.items()}
    await desk.send(TOPICS.tasks, TaskRequest(run_id="r2", goal="late"))
    assert await desk.step()  # r2 is running, and cached
    desk.world = World(states=checkpoint)
    await desk.op.open(FakeOpenContext(desk.world))
    decision = ApprovalDecision(run_id="r2", approved=True, call_id="c0-0", by="ann")
    with pytest.raises(ValueError, match="approval for unknown run 'r2'"):
        await desk.send(TOPICS.approvals, decision)

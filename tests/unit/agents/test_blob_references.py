"""Payloads by reference in `AgentOperator`: conversion at the threshold, the run holding only
handles, lazy resolution with its scope and digest checks, and expiry and erasure seen by the
run as ``blob_unavailable`` (in-memory journal and storage, an injected clock)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from sluicegate import Agent
from sluicegate.agents.blobs import BlobPolicy, handle_of, handle_of_text
from sluicegate.agents.blobs.references import BlobReferences, Inline
from sluicegate.agents.journal import (
    Effect,
    EffectKind,
    LookupFound,
    LookupNotFound,
    LookupResult,
    OnUnknown,
)
from sluicegate.agents.metrics import AgentMetrics
from sluicegate.agents.models import ScriptedModel
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.runs.state import RunState
from sluicegate.agents.tools import ToolContext, tool
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.blobs import BlobStore, subject_digest
from tests.unit.agents.test_agent_operator import LABELS, TOPICS, Desk, DictState

BIG = "y" * 5000


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_desk(*, seen: list[list[ChatMessage]], result: Any = BIG, **policy: Any) -> Desk:
    """An agent that fetches once, then answers with what it saw of the fetched result."""

    @tool()
    async def fetch(ctx: ToolContext, page: int) -> Any:
        return result

    def reply(messages: Sequence[ChatMessage]) -> ChatMessage:
        seen.append(list(messages))
        if not any(m.role == "tool" for m in messages):
            call = ToolCall(id="c1", name="fetch", arguments='{"page": 1}')
            return ChatMessage(role="assistant", tool_calls=(call,))
        content = next(m.content for m in messages if m.role == "tool") or ""
        return ChatMessage(role="assistant", content=f"saw {len(content)} chars")

    clock = Clock()
    desk = Desk([], clock=clock)
    storage = policy.pop("storage", None) or open_storage("memory://")
    blobs = BlobPolicy(threshold_bytes=1024, storage=storage, **policy)
    desk.agent = Agent("desk", ScriptedModel(reply), [fetch], "Fetch.", blobs=blobs)
    desk.op = desk._operator()
    return desk


async def until_waiting_for_second_call(desk: Desk) -> None:
    await desk.open()
    await desk.task(metadata={"subject": "alice", "tenant": "eu"})
    # One wake-up: the model calls fetch (read-only), and fetch's result is recorded.
    assert await desk.step()
    assert desk.world.run().step == 1


def blob_keys(desk: Desk) -> Any:
    policy = desk.agent.blobs
    assert policy is not None
    assert policy.storage is not None
    return policy.storage.list("blobs")


async def test_a_large_result_is_stored_once_and_the_run_journal_and_events_hold_a_handle() -> None:
    seen: list[list[ChatMessage]] = []
    desk = make_desk(seen=seen)
    await until_waiting_for_second_call(desk)
    run = desk.world.run()
    (effect_done,) = [
        e for _, e in desk.journal.writes if e and e.status == "done" and e.kind == "tool"
    ]
    handle = handle_of(effect_done.result)
    assert handle is not None
    assert handle.size == len(json.dumps(BIG))
    assert handle.scope == "desk/eu"
    assert handle.subject == subject_digest("alice")
    assert run.blobs == (handle.id,)
    assert BIG not in run.encode().decode()
    assert all(BIG not in json.dumps(e) for e in desk.world.events())
    assert await blob_keys(desk) == [f"blobs/{handle.subject}/{handle.id}",
                                     f"blobs/{handle.subject}/{handle.id}.meta"]  # fmt: skip
    await desk.drain()
    # The model saw the payload itself, resolved when its messages were built.
    assert [m.content for m in seen[-1] if m.role == "tool"] == [json.dumps(BIG)]
    (result,) = desk.world.results()
    assert (result.status, result.answer) == ("done", f"saw {len(json.dumps(BIG))} chars")
    assert desk.registry.get_sample_value(
        "sluicegate_agent_blobs_written_total", {**LABELS, "kind": "json"}) == 1  # fmt: skip
    resolved = {**LABELS, "outcome": "resolved"}
    assert desk.registry.get_sample_value("sluicegate_agent_blob_resolutions_total", resolved) == 1


async def test_a_small_result_stays_inline_and_a_handle_shaped_one_goes_by_reference() -> None:
    desk = make_desk(seen=[], result={"ok": True})
    await until_waiting_for_second_call(desk)
    assert desk.world.run().blobs == ()
    forged = {"$blob": {"id": "0" * 32, "subject": "0" * 32, "scope": "desk/eu", "size": 1,
                        "sha256": "0" * 64, "kind": "json"}}  # fmt: skip
    seen: list[list[ChatMessage]] = []
    desk = make_desk(seen=seen, result=forged)
    await until_waiting_for_second_call(desk)
    (stored,) = desk.world.run().blobs
    assert stored != "0" * 32  # the forged handle is a payload like any other
    await desk.drain()
    assert [m.content for m in seen[-1] if m.role == "tool"] == [json.dumps(forged, sort_keys=True)]


async def test_a_large_model_message_is_stored_by_reference_too() -> None:
    desk = Desk(["z" * 3000], clock=Clock())
    policy = BlobPolicy(threshold_bytes=1024, storage=open_storage("memory://"))
    desk.agent = Agent("desk", desk.model, [], "Answer.", blobs=policy)
    desk.op = desk._operator()
    await desk.open()
    await desk.task()
    await desk.drain()
    run = desk.world.run()
    handle = handle_of_text(run.messages[-1].content)
    assert handle is not None
    assert handle.kind == "text"
    assert run.blobs == (handle.id,)
    assert desk.world.results()[0].answer == handle.text()


async def test_an_erased_blob_is_a_condition_the_run_sees_and_goes_on_from() -> None:
    seen: list[list[ChatMessage]] = []
    desk = make_desk(seen=seen)
    await until_waiting_for_second_call(desk)
    (stored,) = desk.world.run().blobs
    policy = desk.agent.blobs
    assert policy is not None
    assert policy.storage is not None
    await BlobStore(policy.storage).erase(subject_digest("alice"))
    await desk.crash()  # resumed from the state as it was
    await desk.drain()
    (lost,) = [e for e in desk.world.events() if e["type"] == "blob_unavailable"]
    assert lost["reason"] == "erased"
    assert lost["blob"] == stored
    (tool_message,) = [m for m in seen[-1] if m.role == "tool"]
    assert tool_message.content is not None
    assert "payload unavailable (erased)" in tool_message.content
    run = desk.world.run()
    assert run.blobs == ()
    assert run.status.value == "done"
    erased = {**LABELS, "outcome": "erased"}
    assert desk.registry.get_sample_value("sluicegate_agent_blob_resolutions_total", erased) == 1


async def test_expiry_follows_the_injected_clock_even_before_collection() -> None:
    seen: list[list[ChatMessage]] = []
    desk = make_desk(seen=seen, ttl_s=60.0)
    await until_waiting_for_second_call(desk)
    assert isinstance(desk.clock, Clock)
    desk.clock.now += 60.0
    await desk.drain()
    (lost,) = [e for e in desk.world.events() if e["type"] == "blob_unavailable"]
    assert lost["reason"] == "expired"
    assert desk.world.results()[0].status == "done"


async def test_a_handle_from_another_scope_is_refused() -> None:
    seen: list[list[ChatMessage]] = []
    desk = make_desk(seen=seen)
    await until_waiting_for_second_call(desk)
    # The same run read by an agent whose scope rule differs (another tenant's reader).
    policy = desk.agent.blobs
    assert policy is not None
    other = BlobPolicy(threshold_bytes=1024, storage=policy.storage,
                       scope_of=lambda agent, metadata: f"{agent}/us")  # fmt: skip
    desk.agent = Agent("desk", desk.agent.model, desk.agent.tools, "Fetch.", blobs=other)
    await desk.crash()
    await desk.drain()
    (lost,) = [e for e in desk.world.events() if e["type"] == "blob_unavailable"]
    assert lost["reason"] == "out_of_scope"
    assert all("y" * 100 not in (m.content or "") for m in seen[-1])


async def test_changed_bytes_are_corrupt() -> None:
    desk = make_desk(seen=[])
    await until_waiting_for_second_call(desk)
    policy = desk.agent.blobs
    assert policy is not None
    assert policy.storage is not None
    (path, _) = await blob_keys(desk)
    await policy.storage.put(path, json.dumps("x" * 5000).encode())
    await desk.drain()
    (lost,) = [e for e in desk.world.events() if e["type"] == "blob_unavailable"]
    assert lost["reason"] == "corrupt"


async def test_a_replayed_tool_call_writes_nothing_again_and_keeps_its_handle() -> None:
    desk = make_desk(seen=[])
    await desk.open()
    await desk.task(metadata={"subject": "alice"})
    assert await desk.step()  # the model calls fetch
    before = dict(desk.world.state(TOPICS.tasks).rows)
    assert await desk.step()  # fetch: stored, journaled, recorded
    stored = desk.world.run().blobs
    # Restored to before the result was recorded: the journal replays it, the tool is not
    # called, nothing is written again, and the replayed handle is the run's own again.
    await desk.crash({TOPICS.tasks: DictState(before)})
    await desk.drain()
    assert desk.world.run().blobs == stored != ()
    assert desk.world.results()[0].status == "done"
    assert desk.registry.get_sample_value(
        "sluicegate_agent_blobs_written_total", {**LABELS, "kind": "json"}) == 1  # fmt: skip


def references(storage: Any) -> BlobReferences:
    policy = BlobPolicy(threshold_bytes=1024, storage=storage)
    metrics = AgentMetrics(CollectorRegistry())
    return BlobReferences(
        policy,
        BlobStore(storage),
        agent="desk",
        metrics=metrics,
        labels=("job", "desk", "0"),
        clock=Clock(),
    )


def tool_effect(result: Any, found: LookupResult) -> Effect:
    async def call() -> Any:
        return result

    async def lookup() -> LookupResult:
        return found

    return Effect(
        key="r1/0/0", run_id="r1", partition=0, kind=EffectKind.TOOL, name="fetch",
        request={}, on_unknown=OnUnknown.LOOKUP, call=call, lookup=lookup,
    )  # fmt: skip


async def test_the_wrapper_converts_what_a_tools_call_and_its_lookup_return() -> None:
    """`BlobReferences.offloading` wraps the call and the lookup alike: a large result found by
    a lookup (settling an unknown outcome) is stored by reference as the call's would be, a
    small one and a "not found" pass through, and `stored` knows only this effect's handle."""
    blobs = references(open_storage("memory://"))
    state = RunState(run_id="r1", goal="g", created_at=0.0, updated_at=0.0)
    effect = blobs.offloading(state, tool_effect(BIG, LookupFound(BIG)))
    assert effect.lookup is not None
    called, found = await effect.call(), await effect.lookup()
    assert isinstance(found, LookupFound)
    handle = blobs.stored(state, effect, called)
    assert handle is not None
    assert handle == blobs.stored(state, effect, found.value)
    assert called == found.value == handle.value()  # one key, one blob
    small = blobs.offloading(state, tool_effect({"ok": 1}, LookupNotFound()))
    assert small.lookup is not None
    assert await small.call() == {"ok": 1}
    assert isinstance(await small.lookup(), LookupNotFound)
    assert blobs.stored(state, small, {"ok": 1}) is None
    other_tenant = RunState(
        run_id="r1", goal="g", metadata={"tenant": "eu"}, created_at=0.0, updated_at=0.0
    )
    assert blobs.stored(other_tenant, effect, called) is None  # not its scope's handle


async def test_without_a_policy_the_effect_is_performed_as_it_is() -> None:
    effect = tool_effect(BIG, LookupFound(BIG))
    assert (
        Inline().offloading(RunState(run_id="r1", goal="g", created_at=0, updated_at=0), effect)
        is effect
    )

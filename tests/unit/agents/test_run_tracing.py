"""The spans of agent runs (`agents.tracing`), read from the SDK's in-memory exporter."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sluicegate import Agent
from sluicegate.agents.tools import Tool, ToolContext, tool
from sluicegate.agents.tracing import REPLAYED, run_ids
from sluicegate.operators import tracing
from tests.unit.agents.test_agent_operator import DictState, Turn, opened
from tests.unit.agents.test_rollback_operator import booked

TRACE_ID, ROOT_ID = run_ids("p", "desk", "r1")


def named(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


LOOK_TWICE: list[Turn] = [[("look", {"x": 1}), ("look", {"x": 2})], "order 7 refunded"]


async def test_without_tracing_no_provider_is_installed_and_tools_get_no_headers() -> None:
    assert tracing.tracer("sluicegate.agents") is None
    seen: list[dict[str, str]] = []
    desk = await opened(LOOK_TWICE)
    desk.agent = Agent("desk", desk.model, [_recording_look(seen)], "Settle.")
    desk.op = desk._operator()
    await desk.open()
    await desk.task()
    await desk.drain()
    assert seen == [{}, {}]
    assert not desk.op._tracing.enabled


async def test_a_run_is_one_trace_under_its_root_with_genai_attributes(
    spans: InMemorySpanExporter,
) -> None:
    desk = await opened(LOOK_TWICE)
    await desk.task()
    await desk.drain()
    finished = spans.get_finished_spans()
    assert {s.context.trace_id for s in finished} == {TRACE_ID}
    (root,) = named(finished, "invoke_agent")
    assert (root.name, root.parent, root.context.span_id) == ("invoke_agent desk", None, ROOT_ID)
    assert attrs(root)["sluicegate.status"] == "done"
    assert attrs(root)["sluicegate.steps"] == 2
    wakes = named(finished, "sluicegate.wake")
    assert len(wakes) == 2  # one step per wake-up: the model call and then its tool calls
    assert {parent_id(w) for w in wakes} == {ROOT_ID}
    models = named(finished, "chat ")
    assert len(models) == 2
    for model in models:
        assert parent_id(model) in {w.context.span_id for w in wakes}
        a = attrs(model)
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.request.model"] == "model"
        assert a["gen_ai.provider.name"] == "scripted"
        assert a[REPLAYED] is False
        assert {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} <= a.keys()
    tools = named(finished, "execute_tool")
    assert [t.name for t in tools] == ["execute_tool look", "execute_tool look"]
    first_wake = min(wakes, key=lambda w: w.start_time or 0)
    for span in tools:
        assert parent_id(span) == first_wake.context.span_id
        a = attrs(span)
        assert (a["sluicegate.tool.kind"], a["sluicegate.tool.outcome"]) == ("read_only", "ok")
        assert a[REPLAYED] is False
    assert [attrs(t)["sluicegate.effect.key"] for t in tools] == ["r1/1/0", "r1/1/1"]


async def test_a_tool_gets_the_traceparent_of_its_own_span(spans: InMemorySpanExporter) -> None:
    seen: list[dict[str, str]] = []
    desk = await opened(LOOK_TWICE)
    desk.agent = Agent("desk", desk.model, [_recording_look(seen)], "Settle.")
    desk.op = desk._operator()
    await desk.open()
    await desk.task()
    await desk.drain()
    tools = named(spans.get_finished_spans(), "execute_tool")
    expected = [f"00-{TRACE_ID:032x}-{t.context.span_id:016x}-01" for t in tools]
    assert [h["traceparent"] for h in seen] == expected


async def test_a_restore_lands_in_the_same_trace_and_marks_replays_not_second_calls(
    spans: InMemorySpanExporter,
) -> None:
    desk = await opened(LOOK_TWICE)
    await desk.task()
    checkpoint = {topic: DictState(s.rows) for topic, s in desk.world.states.items()}
    await desk.drain()
    first = spans.get_finished_spans()
    spans.clear()
    await desk.crash(checkpoint)
    await desk.drain()
    again = spans.get_finished_spans()
    assert {s.context.trace_id for s in again} == {TRACE_ID}
    assert named(again, "invoke_agent") == []  # the root was emitted when the run ended
    replays = named(again, "chat ") + named(again, "execute_tool")
    assert len(replays) == 4
    assert {attrs(s)[REPLAYED] for s in replays} == {True}
    # No token usage on a replay: a sum over the trace counts each model call once.
    assert all("gen_ai.usage.input_tokens" not in attrs(s) for s in replays)
    executed = [s for s in first + again if attrs(s).get(REPLAYED) is False]
    keys = Counter(attrs(s)["sluicegate.effect.key"] for s in executed)
    assert keys == Counter({"r1/1/model": 1, "r1/1/0": 1, "r1/1/1": 1, "r1/2/model": 1})
    assert desk.model.calls == 2


async def test_an_approval_wait_is_a_span_from_proposal_to_decision(
    spans: InMemorySpanExporter,
) -> None:
    desk = await opened([[("refund", {"amount": 5.0})], "refunded"])
    await desk.task()
    await desk.drain()
    await desk.decide(True, call_id="c0-0")
    await desk.drain()
    finished = spans.get_finished_spans()
    (wait,) = named(finished, "sluicegate.approval")
    assert parent_id(wait) == ROOT_ID
    a = attrs(wait)
    assert (a["gen_ai.tool.name"], a["sluicegate.approval.approved"]) == ("refund", True)
    assert (a["sluicegate.approval.by"], a["sluicegate.approval.kind"]) == ("ann", "call")
    (refund,) = named(finished, "execute_tool refund")
    assert attrs(refund)["sluicegate.tool.kind"] == "irreversible"


async def test_a_rollback_traces_its_compensations_and_its_span(
    spans: InMemorySpanExporter,
) -> None:
    desk = await booked()
    await desk.rollback(0)
    await desk.drain()
    await desk.approve()  # the payment: a person says it was handled
    await desk.drain()
    finished = spans.get_finished_spans()
    assert len(named(finished, "invoke_agent")) == 1  # the run ended once before its rollback
    (rollback,) = named(finished, "sluicegate.rollback")
    assert parent_id(rollback) == ROOT_ID
    assert attrs(rollback)["sluicegate.status"] == "rolled_back"
    compensations = named(finished, "sluicegate.compensate")
    assert compensations
    undo = named(finished, "execute_tool unhold")
    assert len(undo) == 2
    assert {parent_id(u) for u in undo} <= {c.context.span_id for c in compensations}
    assert all(attrs(w)["sluicegate.rollback"] for w in named(finished, "sluicegate.wake")[-2:])
    assert [s for s in finished if s.context.trace_id != TRACE_ID] == []


def _recording_look(seen: list[dict[str, str]]) -> Tool:
    @tool()
    async def look(ctx: ToolContext, x: int) -> dict[str, int]:
        seen.append(dict(ctx.trace_headers))
        return {"x": x}

    return look

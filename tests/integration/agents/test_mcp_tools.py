"""MCP servers' tools as tools of an agent, against a real MCP server process
(`tests/mcp_tool_server.py`, on the official SDK) over streamable HTTP and stdio.

The server records every call with the idempotency key its ``_meta`` carried: an agent's runs
on the real broker must have executed each write once, under the journal's key, and called
the destructive tool only after a person approved it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sluicegate import Agent, AgentTopics, add_agent
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.journal import effect_key
from sluicegate.agents.mcp import (
    IDEMPOTENCY_KEY_META,
    TRACE_META,
    McpServer,
    McpServerUnavailableError,
    McpToolKindError,
    Secret,
    mcp_server,
    mcp_stdio,
)
from sluicegate.agents.messages import TaskRequest
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.models.scripted import ScriptedModel
from sluicegate.agents.runs.state import RunState
from sluicegate.agents.tools import ToolContext, ToolKind
from sluicegate.agents.tracing import RunTracing, run_ids
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.demos.refund_desk.approver import Approver
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.storage import open_storage
from sluicegate.operators.tracing import start_tracing, stop_tracing, tracer
from sluicegate.testing import read_committed
from tests.mcp_processes import HttpMcpServer, ledger_lines, running_http_server, stdio_command

PARTITIONS = 2
KINDS = {"sync_contacts": ToolKind.IDEMPOTENT_WRITE}
TOKEN_ENV = "SLUICEGATE_TEST_MCP_TOKEN"


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "ledger.jsonl"


@pytest.fixture
def http_server(ledger: Path) -> Iterator[HttpMcpServer]:
    with running_http_server(ledger) as server:
        yield server


def source(transport: str, ledger: Path, http: HttpMcpServer | None) -> McpServer:
    if transport == "http":
        assert http is not None
        auth = Secret.env(TOKEN_ENV, prefix="Bearer ")
        return mcp_server(http.url, headers={"Authorization": auth}, kinds=KINDS, timeout_s=10)
    return mcp_stdio(stdio_command(ledger), kinds=KINDS, timeout_s=10)


@pytest.fixture(params=["http", "stdio"])
def transport(
    request: pytest.FixtureRequest, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, HttpMcpServer | None]]:
    monkeypatch.setenv(TOKEN_ENV, "t0ken")
    if request.param == "stdio":
        yield "stdio", None
        return
    with running_http_server(ledger) as server:
        yield "http", server


async def test_tools_are_listed_with_kinds_and_a_call_carries_its_key(
    transport: tuple[str, HttpMcpServer | None], ledger: Path
) -> None:
    name, http = transport
    server = source(name, ledger, http)
    await server.acquire()
    try:
        tools = {t.name: t for t in await server.tools()}
        assert {n: t.kind for n, t in tools.items()} == {
            "record_note": ToolKind.IDEMPOTENT_WRITE,
            "read_balance": ToolKind.READ_ONLY,
            "close_account": ToolKind.IRREVERSIBLE,
            "sync_contacts": ToolKind.IDEMPOTENT_WRITE,  # declared: it has no annotations
        }
        assert tools["close_account"].needs_approval
        assert tools["read_balance"].schema().parameters["required"] == ["account"]
        ctx = ToolContext("run-1", 1, "run-1/1/0")
        value = await tools["record_note"].call(ctx, {"account": "acc-1", "note": "hi"})
        assert "run-1/1/0" in json.dumps(value)
    finally:
        await server.release()
    (line,) = ledger_lines(ledger)
    assert (line["tool"], line["key"]) == ("record_note", "run-1/1/0")
    assert line["auth"] == ("Bearer t0ken" if name == "http" else None)
    assert (line["traceparent"], line["tracestate"]) == (None, None)  # tracing is off
    assert "t0ken" not in repr(server)


async def test_with_tracing_a_call_carries_its_tool_span_trace_context_in_meta(
    transport: tuple[str, HttpMcpServer | None], ledger: Path
) -> None:
    name, http = transport
    server = source(name, ledger, http)
    exporter = InMemorySpanExporter()
    provider = start_tracing(None, service="test", processor=SimpleSpanProcessor(exporter))
    assert provider is not None
    runs = RunTracing(tracer("sluicegate.agents"), pipeline="p", agent="desk", provider="scripted")
    state = RunState(run_id="run-1", goal="g", created_at=0.0, updated_at=0.0)
    await server.acquire()
    try:
        note = {t.name: t for t in await server.tools()}["record_note"]
        with (
            runs.wake(state, rollback=False),
            runs.tool_call(state, note, "run-1/1/0") as (
                _,
                headers,
            ),
        ):
            ctx = ToolContext.of_run("run-1", 1, "run-1/1/0", {}, headers)
            await note.call(ctx, {"account": "acc-1", "note": "hi"})
    finally:
        await server.release()
        stop_tracing()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool record_note"]
    trace_id, _ = run_ids("p", "desk", "run-1")
    assert span.context.trace_id == trace_id  # the run's trace
    (line,) = ledger_lines(ledger)
    assert line["traceparent"] == f"00-{trace_id:032x}-{span.context.span_id:016x}-01"
    assert line["tracestate"] is None  # the context has none: no entry
    assert line["key"] == "run-1/1/0"
    assert TRACE_META == ("traceparent", "tracestate")


async def test_an_unannotated_tool_without_a_kind_is_refused_by_name(ledger: Path) -> None:
    server = mcp_stdio(stdio_command(ledger), timeout_s=10)
    await server.acquire()
    try:
        with pytest.raises(McpToolKindError, match="sync_contacts") as raised:
            await server.tools()
    finally:
        await server.release()
    assert raised.value.tool == "sync_contacts"


async def test_a_server_that_is_down_is_retryable_and_reconnected(
    http_server: HttpMcpServer, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "t0ken")
    server = source("http", ledger, http_server)
    await server.acquire()
    try:
        read = {t.name: t for t in await server.tools()}["read_balance"]
        http_server.kill()
        with pytest.raises(McpServerUnavailableError):
            await read.call(ToolContext("r", 1, "r/1/0"), {"account": "a"})
        http_server.start()
        assert "42.00" in json.dumps(
            await read.call(ToolContext("r", 1, "r/1/1"), {"account": "a"})
        )
    finally:
        await server.release()
    assert [line["key"] for line in ledger_lines(ledger)] == ["r/1/1"]


# -- an agent on the real broker ------------------------------------------------------------


def policy(messages: Sequence[ChatMessage]) -> ChatMessage:
    """Read the balance and note it, sync the contacts, close the account, answer."""
    account = next(m.content for m in messages if m.role == "user") or ""
    results = [m for m in messages if m.role == "tool"]
    step = len(results)
    args = json.dumps({"account": account})

    def calls(*names: str) -> ChatMessage:
        made = []
        for i, tool in enumerate(names):
            arguments = args
            if tool == "record_note":
                arguments = json.dumps({"account": account, "note": "balance read"})
            made.append(ToolCall(id=f"c{step}-{i}", name=tool, arguments=arguments))
        return ChatMessage(role="assistant", tool_calls=tuple(made))

    if step == 0:
        return calls("read_balance", "record_note")
    if step == 2:
        return calls("sync_contacts")
    if step == 3:
        return calls("close_account")
    return ChatMessage(role="assistant", content=f"done: {results[-1].content}")


@contextlib.asynccontextmanager
async def approving(bootstrap: str, topics: AgentTopics) -> AsyncIterator[Approver]:
    approver = Approver(
        bootstrap, events=topics.events, approvals=topics.approvals, partitions=PARTITIONS
    )
    task = asyncio.create_task(approver.run())
    try:
        yield approver
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_agent_calls_mcp_tools_through_the_journal(
    kafka_bootstrap: str,
    tmp_path: Path,
    ledger: Path,
    transport: tuple[str, HttpMcpServer | None],
) -> None:
    name, http = transport
    tag = uuid.uuid4().hex[:8]
    agent = Agent(
        "accounts", model=ScriptedModel(policy), tools=[source(name, ledger, http)],
        instructions="Keep the books.",
    )  # fmt: skip
    p = Pipeline(f"mcp-{tag}")
    topics = AgentTopics.named(f"accounts-{tag}")
    add_agent(p, agent, partitions=PARTITIONS, parallelism=1, topics=topics)
    job = LocalJob(
        p.build(), bootstrap=kafka_bootstrap, storage=open_storage(tmp_path / "storage"),
        work_dir=tmp_path / "work", settings=CoordinatorSettings(interval_seconds=0.3),
    )  # fmt: skip
    runs = [f"run-{i}" for i in range(3)]
    await job.start()
    try:
        async with approving(kafka_bootstrap, topics) as approver:
            tasks = [TaskRequest(run_id=r, goal=f"acc-{r}") for r in runs]
            await submit_tasks(kafka_bootstrap, topics.tasks, tasks)
            results = await read_committed(kafka_bootstrap, topics.results, len(runs), timeout_s=90)
    finally:
        await job.crash()

    assert Counter(json.loads(r.value)["status"] for r in results) == {"done": len(runs)}
    lines = ledger_lines(ledger)
    by_tool = Counter(line["tool"] for line in lines)
    assert by_tool == {t: len(runs) for t in ("read_balance", "record_note", "sync_contacts",
                                              "close_account")}  # fmt: skip
    keys = [line["key"] for line in lines if line["tool"] != "read_balance"]
    assert len(set(keys)) == len(keys)  # every write executed once
    for run in runs:  # under the journal's keys: (run, step, call index)
        assert effect_key(run, 1, 1) in keys  # record_note, the second call of step 1
        assert effect_key(run, 2, 0) in keys  # sync_contacts
        assert effect_key(run, 3, 0) in keys  # close_account
    assert approver.approved == len(runs)  # each close_account waited for a person
    assert IDEMPOTENCY_KEY_META == "sluicegate/idempotency-key"

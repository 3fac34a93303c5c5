"""Traces of agent runs in a real OTLP receiver: Jaeger all-in-one (built by .ci/install-jaeger),
read back through Jaeger's own query API (``GET /api/traces/<trace id>``).

A run on the real broker, with no checkpoint completed, is driven to its end; the job is
crashed and started again, so the new attempt re-drives the run from its task and the journal
answers every call. The run's trace must then hold each call executed once and replayed once,
under one root, in the trace derived from the run's id, and each tool must have been given the
``traceparent`` of its own span. A checkpoint is then taken: its trace holds the coordinator's
span and, under it, each subtask's part of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sluicegate import Agent, AgentTopics, Pipeline, ToolContext, ToolKind, add_agent, tool
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.messages import TaskRequest
from sluicegate.agents.models import ScriptedModel
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.tracing import run_ids
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators import tracing
from sluicegate.operators.storage import open_storage
from sluicegate.operators.tracing import checkpoint_ids
from sluicegate.testing import read_committed
from tests.helpers import wait_for, wait_for_sync

JAEGER_VERSION = "v1.75.0"
SUBTASK_PART = "sluicegate.checkpoint.subtask"

CONFIG = """\
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{grpc}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""
"""All-in-one's own configuration cut to what the test needs, on free ports: OTLP/HTTP in,
memory storage, the query API (its UI is not in a binary built from the Go module)."""


@dataclass(frozen=True)
class Jaeger:
    otlp: str
    query: str

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.query + path, timeout=5) as response:
            return json.load(response)


def _binary() -> Path:
    cache = Path(os.environ.get("SLUICEGATE_CACHE", Path.home() / ".cache/sluicegate"))
    path = cache / f"jaeger-{JAEGER_VERSION}" / "jaeger"
    if not path.exists():
        message = f"{path} not found: run .ci/install-jaeger"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must run this test)", pytrace=False)
        pytest.skip(message)
    return path


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@pytest.fixture
def jaeger(tmp_path: Path) -> Iterator[Jaeger]:
    otlp, query, grpc = _free_ports(3)
    config = tmp_path / "jaeger.yaml"
    config.write_text(CONFIG.format(otlp=otlp, query=query, grpc=grpc))
    log = tmp_path / "jaeger.log"
    env = {**os.environ, "OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "none"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(_binary()), f"--config=file:{config}"], stdout=out, stderr=out, env=env
        )
    server = Jaeger(f"http://127.0.0.1:{otlp}", f"http://127.0.0.1:{query}")

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"jaeger exited: {log.read_text()[-2000:]}")
        try:
            return server.get("/api/services") is not None
        except OSError:
            return False

    try:
        wait_for_sync(ready, timeout_s=30, what="jaeger's query API")
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def lookup_agent(seen_headers: list[dict[str, str]]) -> Agent:
    """Looks two orders up (read-only), tags the run (an idempotent write: a journaled effect),
    then answers; the tools keep the trace headers they were given."""

    @tool()
    async def look(ctx: ToolContext, order: str) -> dict[str, str]:
        seen_headers.append(dict(ctx.trace_headers))
        return {"order": order, "state": "paid"}

    @tool(kind=ToolKind.IDEMPOTENT_WRITE)
    async def tag(ctx: ToolContext, label: str) -> str:
        seen_headers.append(dict(ctx.trace_headers))
        return f"tagged {label}"

    def policy(messages: Sequence[ChatMessage]) -> ChatMessage:
        step = sum(1 for m in messages if m.role == "assistant")
        calls: tuple[tuple[str, dict[str, str]], ...]
        if step == 0:
            calls = (("look", {"order": "o1"}), ("look", {"order": "o2"}))
        elif step == 1:
            calls = (("tag", {"label": "checked"}),)
        else:
            return ChatMessage(role="assistant", content="both paid")
        return ChatMessage(role="assistant", tool_calls=tuple(
            ToolCall(id=f"c{step}-{i}", name=name, arguments=json.dumps(arguments))
            for i, (name, arguments) in enumerate(calls)
        ))  # fmt: skip

    return Agent("looker", ScriptedModel(policy), [look, tag], "Check the orders.")


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span["tags"]}


def parent(span: dict[str, Any]) -> str | None:
    refs = [r["spanID"] for r in span["references"] if r["refType"] == "CHILD_OF"]
    return refs[0] if refs else None


async def test_a_runs_trace_in_jaeger_holds_each_call_once_and_its_replays_marked(
    kafka_bootstrap: str, tmp_path: Path, jaeger: Jaeger
) -> None:
    tag = uuid.uuid4().hex[:8]
    headers: list[dict[str, str]] = []
    pipeline = Pipeline(f"traced-{tag}")
    topics = AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip
    add_agent(pipeline, lookup_agent(headers), partitions=2, topics=topics)
    graph = pipeline.build()
    storage = open_storage(tmp_path / "storage")
    service = f"sluicegate-test-{tag}"
    provider = tracing.start_tracing(jaeger.otlp, service=service)
    assert provider is not None
    trace_number, root_number = run_ids(graph.name, "looker", "r1")
    trace_id, root_id = f"{trace_number:032x}", f"{root_number:016x}"

    def job() -> LocalJob:
        return LocalJob(
            graph, bootstrap=kafka_bootstrap, storage=storage, work_dir=tmp_path / "work",
            settings=CoordinatorSettings(periodic_checkpoints=False),
        )  # fmt: skip

    seen: list[list[dict[str, Any]]] = [[]]

    async def spans() -> list[dict[str, Any]]:
        await asyncio.to_thread(provider.force_flush)
        try:
            found = await asyncio.to_thread(jaeger.get, f"/api/traces/{trace_id}")
        except OSError:  # 404 until the first span of the trace arrives
            return []
        seen[0] = [s for t in found["data"] or [] for s in t["spans"]]
        return seen[0]

    def details() -> str:
        names = Counter((s["operationName"], tags(s).get("sluicegate.replayed")) for s in seen[0])
        return f"spans in the run's trace: {dict(names)}"

    def replayed(found: list[dict[str, Any]]) -> int:
        return sum(1 for s in found if tags(s).get("sluicegate.replayed") is True)

    async def ended() -> list[dict[str, Any]]:
        found = await spans()
        return found if any(s["spanID"] == root_id for s in found) else []

    try:
        running = job()
        await running.start()
        await submit_tasks(kafka_bootstrap, topics.tasks, [TaskRequest(run_id="r1", goal="o1 o2")])
        first = await wait_for(
            ended, timeout_s=60, what="the run's root span in jaeger", details=details
        )
        assert replayed(first) == 0
        calls = sum(1 for s in first if s["operationName"].startswith(("chat", "execute")))
        await running.crash()  # no checkpoint completed: the new attempt starts over
        running = job()
        await running.start()

        async def replays() -> list[dict[str, Any]]:
            found = await spans()
            return found if replayed(found) >= calls else []

        found = await wait_for(
            replays, timeout_s=60, what="the replayed calls in jaeger", details=details
        )
        checkpoint_id = await running.trigger_checkpoint()
        assert checkpoint_id is not None
        (result,) = await read_committed(kafka_bootstrap, topics.results, 1, timeout_s=60)

        async def checkpoint() -> list[dict[str, Any]]:
            await asyncio.to_thread(provider.force_flush)
            query = f"/api/traces?service={service}&operation=sluicegate.checkpoint"
            found = await asyncio.to_thread(jaeger.get, query)
            traces = [t["spans"] for t in found["data"] or []]
            # the subtasks' parts land in the same trace, emitted by the worker after its ack
            parts = [s for t in traces for s in t if s["operationName"] == SUBTASK_PART]
            return traces if parts else []

        (checkpoint_spans,) = await wait_for(
            checkpoint, timeout_s=30, what="the checkpoint's trace in jaeger"
        )
        await running.crash()
    finally:
        tracing.stop_tracing()

    assert (json.loads(result.value)["status"], json.loads(result.value)["steps"]) == ("done", 3)
    # The coordinator's span of the checkpoint: trigger to commit, the manifest's write inside.
    by_op = {s["operationName"]: s for s in checkpoint_spans}
    assert set(by_op) == {"sluicegate.checkpoint", "sluicegate.checkpoint.commit", SUBTASK_PART,
                          *(f"sluicegate.checkpoint.{p}" for p in ("alignment", "sync", "upload",
                                                                   "ack"))}  # fmt: skip
    checkpoint_span = by_op["sluicegate.checkpoint"]
    assert parent(by_op["sluicegate.checkpoint.commit"]) == checkpoint_span["spanID"]
    assert tags(checkpoint_span)["sluicegate.checkpoint.id"] == checkpoint_id
    # Its ids derived from (pipeline, checkpoint, attempt), as the subtasks derived them: their
    # parts are children of the coordinator's span, with no trace context on the wire.
    attempt = tags(checkpoint_span)["sluicegate.attempt"]
    derived_trace, derived_span = checkpoint_ids(graph.name, checkpoint_id, attempt)
    assert (checkpoint_span["traceID"], checkpoint_span["spanID"]) == (
        f"{derived_trace:032x}", f"{derived_span:016x}",
    )  # fmt: skip
    parts = [s for s in checkpoint_spans if s["operationName"] == SUBTASK_PART]
    assert {parent(s) for s in parts} == {checkpoint_span["spanID"]}
    assert {tags(s)["sluicegate.checkpoint.id"] for s in parts} == {checkpoint_id}
    assert {s["traceID"] for s in found} == {trace_id}
    by_name = Counter(s["operationName"] for s in found)
    # One root: the run's end was replayed the second time, which emits no second root.
    assert by_name["invoke_agent looker"] == 1
    (root,) = [s for s in found if s["spanID"] == root_id]
    assert parent(root) is None
    assert (tags(root)["sluicegate.status"], tags(root)["sluicegate.steps"]) == ("done", 3)
    assert tags(root)["gen_ai.operation.name"] == "invoke_agent"
    wakes = {s["spanID"] for s in found if s["operationName"] == "sluicegate.wake"}
    assert {parent(s) for s in found if s["spanID"] in wakes} == {root_id}
    calls_found = [s for s in found if s["operationName"].startswith(("chat ", "execute_tool "))]
    assert {parent(s) for s in calls_found} <= wakes
    executed = [s for s in calls_found if tags(s)["sluicegate.replayed"] is False]
    replays_found = [s for s in calls_found if tags(s)["sluicegate.replayed"] is True]
    # Each call was made once; the second attempt's are all journal answers, never a 2nd call.
    keys = Counter(tags(s)["sluicegate.effect.key"] for s in executed)
    assert keys == Counter(["r1/1/model", "r1/1/0", "r1/1/1", "r1/2/model", "r1/2/0", "r1/3/model"])
    assert Counter(tags(s)["sluicegate.effect.key"] for s in replays_found) == keys
    for model in (s for s in calls_found if s["operationName"] == "chat model"):
        attrs = tags(model)
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "scripted"
        assert attrs["gen_ai.request.model"] == "model"
        assert ("gen_ai.usage.input_tokens" in attrs) is (attrs["sluicegate.replayed"] is False)
    kinds = {
        (s["operationName"], tags(s)["sluicegate.tool.kind"], tags(s)["sluicegate.tool.outcome"])
        for s in calls_found
        if s["operationName"].startswith("execute_tool")
    }
    assert kinds == {
        ("execute_tool look", "read_only", "ok"),
        ("execute_tool tag", "idempotent_write", "ok"),
    }
    # The tools were called once each (the replays called nothing), with their span's context.
    tool_spans = {tags(s)["sluicegate.effect.key"]: s["spanID"] for s in executed
                  if s["operationName"].startswith("execute_tool")}  # fmt: skip
    assert sorted(h["traceparent"] for h in headers) == sorted(
        f"00-{trace_id}-{span_id}-01" for span_id in tool_spans.values()
    )

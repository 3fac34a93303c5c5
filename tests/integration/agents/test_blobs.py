"""Payloads by reference on the real engine: a `LocalJob` on the real broker, real RocksDB and
a real local storage directory, a tool returning 1 MiB.

* the payload is written once although the job crashes right after writing it (before the
  journal's ``done``), and the journal topic, the events topic, the checkpoint files and the
  local RocksDB files hold only the handle;
* ``sluicegate blobs erase --subject S`` (the real command, a process of its own) while runs
  wait for a person: resumed from their checkpoint, the erased subject's run sees
  ``blob_unavailable`` (erased) and finishes; another subject's run still reads its payload;
* a run resumed after its blob expired (and ``sluicegate blobs gc`` deleted it) sees
  ``blob_unavailable`` (expired) and finishes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition

from sluicegate import Agent, AgentTopics, add_agent
from sluicegate.agents.blobs import BlobPolicy, handle_of
from sluicegate.agents.client import send_decision, submit_tasks
from sluicegate.agents.journal import JournalEntry
from sluicegate.agents.messages import ApprovalDecision, TaskRequest
from sluicegate.agents.models import ScriptedModel
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.tools import ToolContext, ToolKind, tool
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.kafka import KafkaLike
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.operators.storage import Storage, StoredFile, open_storage
from sluicegate.operators.storage.blobs import BlobStore, subject_digest
from sluicegate.testing import read_committed
from tests.storage_wrappers import DelegatingStorage

PARTITIONS = 2
SIZE = 1 << 20


def payload_of(tag: str) -> str:
    """1 MiB that no compression shrinks much, starting with a sentinel to look for."""
    noise = base64.b64encode(random.Random(tag).randbytes(SIZE)).decode()
    return (f"SENTINEL-{tag}-" + noise)[:SIZE]


def bulk_agent(tag: str, *, approval: bool, ttl_s: float | None = None) -> Agent:
    """fetch (1 MiB) -> [send, needing a person's approval] -> an answer saying what the model
    was shown of fetch's result: ``payload`` (all of it), ``marker (reason)`` or ``other``."""
    payload = payload_of(tag)
    expected = json.dumps(payload)

    @tool()
    async def fetch(ctx: ToolContext, page: int) -> str:
        return payload

    @tool(kind=ToolKind.IRREVERSIBLE)
    async def send(ctx: ToolContext, to: str) -> str:
        return f"sent to {to}"

    def policy(messages: Sequence[ChatMessage]) -> ChatMessage:
        results = [m.content or "" for m in messages if m.role == "tool"]
        if not results:
            return _call("fetch", {"page": 1})
        if approval and len(results) == 1:
            return _call("send", {"to": "ops"})
        seen = results[0]
        if seen == expected:
            return ChatMessage(role="assistant", content="saw payload")
        if seen.startswith("[payload unavailable ("):
            reason = seen.removeprefix("[payload unavailable (").split(")")[0]
            return ChatMessage(role="assistant", content=f"saw marker ({reason})")
        return ChatMessage(role="assistant", content=f"saw other: {seen[:200]}")

    tools = [fetch, send] if approval else [fetch]
    blobs = BlobPolicy(ttl_s=ttl_s)
    return Agent("bulk", ScriptedModel(policy), tools, "Fetch.", blobs=blobs)


def _call(name: str, arguments: dict[str, Any]) -> ChatMessage:
    call = ToolCall(id=f"call-{name}", name=name, arguments=json.dumps(arguments))
    return ChatMessage(role="assistant", tool_calls=(call,))


def bulk_graph(agent: Agent, tag: str) -> tuple[JobGraph, AgentTopics]:
    p = Pipeline(f"bulk-{tag}")
    topics = AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip
    add_agent(p, agent, partitions=PARTITIONS, topics=topics)
    return p.build(), topics


def local_job(graph: JobGraph, bootstrap: str, storage: Storage, work: Path) -> LocalJob:
    return LocalJob(
        graph,
        bootstrap=bootstrap,
        storage=storage,
        work_dir=work,
        settings=CoordinatorSettings(interval_seconds=0.3),
    )


async def all_records(bootstrap: KafkaLike, topic: str, partitions: int) -> list[bytes]:
    """Every committed record value of ``topic`` up to its end now."""
    async with committed_from_start(bootstrap, topic, partitions) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        end = await consumer.end_offsets(tps)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
            assert time.monotonic() < deadline, f"{topic} not read to its end in time"
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                values.extend(r.value or b"" for r in batch)
        return values


async def wait_for_events(
    bootstrap: str, topic: str, wanted: Callable[[list[dict[str, Any]]], bool], timeout_s: float
) -> list[dict[str, Any]]:
    """The committed events once ``wanted`` holds of them (they are published when the
    checkpoint holding their state completed)."""
    deadline = time.monotonic() + timeout_s
    events: list[dict[str, Any]] = []
    async with committed_from_start(bootstrap, topic, PARTITIONS) as consumer:
        while not wanted(events):
            assert time.monotonic() < deadline, f"events never matched: {events}"
            for batch in (await consumer.getmany(timeout_ms=300)).values():
                events.extend(json.loads(r.value or b"{}") for r in batch)
    return events


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()]


def sluicegate(*args: str) -> str:
    """Run the real ``sluicegate`` command; its output."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "sluicegate"), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


class CrashAfterPayload(DelegatingStorage):
    """The job's storage, on a real directory; the first payload written under ``blobs/``
    is stored, then the write never returns (the job is crashed there, before the journal's
    ``done``). ``payload_puts`` counts the payloads written."""

    def __init__(self, inner: Storage) -> None:
        super().__init__(inner)
        self.payload_puts = 0
        self.written = asyncio.Event()

    async def put(self, path: str, data: bytes) -> StoredFile:
        stored = await self.inner.put(path, data)
        if path.startswith("blobs/") and not path.endswith(".meta"):
            self.payload_puts += 1
            if not self.written.is_set():
                self.written.set()
                await asyncio.Event().wait()  # until the crash cancels it
        return stored


async def test_a_large_result_is_written_once_across_a_crash_and_only_its_handle_is_kept(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    payload = payload_of(tag)
    graph, topics = bulk_graph(bulk_agent(tag, approval=False), tag)
    root, work = tmp_path / "storage", tmp_path / "work"
    storage = CrashAfterPayload(open_storage(root))
    job = local_job(graph, kafka_bootstrap, storage, work)
    await job.start()
    try:
        task = TaskRequest(run_id="r1", goal="fetch", metadata={"subject": "alice"})
        await submit_tasks(kafka_bootstrap, topics.tasks, [task])
        await asyncio.wait_for(storage.written.wait(), timeout=60)
    finally:
        await job.crash()  # the payload is stored; the journal has no done for it
    job = local_job(graph, kafka_bootstrap, storage, work)
    await job.start()
    try:
        (record,) = await read_committed(kafka_bootstrap, topics.results, 1, timeout_s=60)
        await job.wait_for_checkpoints(job.completed + 2, timeout_s=60)
    finally:
        await job.crash()

    result = json.loads(record.value)
    assert (result["status"], result["answer"]) == ("done", "saw payload")
    assert storage.payload_puts == 1  # the retry found it stored: written once
    listed = await BlobStore(storage.inner).list(subject_digest("alice"))
    assert [b.meta.size for b in listed if b.meta] == [len(json.dumps(payload))]

    sentinel = payload[:40].encode()
    journal_topic = graph.operators["bulk"].owned_topic_name(graph.name, "journal")
    journal = await all_records(kafka_bootstrap, journal_topic, PARTITIONS)
    entries = [JournalEntry.decode(v) for v in journal if v]
    (fetched,) = [e for e in entries if e.name == "fetch" and e.status == "done"]
    handle = handle_of(fetched.result)
    assert handle is not None
    assert handle.size == len(json.dumps(payload))
    assert all(sentinel not in v and len(v) < 4096 for v in journal)
    events = await all_records(kafka_bootstrap, topics.events, PARTITIONS)
    assert events
    assert all(sentinel not in v for v in events)
    # Checkpoint storage (shared/, checkpoints/) and the local RocksDB files: only the handle.
    state_files = [p for p in files_under(root, work) if "blobs" not in p.parts]
    assert any(p.parent.name == "shared" for p in state_files)
    assert all(sentinel not in p.read_bytes() for p in state_files)
    checkpoint_bytes = sum(
        p.stat().st_size for p in files_under(root / "checkpoints", root / "shared")
    )
    assert checkpoint_bytes < SIZE // 2, checkpoint_bytes


async def park_two_runs(
    bootstrap: str, graph: JobGraph, topics: AgentTopics, storage: Storage, work: Path
) -> None:
    """Runs of subjects alice and bob fetch, then wait for a person; the checkpoint holding
    that is complete (their events are published); then the job crashes."""
    job = local_job(graph, bootstrap, storage, work)
    await job.start()
    try:
        tasks = [
            TaskRequest(run_id=f"run-{s}", goal="fetch", metadata={"subject": s})
            for s in ("alice", "bob")
        ]
        await submit_tasks(bootstrap, topics.tasks, tasks)

        def both_wait(events: list[dict[str, Any]]) -> bool:
            return {e["run_id"] for e in events if e["type"] == "approval_requested"} == {
                "run-alice", "run-bob"
            }  # fmt: skip

        await wait_for_events(bootstrap, topics.events, both_wait, timeout_s=90)
    finally:
        await job.crash()


async def resume_and_approve(
    bootstrap: str, graph: JobGraph, topics: AgentTopics, storage: Storage, work: Path
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Restore from the checkpoint, approve both runs; their results and the events."""
    job = local_job(graph, bootstrap, storage, work)
    await job.start()
    try:
        assert job.restored_from is not None  # resumed from a checkpoint, not replayed
        for run in ("run-alice", "run-bob"):
            decision = ApprovalDecision(run_id=run, approved=True, by="test")
            await send_decision(bootstrap, topics.approvals, decision)
        records = await read_committed(bootstrap, topics.results, 2, timeout_s=90)
        events = await all_records(bootstrap, topics.events, PARTITIONS)
    finally:
        await job.crash()
    results = {json.loads(r.value)["run_id"]: json.loads(r.value) for r in records}
    return results, [json.loads(v) for v in events]


async def test_an_erased_subject_is_a_condition_its_resumed_run_sees_and_goes_on_from(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph, topics = bulk_graph(bulk_agent(tag, approval=True), tag)
    root, work = tmp_path / "storage", tmp_path / "work"
    storage = open_storage(root)
    await park_two_runs(kafka_bootstrap, graph, topics, storage, work)
    snapshots_before = {
        p: p.read_bytes() for p in files_under(root / "checkpoints", root / "shared")
    }

    out = sluicegate("blobs", "erase", "--subject", "alice", "--storage", str(root))
    assert "2 files deleted" in out
    assert await BlobStore(storage).list(subject_digest("alice")) == []
    assert len(await BlobStore(storage).list(subject_digest("bob"))) == 1
    # Erasure rewrote no snapshot file.
    assert {p: p.read_bytes() for p in snapshots_before} == snapshots_before

    results, events = await resume_and_approve(kafka_bootstrap, graph, topics, storage, work)
    assert results["run-alice"]["status"] == "done"
    assert results["run-alice"]["answer"] == "saw marker (erased)"
    assert results["run-bob"]["answer"] == "saw payload"
    lost = [e for e in events if e["type"] == "blob_unavailable"]
    assert [(e["run_id"], e["reason"]) for e in lost] == [("run-alice", "erased")]


async def test_a_run_resumed_after_its_blob_expired_sees_it_and_goes_on(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    ttl_s = 6.0
    graph, topics = bulk_graph(bulk_agent(tag, approval=True, ttl_s=ttl_s), tag)
    root, work = tmp_path / "storage", tmp_path / "work"
    storage = open_storage(root)
    await park_two_runs(kafka_bootstrap, graph, topics, storage, work)
    stored = await BlobStore(storage).list()
    expiries = [b.meta.expires_at for b in stored if b.meta]
    assert len(expiries) == 2
    assert all(e is not None for e in expiries)
    latest = max(e for e in expiries if e is not None)
    deadline = time.monotonic() + ttl_s + 30
    while time.time() < latest:  # a condition on the clock, with a deadline
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)

    report = json.loads(sluicegate("blobs", "gc", "--json", "--storage", str(root)))
    assert (report["deleted"], report["invalid"]) == (2, 0)

    results, events = await resume_and_approve(kafka_bootstrap, graph, topics, storage, work)
    assert {r["answer"] for r in results.values()} == {"saw marker (expired)"}
    assert {r["status"] for r in results.values()} == {"done"}
    lost = sorted((e["run_id"], e["reason"]) for e in events if e["type"] == "blob_unavailable")
    assert lost == [("run-alice", "expired"), ("run-bob", "expired")]

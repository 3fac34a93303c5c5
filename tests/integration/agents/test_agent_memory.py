"""Memory per key on the real broker: what a run remembers a later run of the key sees and
another key does not; concurrent runs of one key lose no update; memory survives crashes
and restores; a savepoint restored at another parallelism (2 -> 3 -> 1) keeps every key's
memory; an erased key's entries are seen by no later run."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections import Counter
from pathlib import Path

import pytest

from sluicegate.agents.client import submit_tasks
from sluicegate.agents.messages import RunResult, TaskRequest
from sluicegate.cli.main import _parser
from sluicegate.coordinator.httpapi.client import CoordinatorClient
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.blobs import BlobMeta, BlobStore, subject_digest
from sluicegate.testing import read_committed
from tests.helpers import wait_for
from tests.jobs import Job, running
from tests.memory_agent import memory_graph, seen, seen_ids, task


async def results(bootstrap: str, topic: str, count: int) -> dict[str, RunResult]:
    """Every result on ``topic`` once ``count`` are there, by run (each run exactly once)."""
    records = await read_committed(bootstrap, topic, count, timeout_s=120)
    parsed = [RunResult.model_validate_json(r.value) for r in records]
    by_run = Counter(r.run_id for r in parsed)
    assert max(by_run.values()) == 1, by_run.most_common(3)
    return {r.run_id: r for r in parsed}


async def test_later_runs_of_a_key_see_its_memory_and_concurrent_runs_lose_no_update(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph, topics = memory_graph(tag, parallelism=2, latency_s=0.01)
    job = LocalJob(
        graph, bootstrap=kafka_bootstrap, storage=open_storage(tmp_path / "storage"),
        work_dir=tmp_path / "work", settings=CoordinatorSettings(interval_seconds=0.5),
    )  # fmt: skip
    await job.start()
    try:
        # Ten runs of c-a at once (interleaved in one subtask), three of c-b.
        writes = [task(f"a-{i}", f"remember: a fact {i}", "c-a") for i in range(10)]
        writes += [task(f"b-{i}", f"remember: b fact {i}", "c-b") for i in range(3)]
        await submit_tasks(kafka_bootstrap, topics.tasks, writes)
        await results(kafka_bootstrap, topics.results, len(writes))
        reads = [task("a-read", "what do we know?", "c-a"), task("b-read", "and?", "c-b")]
        reads.append(task("c-read", "anything?", "c-c"))
        await submit_tasks(kafka_bootstrap, topics.tasks, reads)
        done = await results(kafka_bootstrap, topics.results, len(writes) + len(reads))
    finally:
        await job.crash()
    a_seen = seen(done["a-read"].answer)
    assert sorted(a_seen) == [f"a fact {i}" for i in range(10)]
    assert sorted(seen_ids(done["a-read"].answer)) == sorted(f"c-a#{i}" for i in range(10))
    assert sorted(seen(done["b-read"].answer)) == [f"b fact {i}" for i in range(3)]
    assert done["c-read"].answer == "no memory"
    # A writing run's answer comes after its own write: it sees at least its own entry.
    for i in range(10):
        assert f"a fact {i}" in seen(done[f"a-{i}"].answer)


async def test_memory_survives_crashes_and_restores_with_each_entry_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph, topics = memory_graph(tag, parallelism=2, latency_s=0.05)
    storage = open_storage(tmp_path / "storage")

    def job() -> LocalJob:
        return LocalJob(
            graph, bootstrap=kafka_bootstrap, storage=storage, work_dir=tmp_path / "work",
            settings=CoordinatorSettings(interval_seconds=0.3),
        )  # fmt: skip

    keys = [f"c-{k}" for k in range(6)]
    writes = [
        task(f"w-{k}-{i}", f"remember: {k}/{i}", f"c-{k}") for i in range(5) for k in range(6)
    ]
    running_job = job()
    await running_job.start()
    await submit_tasks(kafka_bootstrap, topics.tasks, writes[:15])
    for crash in range(3):
        await running_job.wait_for_checkpoints(2 + crash, timeout_s=60)
        await running_job.crash()
        if crash == 1:
            await submit_tasks(kafka_bootstrap, topics.tasks, writes[15:])
        running_job = job()
        await running_job.start()
    await results(kafka_bootstrap, topics.results, len(writes))
    await running_job.crash()  # and once more between runs
    running_job = job()
    await running_job.start()
    try:
        reads = [task(f"r-{key}", "recall", key) for key in keys]
        await submit_tasks(kafka_bootstrap, topics.tasks, reads)
        done = await results(kafka_bootstrap, topics.results, len(writes) + len(reads))
    finally:
        await running_job.crash()
    for k, key in enumerate(keys):
        assert sorted(seen(done[f"r-{key}"].answer)) == [f"{k}/{i}" for i in range(5)], key
        assert sorted(seen_ids(done[f"r-{key}"].answer)) == [f"{key}#{i}" for i in range(5)]


async def test_a_savepoint_restored_at_3_then_at_1_keeps_every_key_s_memory(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    storage = open_storage(tmp_path / "storage")
    keys = [f"c-{k}" for k in range(12)]
    sent = 0

    async def send(*batch: TaskRequest) -> None:
        nonlocal sent
        sent += len(batch)
        await submit_tasks(kafka_bootstrap, topics.tasks, batch)

    async def stop_with_savepoint(job: Job, name: str) -> None:
        await asyncio.to_thread(CoordinatorClient(job.url).create_savepoint, name, stop=True)
        await asyncio.wait_for(job.task, 60)

    graph, topics = memory_graph(tag, parallelism=2)
    await ensure_topics(kafka_bootstrap, graph)
    async with running(graph, storage, kafka_bootstrap, tmp_path / "w2") as job:
        await send(*(task(f"one-{key}", f"remember: {key} first", key) for key in keys))
        await results(kafka_bootstrap, topics.results, sent)
        await stop_with_savepoint(job, "at-2")

    graph, topics = memory_graph(tag, parallelism=3)
    async with running(graph, storage, kafka_bootstrap, tmp_path / "w3",
                       from_savepoint="at-2") as job:  # fmt: skip
        await wait_for(lambda: job.coordinator.facts().assign, timeout_s=30, what="assignment")
        await send(*(task(f"two-{key}", f"remember: {key} second", key) for key in keys))
        done = await results(kafka_bootstrap, topics.results, sent)
        for key in keys:  # each second run saw the first entry, restored at parallelism 3
            assert seen(done[f"two-{key}"].answer) == [f"{key} first", f"{key} second"]
        await stop_with_savepoint(job, "at-3")

    graph, topics = memory_graph(tag, parallelism=1)
    async with running(graph, storage, kafka_bootstrap, tmp_path / "w1",
                       from_savepoint="at-3") as job:  # fmt: skip
        await send(*(task(f"three-{key}", "recall", key) for key in keys))
        done = await results(kafka_bootstrap, topics.results, sent)
    for key in keys:
        assert seen(done[f"three-{key}"].answer) == [f"{key} first", f"{key} second"]


def sluicegate(*argv: str) -> int:
    args = _parser().parse_args(list(argv))
    code: int = args.run(args)
    return code


async def test_an_erased_key_is_seen_by_no_later_run(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph, topics = memory_graph(tag, parallelism=2)
    storage = open_storage(tmp_path / "storage")
    where = ["--agent", "keeper", "--storage", (tmp_path / "storage").as_uri()]

    def job() -> LocalJob:
        return LocalJob(
            graph, bootstrap=kafka_bootstrap, storage=storage, work_dir=tmp_path / "work",
            settings=CoordinatorSettings(interval_seconds=0.3),
        )  # fmt: skip

    async def checkpoints_after_now(count: int) -> None:
        completed = running_job.completed
        await wait_for(
            lambda: running_job.completed >= completed + count or None, timeout_s=30,
            what=f"{count} more checkpoints",
        )  # fmt: skip

    running_job = job()
    await running_job.start()
    try:
        writes = [task("w-x", "remember: card 4242", "c-x"), task("w-y", "remember: kept", "c-y")]
        await submit_tasks(kafka_bootstrap, topics.tasks, writes)
        await results(kafka_bootstrap, topics.results, 2)
        await checkpoints_after_now(2)
        capsys.readouterr()
        assert await asyncio.to_thread(sluicegate, "memory", "list", "--json", *where) == 0
        listed = json.loads(capsys.readouterr().out)
        assert {k: v["entries"] for k, v in listed["keys"].items()} == {"c-x": 1, "c-y": 1}
        assert await asyncio.to_thread(sluicegate, "memory", "show", "--key", "c-x", *where) == 0
        assert "card 4242" in capsys.readouterr().out
        erase = ["memory", "erase", "--key", "c-x", "--agent", "keeper", "--by", "dpo"]
        erase += ["--topic", topics.approvals, "--bootstrap", kafka_bootstrap]
        erase += ["--subject", "c-x", "--storage", (tmp_path / "storage").as_uri()]
        blobs, payload = BlobStore(storage), b"card 4242 receipt"
        meta = BlobMeta(
            id=uuid.uuid4().hex, subject=subject_digest("c-x"), scope="keeper",
            size=len(payload), sha256=hashlib.sha256(payload).hexdigest(), created_at=0.0,
        )  # fmt: skip
        await blobs.put(meta, payload)
        assert await blobs.storage.exists(meta.path)
        assert await asyncio.to_thread(sluicegate, *erase) == 0
        assert "erased the blobs of subject 'c-x': 2 files deleted" in capsys.readouterr().out
        assert not await blobs.storage.exists(meta.path)
        await checkpoints_after_now(2)
        capsys.readouterr()
        assert await asyncio.to_thread(sluicegate, "memory", "show", "--key", "c-x", *where) == 0
        assert "no memory of 'c-x'" in capsys.readouterr().out
        await running_job.crash()  # the restored checkpoint is one taken after the erasure
        running_job = job()
        await running_job.start()
        reads = [task("r-x", "recall", "c-x"), task("r-y", "recall", "c-y")]
        await submit_tasks(kafka_bootstrap, topics.tasks, reads)
        done = await results(kafka_bootstrap, topics.results, 4)
    finally:
        await running_job.crash()
    assert done["r-x"].answer == "no memory"
    assert seen(done["r-y"].answer) == ["kept"]

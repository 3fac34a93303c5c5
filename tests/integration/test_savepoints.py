"""Savepoints on the real broker: stop-with-savepoint through the CLI and the HTTP API, then the
word count restored from it at another parallelism (2 -> 3 -> 1), twice, with input arriving
throughout: the sink sees every count exactly once. A savepoint taken while the job runs is
listed and deleted over the API."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from sluicegate.cli.main import _parser
from sluicegate.coordinator.httpapi.client import CoordinatorClient
from sluicegate.coordinator.metrics import CoordinatorCollector
from sluicegate.operators.runtime.subtask import SubtaskSettings
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import produce_lines, read_committed, word_count
from tests.helpers import assert_counted_exactly_once, assert_final_counts_at_least_once, wait_for
from tests.jobs import running

WORDS = [f"w{i}" for i in range(12)]


def lines(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 3))) for _ in range(n)]


CHANGELOG = pytest.mark.parametrize(
    "settings",
    [SubtaskSettings(), SubtaskSettings(state_changelog=True)],
    ids=["rocksdb-files", "state-changelog"],
)


@CHANGELOG
async def test_stop_with_savepoint_then_restore_at_3_then_at_1(
    kafka_bootstrap: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    settings: SubtaskSettings,
) -> None:
    rng = random.Random(14)
    tag = uuid.uuid4().hex[:8]
    await ensure_topics(kafka_bootstrap, word_count(tag))
    storage = open_storage(tmp_path / "storage")
    monkeypatch.setenv("SLUICEGATE_STORAGE_URL", (tmp_path / "storage").as_uri())
    produced: list[str] = []

    async def produce(n: int) -> None:
        batch = lines(rng, n)
        produced.extend(batch)
        await produce_lines(kafka_bootstrap, f"lines-{tag}", batch)

    async def everything_counted_once() -> None:
        expected = Counter(w for line in produced for w in line.split())
        records = await read_committed(kafka_bootstrap, f"counts-{tag}", sum(expected.values()), 90)
        assert_counted_exactly_once(records, expected)

    # 1. parallelism 2: count, then stop-with-savepoint (CLI) while input is still arriving
    async with running(word_count(tag), storage, kafka_bootstrap, tmp_path / "w2", settings) as job:
        await produce(800)
        await everything_counted_once()
        await produce(800)
        args = _parser().parse_args(
            ["savepoint", "create", "--stop", "--name", "before-3", "--url", job.url]
        )
        code = await asyncio.to_thread(args.run, args)
        assert code == 0, capsys.readouterr().err
        await asyncio.wait_for(job.task, 10)  # the job stopped
        stop = job.coordinator.facts().stop
        final = stop.final_checkpoint if stop else None
    out = capsys.readouterr().out
    assert "savepoint before-3: writing" in out or "savepoint before-3: waiting" in out
    assert "written" in out
    saved = await SavepointStore(storage).load("before-3")
    assert saved.from_checkpoint == final
    assert saved.operators["counter"].parallelism == 2

    # 2. parallelism 3 (counter) from the savepoint; more input
    graph3 = word_count(tag, counters=3)
    async with running(graph3, storage, kafka_bootstrap, tmp_path / "w3", settings,
                       from_savepoint="before-3") as job:  # fmt: skip
        assign = await wait_for(
            lambda: job.coordinator.facts().assign, timeout_s=30, what="assignment"
        )
        assert assign.restore_from is not None
        assert final is not None
        assert assign.restore_from > final
        restored = await ManifestStore(storage).load(assign.restore_from)
        assert sorted(restored.subtasks) == [
            "counter#0", "counter#1", "counter#2", "tokenizer#0", "tokenizer#1"
        ]  # fmt: skip
        await produce(800)
        await everything_counted_once()
        await produce(500)
        info = await asyncio.to_thread(
            CoordinatorClient(job.url).create_savepoint, "before-1", stop=True
        )
        assert info.status == "waiting"
        await asyncio.wait_for(job.task, 60)

    # 3. parallelism 1 everywhere from the second savepoint
    graph1 = word_count(tag, counters=1, tokenizers=1)
    async with running(graph1, storage, kafka_bootstrap, tmp_path / "w1", settings,
                       from_savepoint="before-1") as job:  # fmt: skip
        await produce(600)
        await everything_counted_once()
        assert job.coordinator.facts().assign is not None


async def test_a_savepoint_of_a_running_job_is_listed_and_deleted_over_the_api(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    await ensure_topics(kafka_bootstrap, graph)
    storage = open_storage(tmp_path / "storage")
    async with running(graph, storage, kafka_bootstrap, tmp_path / "w") as job:
        await produce_lines(kafka_bootstrap, f"lines-{tag}", lines(random.Random(1), 300))
        client = CoordinatorClient(job.url)
        await wait_for(lambda: job.coordinator.facts().assign, timeout_s=30, what="assignment")
        assert await read_committed(
            kafka_bootstrap, f"counts-{tag}", 1, 60
        )  # the counters have rows
        info = await asyncio.to_thread(client.create_savepoint, "live")
        assert info.name == "live"

        async def stored() -> bool:
            got = await asyncio.to_thread(client.savepoint, "live")
            assert got.status not in ("failed",), got.error
            return got.status == "stored"

        deadline = asyncio.get_running_loop().time() + 60
        while not await stored():
            assert asyncio.get_running_loop().time() < deadline, "savepoint not written"
            await asyncio.sleep(0.2)
        registry = CollectorRegistry()
        registry.register(CoordinatorCollector(job.coordinator))
        labels = {"pipeline": graph.name}
        assert (
            registry.get_sample_value(
                "sluicegate_savepoints_total", {**labels, "outcome": "completed"}
            )
            == 1
        )
        size = registry.get_sample_value("sluicegate_savepoint_last_size_bytes", labels)
        assert size is not None
        assert size > 0
        listed = await asyncio.to_thread(client.savepoints)
        assert [s.name for s in listed if s.status == "stored"] == ["live"]
        assert listed[0].state_versions == {"counter": 1, "tokenizer": 1}
        # a name taken is refused with what to do; so is a name that is a path
        from sluicegate.coordinator.httpapi.client import CoordinatorApiError

        with pytest.raises(CoordinatorApiError, match="exists already") as refused:
            await asyncio.to_thread(client.create_savepoint, "live")
        assert refused.value.status == 409
        with pytest.raises(CoordinatorApiError) as bad:
            await asyncio.to_thread(client.create_savepoint, "../checkpoints")
        assert bad.value.status == 422
        assert await asyncio.to_thread(client.delete_savepoint, "live") > 1
        assert await storage.list("savepoints") == []
        with pytest.raises(CoordinatorApiError) as gone:
            await asyncio.to_thread(client.savepoint, "live")
        assert gone.value.status == 404


async def test_a_checkpoint_restores_at_another_parallelism_and_a_missing_savepoint_is_refused(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(5)
    tag = uuid.uuid4().hex[:8]
    await ensure_topics(kafka_bootstrap, word_count(tag))
    storage = open_storage(tmp_path / "storage")
    produced = lines(rng, 600)
    await produce_lines(kafka_bootstrap, f"lines-{tag}", produced)
    async with running(word_count(tag), storage, kafka_bootstrap, tmp_path / "a") as job:
        expected = Counter(w for line in produced for w in line.split())
        await read_committed(kafka_bootstrap, f"counts-{tag}", sum(expected.values()), 60)
        job.coordinator.request_stop()
        await asyncio.wait_for(job.task, 30)
        stop = job.coordinator.facts().stop
        final = stop.final_checkpoint if stop else None
    assert final is not None

    # no savepoint: the newest checkpoint itself is re-split for 3 counters
    more = lines(rng, 600)
    await produce_lines(kafka_bootstrap, f"lines-{tag}", more)
    async with running(word_count(tag, counters=3), storage, kafka_bootstrap,
                       tmp_path / "b") as job:  # fmt: skip
        assign = await wait_for(
            lambda: job.coordinator.facts().assign, timeout_s=30, what="assignment"
        )
        assert assign.restore_from is not None
        assert assign.restore_from > final
        expected = Counter(w for line in produced + more for w in line.split())
        records = await read_committed(kafka_bootstrap, f"counts-{tag}", sum(expected.values()), 90)
        assert_counted_exactly_once(records, expected)

    async with running(word_count(tag), storage, kafka_bootstrap, tmp_path / "c",
                       from_savepoint="no-such-savepoint") as job:  # fmt: skip
        await asyncio.wait_for(job.task, 30)
        assert job.coordinator.facts().state.value == "failed"
        failure = job.coordinator.facts().failure
        assert failure is not None
        assert "no savepoint named 'no-such-savepoint'" in failure.reason
        assert "savepoint list" in failure.reason


@CHANGELOG
async def test_every_second_checkpoint_is_full_and_restores_with_shared_files_gone(
    kafka_bootstrap: str, tmp_path: Path, settings: SubtaskSettings
) -> None:
    rng = random.Random(8)
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    await ensure_topics(kafka_bootstrap, graph)
    storage = open_storage(tmp_path / "storage")
    produced = lines(rng, 600)
    await produce_lines(kafka_bootstrap, f"lines-{tag}", produced)
    expected = Counter(w for line in produced for w in line.split())
    async with running(graph, storage, kafka_bootstrap, tmp_path / "a", settings,
                       full_checkpoint_every=2) as job:  # fmt: skip
        await read_committed(kafka_bootstrap, f"counts-{tag}", sum(expected.values()), 60)
        await wait_for(
            lambda: job.coordinator.facts().checkpoints.completed >= 4, timeout_s=30, what="4 done"
        )
        job.coordinator.request_stop()
        await asyncio.wait_for(job.task, 30)
    manifests = ManifestStore(storage)
    retained = await manifests.retained()
    assert {m.checkpoint_id % 2 == 0 for m in retained if m.is_full} == {True}
    assert any(not m.is_full for m in retained)
    # (A chain may be empty by now: the input ran out and a materialization took it up.)
    changelog_folders = list((tmp_path / "a").rglob("changelog"))
    assert bool(changelog_folders) is settings.state_changelog
    newest_full = max(m.checkpoint_id for m in retained if m.is_full)
    for path in await storage.list("shared"):  # every shared file lost
        await storage.delete(path)
    async with running(graph, storage, kafka_bootstrap, tmp_path / "b", settings) as job:
        assign = await wait_for(
            lambda: (
                assign
                if (assign := job.coordinator.facts().assign) and assign.restore_from == newest_full
                else None
            ),
            timeout_s=60,
            what=f"a restore from the full checkpoint {newest_full}",
        )
        assert assign.restore_from == newest_full
        more = lines(rng, 200)
        await produce_lines(kafka_bootstrap, f"lines-{tag}", more)
        expected = Counter(w for line in produced + more for w in line.split())
        await assert_final_counts_at_least_once(
            kafka_bootstrap, f"counts-{tag}", expected, deadline=time.monotonic() + 90
        )

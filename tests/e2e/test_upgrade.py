"""The upgrade runbook (docs/upgrade-runbook.md) against real processes: the refund desk
mid-run, with runs waiting for approval; ``sluicegate savepoint create --stop``; a new
version of the pipeline (the agent at parallelism 3 instead of 2, and its state one version
past today's, with an upgrader); ``sluicegate coordinator --from-savepoint``; then approvals:
every run completes once, each refund and email happened once, and ``sluicegate state
versions`` shows the new version in use."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluicegate import AgentTopics
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.messages import TaskRequest
from sluicegate.agents.runs.versions import run_state_versions
from sluicegate.coordinator.httpapi.client import CoordinatorClient
from sluicegate.demos.refund_desk.agent import task_goal
from sluicegate.demos.refund_desk.approver import Approver
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import read_committed
from tests.e2e.cluster import Cluster
from tests.helpers import wait_for

PARTITIONS = 4
RUNS = 12
OLD = run_state_versions().current
NEW = OLD + 1


def topics_of(tag: str) -> AgentTopics:
    return AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip


def desk_module(tag: str, world_url: str, parallelism: int, *, upgraded: bool) -> str:
    """The refund desk as a pipeline module; ``upgraded``: the new version, whose agent state
    is one version past today's (`NEW`; an upgrader from `OLD` notes the upgrade in each run's
    scratchpad)."""
    source = (
        "import dataclasses, json\n"
        "from sluicegate import AgentTopics, Pipeline, add_agent\n"
        "from sluicegate.agents.runs.versions import run_state_versions\n"
        "from sluicegate.operators.state.versions import StateVersions\n"
        "from sluicegate.demos.refund_desk.agent import refund_desk\n"
        f"p = Pipeline('desk-{tag}')\n"
        f"add_agent(p, refund_desk({world_url!r}), partitions={PARTITIONS}, "
        f"parallelism={parallelism}, topics={topics_of(tag)!r})\n"
    )
    if upgraded:
        source += (
            "def upgrade(key, value):\n"
            "    if not key.startswith(b'run/'):\n"
            "        return key, value\n"
            "    doc = json.loads(value)\n"
            "    doc['scratchpad'] = {**doc.get('scratchpad', {}), 'upgraded': 'yes'}\n"
            "    return key, json.dumps(doc).encode()\n"
            "old = run_state_versions()\n"
            "upgraders = {**dict(old.upgraders), old.current: upgrade}\n"
            "new = StateVersions.of(old.current + 1, upgraders)\n"
            "p.operators['refund-desk'] = dataclasses.replace(\n"
            "    p.operators['refund-desk'], state_versions=new)\n"
        )
    return source + "graph = p.build()\n"


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer() as server:
        yield server


def sluicegate(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluicegate", *args], env=cluster.env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip


def folder(path: Path) -> Path:
    path.mkdir()
    return path


def waiting(url: str) -> int:
    counts = CoordinatorClient(url).status().counts.get("refund-desk", {}).get("runs", {})
    return counts.get("waiting_approval", 0)


async def test_savepoint_new_version_restore_every_run_completes_once(
    kafka_bootstrap: str, tmp_path: Path, world: WorldServer, cluster_factory: list[Cluster]
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = topics_of(tag)
    storage_dir = tmp_path / "storage"
    old = Cluster(
        folder(tmp_path / "v-old"),
        desk_module(tag, world.url, 2, upgraded=False),
        kafka_bootstrap,
        env={"SLUICEGATE_STORAGE_URL": str(storage_dir)},
    )
    cluster_factory.append(old)
    for name in ("coordinator", "w1", "w2"):
        old.start(name)
    tasks = [
        TaskRequest(run_id=f"run-{i:02d}", goal=task_goal(f"ord-{tag}-{i}", research=2))
        for i in range(RUNS)
    ]
    # Half the runs wait for approval; the other half are mid-run when the savepoint is taken.
    await submit_tasks(kafka_bootstrap, topics.tasks, tasks[: RUNS // 2])
    url = await asyncio.to_thread(old.api_url)
    await wait_for(lambda: waiting(url) == RUNS // 2, timeout_s=120, what="runs waiting")
    await submit_tasks(kafka_bootstrap, topics.tasks, tasks[RUNS // 2 :])

    # Runbook step 1: stop with a savepoint.
    made = await asyncio.to_thread(
        sluicegate, old, "savepoint", "create", "--stop", "--name", "upgrade-1", "--url", url
    )
    assert made.returncode == 0, made.stderr
    assert "savepoint upgrade-1" in made.stdout
    assert old.processes.pop("coordinator").wait(timeout=30) == 0
    listed = await asyncio.to_thread(sluicegate, old, "savepoint", "list")
    assert "upgrade-1" in listed.stdout
    assert "stored" in listed.stdout
    old.stop_all()  # runbook step 2: the old version's workers go

    # Runbook step 3: the new version, restored from the savepoint.
    new = Cluster(
        folder(tmp_path / "v-new"),
        desk_module(tag, world.url, 3, upgraded=True),
        kafka_bootstrap,
        env={"SLUICEGATE_STORAGE_URL": str(storage_dir)},
    )
    cluster_factory.append(new)
    new.start("coordinator", "--from-savepoint", "upgrade-1")
    new.start("w1")
    new.start("w2")
    approver = Approver(
        kafka_bootstrap, events=topics.events, approvals=topics.approvals, partitions=PARTITIONS
    )
    approving = asyncio.create_task(approver.run())
    try:
        results = await read_committed(kafka_bootstrap, topics.results, RUNS, timeout_s=240)
        await asyncio.sleep(2)  # a duplicate would be published within a few checkpoints
        results = await read_committed(kafka_bootstrap, topics.results, 10**6, timeout_s=3)
    finally:
        approving.cancel()
        await asyncio.gather(approving, return_exceptions=True)
    new.alive()

    by_run = Counter(json.loads(r.value)["run_id"] for r in results)
    assert by_run == Counter({t.run_id: 1 for t in tasks})
    assert {json.loads(r.value)["status"] for r in results} == {"done"}
    stats = world.state.stats()
    assert stats["duplicates"] == 0
    assert stats["effects_by_kind"] == {"refund": RUNS, "email": RUNS, "reversal": 0}
    log = (new.logs / "coordinator.1.log").read_text()
    assert "savepoint upgrade-1 restored at the current shape" in log
    manifests = ManifestStore(open_storage(storage_dir))
    latest = await manifests.latest()
    assert latest is not None
    assert latest.state_version("refund-desk") == NEW
    assert sorted(s for s in latest.subtasks if s.startswith("refund-desk#")) == [
        "refund-desk#0", "refund-desk#1", "refund-desk#2"
    ]  # fmt: skip
    versions = await asyncio.to_thread(sluicegate, new, "state", "versions")
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in versions.stdout.splitlines()[1:]}
    assert rows[("refund-desk", str(OLD))] == ["0", "1"]  # the savepoint only
    assert int(rows[("refund-desk", str(NEW))][0]) >= 1

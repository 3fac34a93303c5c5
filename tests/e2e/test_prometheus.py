"""A real Prometheus scraping a real ``sluicegate up`` pipeline: every query of the Grafana
dashboard parses and finds data, and the alert rules evaluate without error.

Steps:

1. start the world service, and ``sluicegate up`` with the refund desk on topics of this test's
   own (a pipeline module written into tmp_path), coordinator API on port B and worker i's
   /metrics on B+i;
2. start Prometheus (the binary .ci/install-prometheus installs) scraping them every second,
   with deploy/prometheus/rules loaded;
3. submit refund requests, approve them, send one decision for an unknown run (a dead letter),
   then SIGKILL a worker (a restart, restores) and let the runs finish;
4. query every panel target through Prometheus's HTTP API with ``$pipeline``, ``$operator`` and
   ``$__rate_interval`` substituted, until every one returns a series; check the template
   variables, the rules' health, and that the dead-letter alert fires while the lag alert
   does not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml

from sluicegate import AgentTopics
from sluicegate.agents.client import send_decision, submit_tasks
from sluicegate.agents.messages import ApprovalDecision, TaskRequest
from sluicegate.coordinator.httpapi.client import CoordinatorClient
from sluicegate.demos.refund_desk.agent import task_goal
from sluicegate.demos.refund_desk.approver import Approver
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.exceptions import SluicegateError
from sluicegate.operators.runtime.readers import committed_from_start
from tests.helpers import wait_for
from tests.observability import PROMETHEUS_DIR, dashboard_targets, load_dashboard

T = TypeVar("T")

OPERATOR = "refund-desk"
PARTITIONS = 4
RUNS = 12
RATE_INTERVAL = "30s"

PIPELINE_MODULE = """\
import os

from sluicegate import AgentTopics, add_agent
from sluicegate.demos.refund_desk.agent import refund_desk
from sluicegate.operators.pipeline import Pipeline

TOPICS = AgentTopics(**{topics!r})


def graph():
    p = Pipeline({name!r})
    desk = refund_desk(os.environ["SLUICEGATE_WORLD_URL"])
    add_agent(p, desk, partitions={partitions}, parallelism=2, topics=TOPICS)
    return p.build()
"""


def _free_port_base(count: int) -> int:
    """A port B such that B .. B+count-1 are all free now."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base: int = probe.getsockname()[1]
        if base + count > 65535:
            continue
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise AssertionError(f"no {count} consecutive free ports found")


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        message = f"{name} not found: run .ci/install-prometheus"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must run this test)", pytrace=False)
        pytest.skip(message)
    return found


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer() as server:
        yield server


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test starts: SIGTERM at the end (``up`` stops its children), then
    SIGKILL whatever has not exited 30 s later."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in reversed(started):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in reversed(started):
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _start(
    processes: list[subprocess.Popen[bytes]], argv: list[str], log: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    processes.append(process)
    return process


async def _until(
    what: str,
    check: Callable[[], Awaitable[bool]],
    timeout_s: float,
    detail: Callable[[], str] = lambda: "",
) -> None:
    """Poll ``check`` until it is true; fail after ``timeout_s`` saying ``what`` and ``detail``."""
    await wait_for(check, timeout_s=timeout_s, interval_s=0.25, what=what, details=detail)


def _tails(*logs: Path) -> Callable[[], str]:
    return lambda: "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in logs if p.exists())


async def _call(call: Callable[[], T]) -> T | None:
    try:
        return await asyncio.to_thread(call)
    except (SluicegateError, OSError):
        return None


def _worker_pid(parent: int, worker_id: str) -> int | None:
    """The pid of ``up``'s child running ``worker --worker-id worker_id``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"--worker-id" in argv and worker_id.encode() in argv:
            return int(entry.name)
    return None


async def _follow_results(bootstrap: str, topic: str, seen: set[str], stop: asyncio.Event) -> None:
    """Add the run id of every committed result on ``topic`` to ``seen`` until ``stop``."""
    async with committed_from_start(bootstrap, topic, PARTITIONS) as consumer:
        while not stop.is_set():
            for records in (await consumer.getmany(timeout_ms=200)).values():
                seen.update(json.loads(r.value or b"{}")["run_id"] for r in records)


class Prometheus:
    """A Prometheus server of the test's own, and the parts of its HTTP API the test reads."""

    def __init__(self, tmp_path: Path, targets: dict[str, list[str]]) -> None:
        """``targets``: scrape job name -> ``host:port`` list, scraped every second."""
        self.config = tmp_path / "prometheus.yml"
        self.log = tmp_path / "prometheus.log"
        self.data = tmp_path / "tsdb"
        self.port = _free_port_base(1)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(PROMETHEUS_DIR / "rules" / "*.yml")],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": hosts}]}
                for job, hosts in targets.items()
            ],
        }
        self.config.write_text(yaml.safe_dump(config))
        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=10)

    @property
    def argv(self) -> list[str]:
        return [
            _binary("prometheus"),
            f"--config.file={self.config}",
            f"--storage.tsdb.path={self.data}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]

    async def ready(self) -> bool:
        try:
            return (await self.http.get("/-/ready")).status_code == 200
        except httpx.HTTPError:
            return False

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """The series an instant query returns now; fails if Prometheus refuses the query."""
        answer = await self.http.get("/api/v1/query", params={"query": expr})
        body = answer.json()
        assert answer.status_code == 200, f"{expr}: {body.get('error')}"
        assert body["data"]["resultType"] == "vector", expr
        series: list[dict[str, Any]] = body["data"]["result"]
        return series

    async def label_values(self, label: str, match: str) -> list[str]:
        """What Grafana's ``label_values(match, label)`` lists."""
        answer = await self.http.get(f"/api/v1/label/{label}/values", params={"match[]": match})
        values: list[str] = answer.json()["data"]
        return values

    async def rules(self) -> list[dict[str, Any]]:
        groups = (await self.http.get("/api/v1/rules")).json()["data"]["groups"]
        return [rule for group in groups for rule in group["rules"]]

    async def firing(self, alertname: str, **labels: str) -> bool:
        alerts = (await self.http.get("/api/v1/alerts")).json()["data"]["alerts"]
        return any(
            a["state"] == "firing"
            and a["labels"]["alertname"] == alertname
            and all(a["labels"].get(k) == v for k, v in labels.items())
            for a in alerts
        )


async def test_every_dashboard_query_finds_data_in_a_real_prometheus(
    kafka_bootstrap: str,
    tmp_path: Path,
    world: WorldServer,
    processes: list[subprocess.Popen[bytes]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="httpx")  # a line per query drowns the failure
    # 1. `sluicegate up` with the refund desk on this test's own topics.
    _binary("prometheus")
    tag = uuid.uuid4().hex[:8]
    name = f"prom-{tag}"
    topics = AgentTopics(*(f"{name}.{t}" for t in ("tasks", "approvals", "events", "results")))
    module = f"pipeline_{tag}"
    (tmp_path / f"{module}.py").write_text(
        PIPELINE_MODULE.format(topics=dataclasses.asdict(topics), name=name, partitions=PARTITIONS)
    )
    base = _free_port_base(3)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        "SLUICEGATE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "SLUICEGATE_STORAGE_URL": str(tmp_path / "storage"),
        "SLUICEGATE_STATE_DIR": str(tmp_path / "state"),
        "SLUICEGATE_WORLD_URL": world.url,
        "SLUICEGATE_PIPELINE": name,
    }
    up_log = tmp_path / "up.log"
    up = _start(
        processes,
        [sys.executable, "-m", "sluicegate", "up", "--pipeline", f"{module}:graph",
         "--workers", "2", "--slots", "2", "--interval", "0.5",
         "--metrics-port-base", str(base)],
        up_log,
        env,
    )  # fmt: skip

    # 2. Prometheus scraping the coordinator (port B) and both workers (B+1, B+2).
    prometheus = Prometheus(
        tmp_path,
        {
            "sluicegate-coordinator": [f"127.0.0.1:{base}"],
            "sluicegate-worker": [f"127.0.0.1:{base + 1}", f"127.0.0.1:{base + 2}"],
        },
    )
    _start(processes, prometheus.argv, prometheus.log, dict(os.environ))
    logs = _tails(up_log, prometheus.log)
    coordinator = CoordinatorClient(f"http://127.0.0.1:{base}")
    seen: set[str] = set()
    stop = asyncio.Event()
    approver = Approver(
        kafka_bootstrap, events=topics.events, approvals=topics.approvals,
        partitions=PARTITIONS, delay_s=0.2,
    )  # fmt: skip
    background: list[asyncio.Task[None]] = []
    try:
        await _until("Prometheus ready", prometheus.ready, 60, logs)

        async def running() -> bool:
            assert up.poll() is None, logs()
            status = await _call(coordinator.status)
            return status is not None and status.state in {"running", "checkpointing"}

        await _until("the pipeline running", running, 120, logs)

        # 3. Runs (approved by the approver), a dead letter, and a worker killed mid-run.
        background.append(asyncio.create_task(approver.run()))
        following = _follow_results(kafka_bootstrap, topics.results, seen, stop)
        background.append(asyncio.create_task(following))
        tasks = [
            TaskRequest(run_id=f"run-{i:03d}", goal=task_goal(f"ord-{tag}-{i}", research=1))
            for i in range(RUNS)
        ]
        await submit_tasks(kafka_bootstrap, topics.tasks, tasks[: RUNS // 2])

        async def some_done() -> bool:
            return len(seen) >= RUNS // 4

        await _until("the first results", some_done, 120, logs)
        before = await _call(coordinator.status)
        assert before is not None
        workers = await _call(coordinator.workers) or []
        busy = next(w.worker_id for w in workers if w.subtasks)
        victim = _worker_pid(up.pid, busy)
        assert victim is not None, f"no process for {busy}"
        os.kill(victim, signal.SIGKILL)
        await submit_tasks(kafka_bootstrap, topics.tasks, tasks[RUNS // 2 :])

        async def recovered() -> bool:
            status = await _call(coordinator.status)
            checkpoints = await _call(coordinator.checkpoints) or []
            return (
                status is not None
                and status.attempt > before.attempt
                and any(
                    c.attempt == status.attempt and c.status == "completed" for c in checkpoints
                )
            )

        await _until("a checkpoint completed after the SIGKILL", recovered, 120, logs)
        # After the SIGKILL: a dead letter counted by a process killed before Prometheus
        # scraped it is not counted again (its checkpoint completed), so send it now.
        unknown = ApprovalDecision(run_id="no-such-run", approved=True, by="test")
        await send_decision(kafka_bootstrap, topics.approvals, unknown)

        async def all_done() -> bool:
            return len(seen) >= RUNS

        await _until(f"all {RUNS} results", all_done, 180, logs)

        # `sluicegate status` (and --watch) shows runs by status from the workers' heartbeats.
        async def runs_counted() -> bool:
            status = await _call(coordinator.status)
            runs = status.counts.get(OPERATOR, {}).get("runs", {}) if status else {}
            return runs == {"done": RUNS}

        await _until("runs by status in the coordinator's status", runs_counted, 30, logs)

        # 4. Every panel target finds data.
        variables = {"pipeline": name, "operator": OPERATOR, "__rate_interval": RATE_INTERVAL}
        targets = list(dashboard_targets(load_dashboard()))
        assert targets
        empty: list[str] = []

        async def every_target_has_data() -> bool:
            empty.clear()
            for target in targets:
                if not await prometheus.query(target.resolved(variables)):
                    empty.append(f"{target.panel} {target.ref_id}: {target.expr}")
            return not empty

        await _until(
            "data for every panel target", every_target_has_data, 90, lambda: "\n".join(empty)
        )

        # The template variables' label_values queries list this pipeline and its operator.
        assert name in await prometheus.label_values("pipeline", "sluicegate_attempt")
        match = f'sluicegate_records_in_total{{pipeline="{name}"}}'
        # The agent, and the router add_agent puts in front of it.
        operators = await prometheus.label_values("operator", match)
        assert operators == [OPERATOR, f"{OPERATOR}.router"]

        # The rules evaluate on real series without error; dead letters fire, lag does not.
        rules = await prometheus.rules()
        assert rules, "no rules loaded"
        assert [(r["name"], r["lastError"]) for r in rules if r["health"] != "ok"] == []

        async def dead_letters_fire() -> bool:
            return await prometheus.firing("SluicegateDeadLetters", pipeline=name)

        await _until("SluicegateDeadLetters firing", dead_letters_fire, 30)
        assert not await prometheus.firing("SluicegateCheckpointLagHigh", pipeline=name)
    finally:
        stop.set()
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await prometheus.http.aclose()

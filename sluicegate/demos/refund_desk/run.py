"""``sluicegate demo`` (``make demo``): the refund desk, through ``sluicegate up``, with a crash.

CLI wiring, so it may import `agents`. Steps:

1. start the development broker (unless ``SLUICEGATE_KAFKA_BOOTSTRAP`` names one), the world
   service (the HTTP "outside world" the tools act on, counting every effect by idempotency
   key), and, as in ``sluicegate up``, a coordinator and two workers as child processes
   running ``sluicegate.demos.refund_desk.agent:refund_desk_graph`` (their logs go to a file);
2. submit N refund requests of a few customers each; an approver grants each email after a
   delay; each run remembers its refund in its customer's memory (``docs/memory.md``);
3. once a third of the results are in, SIGKILL a worker mid-run; the supervisor starts it
   again and the coordinator recovers the pipeline from its last completed checkpoint;
4. when every run has its result, ask again for the refund of a tenth of the orders, in new
   runs: each must answer from its customer's memory that the order was refunded already,
   and refund nothing;
5. print the summary: runs done, effects executed, duplicate effects (must be 0), what memory
   did, checkpoints taken, recovery time. Exit code 0 only if exact;
6. with ``console``, keep the job, the world service and the coordinator's web console
   (``/console/``) up after the summary, until Ctrl-C, so a new user can look around.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sluicegate import AgentTopics
from sluicegate.agents.client import submit_tasks
from sluicegate.cli.commands import api_token
from sluicegate.cli.supervisor import Child, Supervisor
from sluicegate.coordinator.httpapi.client import CoordinatorClient
from sluicegate.coordinator.httpapi.view import JobStatus
from sluicegate.demos.refund_desk.agent import ALREADY_REFUNDED, refund_task
from sluicegate.demos.refund_desk.approver import Approver
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.exceptions import SluicegateError
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.runtime.readers import committed_from_start

__all__ = ["run_agent_demo"]

T = TypeVar("T")

PIPELINE = "sluicegate.demos.refund_desk.agent:refund_desk_graph"
PARTITIONS = 4
TOPICS = AgentTopics(
    tasks="refund-desk.tasks",
    approvals="refund-desk.approvals",
    events="refund-desk.events",
    results="refund-desk.results",
)


async def run_agent_demo(
    bootstrap: KafkaLike, *, runs: int, kill: bool, approval_delay_s: float, console: bool = False
) -> int:
    """Steps in the module docstring; returns the exit code."""
    for noisy in (
        "uvicorn",
        "sluicegate.demos.refund_desk.world",
        "httpx",
    ):  # the summary says what matters
        logging.getLogger(noisy).setLevel(logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="sluicegate-demo-"))
    log = root / "processes.log"
    port = _free_port()
    name = f"refund-demo-{int(time.time())}"
    with WorldServer() as world:
        env = {
            **kafka_clients.settings_of(bootstrap).to_env(),
            "SLUICEGATE_STORAGE_URL": str(root / "checkpoints"),
            "SLUICEGATE_STATE_DIR": str(root / "state"),
            "SLUICEGATE_WORLD_URL": world.url,
            "SLUICEGATE_PIPELINE": name,
        }
        me = [sys.executable, "-m", "sluicegate"]
        children = [
            Child("coordinator", [*me, "coordinator", "--pipeline", PIPELINE, "--interval",
                                  "0.5", "--http-port", str(port)], restart=False),
            *(Child(f"worker-{i}", [*me, "worker", "--pipeline", PIPELINE, "--worker-id",
                                    f"worker-{i}", "--slots", "3"], restart=True)
              for i in (1, 2)),
        ]  # fmt: skip
        supervisor = Supervisor(children, env, log_path=log)
        print(
            f"pipeline {name}: {TOPICS.tasks} -> router -> refund-desk agent x2 -> results, events"
        )
        print(f"world service {world.url}; coordinator API http://127.0.0.1:{port}")
        print(f"process logs: {log}; checkpoints: {root / 'checkpoints'}")
        running = asyncio.create_task(supervisor.run())
        approver = Approver(
            bootstrap, events=TOPICS.events, approvals=TOPICS.approvals,
            partitions=PARTITIONS, delay_s=approval_delay_s,
        )  # fmt: skip
        client = CoordinatorClient(f"http://127.0.0.1:{port}", token=api_token())
        started = time.monotonic()
        approving: asyncio.Task[None] | None = None
        try:
            await _wait_running(client, running)
            approving = asyncio.create_task(approver.run())
            customers = max(1, runs // 6)
            tasks = [
                refund_task(f"run-{i:04d}", f"ord-{i:04d}", _customer(i, customers))
                for i in range(runs)
            ]
            await submit_tasks(bootstrap, TOPICS.tasks, tasks)
            print(f"submitted {runs} refund requests of {customers} customers")
            _, recovery_s = await _follow(bootstrap, runs, kill, children, client, running)
            again = [
                refund_task(f"again-{i:04d}", f"ord-{i:04d}", _customer(i, customers))
                for i in range(max(1, runs // 10))
            ]
            await submit_tasks(bootstrap, TOPICS.tasks, again)
            print(f"asked again for the refund of {len(again)} orders refunded already")
            expected = runs + len(again)
            results, _ = await _follow(bootstrap, expected, False, children, client, running)
            if console:
                approving.cancel()
                status = await _try(client.status)
                code = _summary(results, runs, world.state.stats(), approver.approved, status,
                                recovery_s, time.monotonic() - started)  # fmt: skip
                print(f"\nweb console: http://127.0.0.1:{port}/console/ (Ctrl-C stops the demo)")
                stopped = await running  # the supervisor stops every process on Ctrl-C
                if stopped > 128:
                    print(f"demo stopped by {signal.Signals(stopped - 128).name}")
                return code
        finally:
            if approving is not None:
                approving.cancel()
                await asyncio.gather(approving, return_exceptions=True)
            status = await _try(client.status)
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        stats = world.state.stats()
    return _summary(
        results, runs, stats, approver.approved, status, recovery_s, time.monotonic() - started
    )


def _remembered(result: dict[str, object]) -> int:
    """How many ``remember`` calls of the run's result went through."""
    effects = result.get("effects")
    if not isinstance(effects, list):
        return 0
    return sum(
        1
        for e in effects
        if isinstance(e, dict) and e.get("tool") == "remember" and e.get("status") == "done"
    )


def _customer(order: int, customers: int) -> str:
    return f"c-{order % customers:03d}"


def _summary(
    results: dict[str, dict[str, object]],
    runs: int,
    stats: dict[str, Any],
    approved: int,
    status: JobStatus | None,
    recovery_s: float | None,
    elapsed: float,
) -> int:
    """Print the demo's summary (step 5); the exit code: 0 only if exact. ``runs``: the first
    requests; the rest of ``results`` asked again for orders refunded already."""
    by_status = Counter(r["status"] for r in results.values())
    repeats = {k: r for k, r in results.items() if k.startswith("again-")}
    refused = [r for r in repeats.values() if ALREADY_REFUNDED in str(r.get("answer") or "")]
    remembered = sum(_remembered(r) for r in results.values())
    print()
    print(f"runs finished:        {len(results)} ({dict(by_status)}) in {elapsed:.1f} s")
    print(f"effects executed:     {stats['effects']} {stats['effects_by_kind']}")
    print(f"duplicate effects:    {stats['duplicates']}")
    print(f"approvals granted:    {approved}")
    print(f"memory:               {remembered} refunds remembered; {len(refused)} of "
          f"{len(repeats)} repeated requests refused from memory, none refunded")  # fmt: skip
    last = status.last_completed_checkpoint if status else None
    attempt = status.attempt if status else "?"
    print(f"checkpoints taken:    {last} (the last completed id); attempt now {attempt}")
    if recovery_s is not None:
        print(f"recovery time:        {recovery_s:.2f} s (SIGKILL to the first checkpoint after)")
    exact = (
        len(results) - len(repeats) == runs
        and stats["duplicates"] == 0
        and by_status["done"] == len(results)
        and stats["effects_by_kind"].get("refund") == runs
        and remembered == runs
        and len(refused) == len(repeats) > 0
    )
    print(
        "OK: every run finished once, no effect happened twice, no order was refunded twice"
        if exact
        else "MISMATCH"
    )
    return 0 if exact else 1


async def _follow(
    bootstrap: KafkaLike,
    runs: int,
    kill: bool,
    children: list[Child],
    client: CoordinatorClient,
    running: asyncio.Task[int],
) -> tuple[dict[str, dict[str, object]], float | None]:
    """Read results until every run has one; SIGKILL worker-1 a third of the way."""
    results: dict[str, dict[str, object]] = {}
    recovery: asyncio.Task[float | None] | None = None
    progress = _Progress(runs)
    async with committed_from_start(bootstrap, TOPICS.results, PARTITIONS) as consumer:
        deadline = time.monotonic() + 120 + runs
        while len(results) < runs and time.monotonic() < deadline:
            if running.done():
                raise SluicegateError(f"the coordinator exited ({running.result()}); see logs")
            for records in (await consumer.getmany(timeout_ms=300)).values():
                for record in records:
                    result = json.loads(record.value or b"{}")
                    if result["run_id"] in results:
                        raise SluicegateError(f"run {result['run_id']} has two results")
                    results[result["run_id"]] = result
            progress(len(results))
            if kill and recovery is None and len(results) >= runs // 3:
                recovery = asyncio.create_task(_kill_and_time(children, client))
        if progress.terminal:
            print()
    return results, (await recovery if recovery is not None else None)


async def _kill_and_time(children: list[Child], client: CoordinatorClient) -> float | None:
    """SIGKILL a worker that hosts subtasks; seconds until a checkpoint completes after it."""
    before = await asyncio.to_thread(client.status)
    busy = {w.worker_id for w in await asyncio.to_thread(client.workers) if w.subtasks}
    worker = next(c for c in children if c.name in busy and c.process is not None)
    assert worker.process is not None
    worker.process.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    print(f"\nSIGKILL {worker.name} (pid {worker.process.pid}) at attempt {before.attempt}")
    while time.monotonic() - killed < 120:
        status = await _try(client.status)
        if status is not None and status.attempt > before.attempt:
            checkpoints = await _try(client.checkpoints) or []
            done = [c for c in checkpoints if c.attempt == status.attempt]
            if any(c.status == "completed" for c in done):
                return time.monotonic() - killed
        await asyncio.sleep(0.1)
    return None


async def _wait_running(client: CoordinatorClient, running: asyncio.Task[int]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if running.done():
            raise SluicegateError("the pipeline's processes exited; see the process log")
        status = await _try(client.status)
        if status is not None and status.state in {"running", "checkpointing"}:
            return
        await asyncio.sleep(0.2)
    raise SluicegateError("the pipeline did not start within 120 s; see the process log")


async def _try(call: Callable[[], T]) -> T | None:
    """``call()`` in a thread; None if the coordinator cannot answer right now."""
    with contextlib.suppress(SluicegateError, OSError):
        return await asyncio.to_thread(call)
    return None


class _Progress:
    """Runs done: a bar redrawn in place on a terminal; elsewhere (a log, CI) a line at each
    tenth of the runs, not a redraw every 300 ms."""

    def __init__(self, total: int) -> None:
        self.total, self.shown = total, -1
        self.terminal = sys.stdout.isatty()

    def __call__(self, done: int) -> None:
        width, total = 40, max(self.total, 1)
        if not self.terminal:
            if done * 10 // total > self.shown:
                self.shown = done * 10 // total
                print(f"{done}/{self.total} runs done", flush=True)
            return
        filled = width * done // total
        sys.stdout.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} runs done"
        )
        sys.stdout.flush()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port

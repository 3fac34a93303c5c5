"""The refund desk with its tools on an MCP server, through ``sluicegate up``, as docs/mcp.md
runs it: the world service, the desk's MCP server (``refund_desk.mcp_server``, a real process
on the SDK) and ``sluicegate up`` with a coordinator and two workers. Every run is done; each
refund and each email executed once in the world under the journal's key (the server forwards
``_meta``'s key as the world's ``Idempotency-Key``); each email waited for a person."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from sluicegate import AgentTopics, TaskRequest
from sluicegate.agents.client import submit_tasks
from sluicegate.demos.refund_desk.agent import task_goal
from sluicegate.demos.refund_desk.approver import Approver
from sluicegate.demos.refund_desk.mcp_agent import refund_desk_mcp_graph
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.devkafka.broker import free_port
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.testing import read_committed

PARTITIONS = 2
RUNS = 4


def _listening(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise AssertionError(f"the MCP server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError("the MCP server did not listen in time") from None
            time.sleep(0.05)  # poll interval, not a wait for correctness


async def test_the_refund_desk_calls_its_mcp_server_through_up(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = uuid.uuid4().hex[:8]
    world = WorldServer()
    world.start()
    port = free_port()
    server = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, killed at the end
        [sys.executable, "-m", "sluicegate.demos.refund_desk.mcp_server",
         "--world", world.url, "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    env = {
        "SLUICEGATE_REFUND_MCP_URL": f"http://127.0.0.1:{port}/mcp",
        "SLUICEGATE_PIPELINE": f"refund-mcp-{tag}",
        "SLUICEGATE_TOPICS": f"desk-mcp-{tag}",
        "SLUICEGATE_PARTITIONS": str(PARTITIONS),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    topics = AgentTopics.named(f"desk-mcp-{tag}")
    up: subprocess.Popen[str] | None = None
    lines: list[str] = []
    try:
        _listening(port, server)
        await ensure_topics(kafka_bootstrap, refund_desk_mcp_graph())
        up = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, its output read by a thread
            [sys.executable, "-m", "sluicegate", "up",
             "--pipeline", "sluicegate.demos.refund_desk.mcp_agent:refund_desk_mcp_graph",
             "--workers", "2", "--slots", "2", "--interval", "0.5"],
            env={**os.environ, **env, "SLUICEGATE_KAFKA_BOOTSTRAP": kafka_bootstrap,
                 "SLUICEGATE_STORAGE_URL": str(tmp_path / "storage"),
                 "SLUICEGATE_STATE_DIR": str(tmp_path / "state")},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        stdout = up.stdout
        reader = threading.Thread(target=lambda: lines.extend(stdout or []), daemon=True)
        reader.start()
        approver = Approver(
            kafka_bootstrap, events=topics.events, approvals=topics.approvals,
            partitions=PARTITIONS,
        )  # fmt: skip
        approving = asyncio.create_task(approver.run())
        try:
            tasks = [
                TaskRequest(run_id=f"run-{tag}-{i}", goal=task_goal(f"ord-{tag}-{i}"))
                for i in range(RUNS)
            ]
            await submit_tasks(kafka_bootstrap, topics.tasks, tasks)
            results = await read_committed(kafka_bootstrap, topics.results, RUNS, timeout_s=180)
        finally:
            approving.cancel()
            await asyncio.gather(approving, return_exceptions=True)
    finally:
        if up is not None:
            up.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                up.wait(timeout=60)
            if up.stdout is not None:
                up.stdout.close()
        server.kill()
        server.wait(timeout=10)
        snapshot = world.state.snapshot()
        world.stop()

    answers = [json.loads(r.value) for r in results]
    assert Counter(a["status"] for a in answers) == {"done": RUNS}, "".join(lines[-40:])
    assert all("; emailed." in a["answer"] for a in answers), answers
    executed = Counter(e["kind"] for e in snapshot["effects"] if not e["duplicate"])
    assert executed == {"refund": RUNS, "email": RUNS}
    assert snapshot["stats"]["duplicates"] == 0
    keys = [e["key"] for e in snapshot["effects"]]
    assert len(set(keys)) == len(keys)
    assert all(key.startswith(f"run-{tag}-") for key in keys)  # the journal's keys, via _meta
    assert approver.approved == RUNS  # each email waited for a person

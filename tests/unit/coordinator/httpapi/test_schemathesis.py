"""Schemathesis against the live server's own OpenAPI spec: every operation, every check,
with API tokens on (so its authentication checks send requests without the token, too).

The server runs in its own event loop on a background thread, because schemathesis calls it
synchronously from the test.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from itertools import count
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from prometheus_client import CollectorRegistry, Counter, Histogram
from schemathesis.core.result import Ok

from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.auth import ApiTokens, Principal, Scope
from sluicegate.coordinator.httpapi.server import serve
from sluicegate.coordinator.httpapi.view import (
    CheckpointInfo,
    CheckpointRefusedError,
    CheckpointStatus,
    JobStatus,
    StopInfo,
    SubtaskInfo,
    WorkerInfo,
)

TOKEN = "schemathesis-token-0123456789"
OPERATIONS = {
    "GET /status",
    "GET /workers",
    "GET /subtasks",
    "GET /checkpoints",
    "POST /checkpoints",
    "POST /stop",
    "GET /metrics",
    "GET /healthz",
}


class ScriptedView:
    """Answers with nulls and empties where the models allow; every other trigger is refused."""

    def __init__(self) -> None:
        self._triggers = count(1)

    def status(self) -> JobStatus:
        return JobStatus(
            pipeline="p",
            state="created",
            attempt=0,
            last_completed_checkpoint=None,
            checkpoint_lag_seconds=None,
            restarts=0,
        )

    def workers(self) -> list[WorkerInfo]:
        return [
            WorkerInfo(worker_id="w", slots=0, subtasks=[], seconds_since_heartbeat=0, alive=False)
        ]

    def subtasks(self) -> list[SubtaskInfo]:
        return [SubtaskInfo(subtask="a#0", worker_id=None, attempt=0)]

    async def checkpoints(self) -> list[CheckpointInfo]:
        return [
            CheckpointInfo(
                checkpoint_id=n,
                attempt=0,
                status=status,
                triggered_at=None,
                completed_at=None,
                full_bytes=0,
                incremental_bytes=0,
                alignment_seconds=0,
                sync_seconds=0,
                async_seconds=0,
                reason="timeout" if status is CheckpointStatus.ABORTED else None,
            )
            for n, status in enumerate(CheckpointStatus, start=1)
        ]

    async def trigger_checkpoint(self) -> int:
        n = next(self._triggers)
        if n % 2 == 0:
            raise CheckpointRefusedError("a checkpoint is in flight")
        return n

    async def stop(self, *, final_checkpoint: bool, wait_seconds: float) -> JobStatus:
        stopping = self.status().model_copy(update={"state": "stopping"})
        phase = "want_checkpoint" if final_checkpoint else "send_stop"
        return stopping.model_copy(
            update={"stop": StopInfo(phase=phase, final_checkpoint=None, note="")}
        )


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    registry = CollectorRegistry()
    Counter("sg_test_records_in", "records read", ["topic"], registry=registry).labels("t").inc()
    Histogram("sg_test_duration_seconds", "a duration", registry=registry).observe(0.2)
    tokens = ApiTokens({TOKEN: Principal.granted("tester", Scope)})
    app = create_app(ScriptedView(), registry, tokens=tokens)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="api-server", daemon=True)
    thread.start()
    try:
        server = asyncio.run_coroutine_threadsafe(serve(app, "127.0.0.1", 0), loop).result(10)
        try:
            yield server.url
        finally:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture(scope="module")
def api_schema(api_url: str) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{api_url}/openapi.json")


pytestmark = pytest.mark.usefixtures("schemathesis_node_id")

schema = schemathesis.pytest.from_fixture("api_schema")


@schema.auth()
class BearerToken:
    """Sends the token; schemathesis leaves it out where it checks that auth is required."""

    def get(self, case: schemathesis.Case[Any], context: Any) -> str:
        return TOKEN

    def set(self, case: schemathesis.Case[Any], data: str, context: Any) -> None:
        case.headers["Authorization"] = f"Bearer {data}"


def test_the_spec_lists_every_operation(api_schema: schemathesis.BaseSchema) -> None:
    found = set()
    for result in api_schema.get_all_operations():
        assert isinstance(result, Ok), result
        found.add(f"{result.ok().method.upper()} {result.ok().path}")
    assert found == OPERATIONS


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_conforms(case: schemathesis.Case[Any]) -> None:
    case.call_and_validate()

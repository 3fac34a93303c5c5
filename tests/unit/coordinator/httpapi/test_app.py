"""The HTTP API over a fake view, through a real uvicorn server on 127.0.0.1 in the test's loop."""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter

from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.server import ApiServer, serve
from sluicegate.coordinator.httpapi.view import (
    CheckpointInfo,
    CheckpointRefusedError,
    CheckpointStatus,
    JobStatus,
    StopInfo,
    SubtaskInfo,
    WorkerInfo,
)
from sluicegate.operators.exceptions import ConfigError, FatalError, RetryableError

Serve = Callable[[FastAPI], Awaitable[ApiServer]]


def checkpoint(checkpoint_id: int, status: CheckpointStatus) -> CheckpointInfo:
    done = status is CheckpointStatus.COMPLETED
    return CheckpointInfo(
        checkpoint_id=checkpoint_id,
        attempt=2,
        status=status,
        triggered_at=1_700_000_000.0 + checkpoint_id,
        completed_at=1_700_000_000.5 + checkpoint_id if done else None,
        full_bytes=4096 * checkpoint_id,
        incremental_bytes=1024,
        alignment_seconds=0.01,
        sync_seconds=0.02,
        async_seconds=0.3,
        reason=None if status is not CheckpointStatus.ABORTED else "subtask a#0 declined",
    )


class FakeView:
    """A `CoordinatorView` whose answers and failures a test sets."""

    def __init__(self) -> None:
        self.job = JobStatus(
            pipeline="words",
            state="running",
            attempt=2,
            last_completed_checkpoint=7,
            checkpoint_lag_seconds=3.5,
            restarts=1,
        )
        self.worker_list = [
            WorkerInfo(
                worker_id="w-1",
                slots=2,
                subtasks=["a#0"],
                seconds_since_heartbeat=0.4,
                alive=True,
            )
        ]
        self.subtask_list = [
            SubtaskInfo(subtask="a#0", worker_id="w-1", attempt=2),
            SubtaskInfo(subtask="b#0", worker_id=None, attempt=2),
        ]
        # Deliberately not in order: the API sorts.
        self.checkpoint_list = [
            checkpoint(6, CheckpointStatus.COMPLETED),
            checkpoint(8, CheckpointStatus.IN_PROGRESS),
            checkpoint(7, CheckpointStatus.ABORTED),
        ]
        self.next_checkpoint_id = 9
        self.refusal: str | None = None
        self.failure: Exception | None = None
        self.threads: set[int] = set()
        self.stop_calls: list[tuple[bool, float]] = []
        self.stop_state = "stopped"

    def _answer(self) -> None:
        self.threads.add(threading.get_ident())
        if self.failure is not None:
            raise self.failure

    def status(self) -> JobStatus:
        self._answer()
        return self.job

    def workers(self) -> list[WorkerInfo]:
        self._answer()
        return self.worker_list

    def subtasks(self) -> list[SubtaskInfo]:
        self._answer()
        return self.subtask_list

    async def checkpoints(self) -> list[CheckpointInfo]:
        self._answer()
        return self.checkpoint_list

    async def trigger_checkpoint(self) -> int:
        self._answer()
        if self.refusal is not None:
            raise CheckpointRefusedError(self.refusal)
        self.next_checkpoint_id += 1
        return self.next_checkpoint_id - 1

    async def stop(self, *, final_checkpoint: bool, wait_seconds: float) -> JobStatus:
        """Stops at once: the final checkpoint is the next id (none if not wanted)."""
        self._answer()
        self.stop_calls.append((final_checkpoint, wait_seconds))
        final = self.next_checkpoint_id if final_checkpoint else None
        note = "" if final_checkpoint else "none was asked for"
        info = StopInfo(phase="done", final_checkpoint=final, note=note)
        self.job = self.job.model_copy(update={"state": self.stop_state, "stop": info})
        return self.job


@pytest.fixture
def view() -> FakeView:
    return FakeView()


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("sg_test_records_in", "records read", registry=registry).inc(3)
    return registry


@pytest.fixture
async def served() -> AsyncIterator[Serve]:
    """Factory: ``await served(app)`` serves ``app`` on 127.0.0.1 and a free port until teardown."""
    servers: list[ApiServer] = []

    async def start(app: FastAPI) -> ApiServer:
        servers.append(await serve(app, "127.0.0.1", 0))
        return servers[-1]

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def http(
    served: Serve, view: FakeView, registry: CollectorRegistry
) -> AsyncIterator[httpx.AsyncClient]:
    api = await served(create_app(view, registry))
    async with httpx.AsyncClient(base_url=api.url, trust_env=False) as client:
        yield client


def assert_error_json(response: httpx.Response, status: int, error: str) -> dict[str, str]:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    body: dict[str, str] = response.json()
    assert set(body) == {"error", "message", "what_to_do"}
    assert body["error"] == error
    assert body["message"]
    assert body["what_to_do"]
    return body


async def test_reads_answer_what_the_view_says(http: httpx.AsyncClient, view: FakeView) -> None:
    assert (await http.get("/status")).json() == view.job.model_dump()
    assert (await http.get("/workers")).json() == [w.model_dump() for w in view.worker_list]
    assert (await http.get("/subtasks")).json() == [s.model_dump() for s in view.subtask_list]
    assert (await http.get("/healthz")).json() == {"status": "ok"}


async def test_checkpoints_come_newest_first(http: httpx.AsyncClient) -> None:
    answer = (await http.get("/checkpoints")).json()
    assert [c["checkpoint_id"] for c in answer] == [8, 7, 6]
    assert answer[1]["status"] == "aborted"
    assert answer[1]["reason"] == "subtask a#0 declined"


async def test_the_view_is_called_on_the_serving_loop(
    http: httpx.AsyncClient, view: FakeView
) -> None:
    await http.get("/status")
    await http.get("/checkpoints")
    assert view.threads == {threading.get_ident()}, "never from a thread pool"


async def test_trigger_answers_202_with_the_checkpoint_id(http: httpx.AsyncClient) -> None:
    first = await http.post("/checkpoints")
    assert first.status_code == 202
    assert first.json() == {"checkpoint_id": 9}
    assert (await http.post("/checkpoints")).json() == {"checkpoint_id": 10}


async def test_a_refused_trigger_answers_409(http: httpx.AsyncClient, view: FakeView) -> None:
    view.refusal = "checkpoint 8 is in flight"
    body = assert_error_json(await http.post("/checkpoints"), 409, "checkpoint_refused")
    assert "checkpoint 8 is in flight" in body["message"]


async def test_stop_passes_its_query_and_answers_the_status(
    http: httpx.AsyncClient, view: FakeView
) -> None:
    answer = await http.post("/stop?wait_seconds=30")
    assert answer.status_code == 200
    assert answer.json()["state"] == "stopped"
    assert answer.json()["stop"] == {"phase": "done", "final_checkpoint": 9, "note": ""}
    await http.post("/stop?final_checkpoint=false")
    assert view.stop_calls == [(True, 30.0), (False, 0.0)]
    body = assert_error_json(await http.post("/stop?wait_seconds=-1"), 422, "invalid_request")
    assert "wait_seconds" in body["message"]


async def test_unknown_routes_and_methods_answer_error_json(http: httpx.AsyncClient) -> None:
    body = assert_error_json(await http.get("/nothing/here"), 404, "not_found")
    assert "/nothing/here" in body["message"]
    response = await http.delete("/checkpoints")
    assert_error_json(response, 405, "method_not_allowed")
    assert set(response.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}


async def test_an_invalid_request_answers_422(
    served: Serve, view: FakeView, registry: CollectorRegistry
) -> None:
    app = create_app(view, registry)

    @app.get("/echo")
    async def echo(n: int) -> int:  # no route of the API takes input yet; this one does
        return n

    api = await served(app)
    async with httpx.AsyncClient(base_url=api.url, trust_env=False) as client:
        body = assert_error_json(await client.get("/echo?n=many"), 422, "invalid_request")
        assert "query.n" in body["message"]


async def test_an_unexpected_error_answers_500_without_internals(
    http: httpx.AsyncClient, view: FakeView
) -> None:
    view.failure = KeyError("/secret/path/to/state")
    response = await http.get("/workers")
    assert_error_json(response, 500, "internal_error")
    assert "secret" not in response.text
    assert "Traceback" not in response.text
    # The server survives to answer the next request.
    view.failure = None
    assert (await http.get("/workers")).status_code == 200


@pytest.mark.parametrize(
    ("failure", "status", "error"),
    [
        (RetryableError("the control topic is unavailable"), 503, "unavailable"),
        (FatalError("the checkpoint store is corrupt"), 500, "coordinator_error"),
    ],
)
async def test_sluicegate_errors_answer_with_their_message(
    http: httpx.AsyncClient, view: FakeView, failure: Exception, status: int, error: str
) -> None:
    view.failure = failure
    body = assert_error_json(await http.get("/status"), status, error)
    assert body["message"] == str(failure)


async def test_metrics_expose_the_injected_registry(http: httpx.AsyncClient) -> None:
    response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "sg_test_records_in_total 3.0" in response.text
    openmetrics = await http.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text;")
    assert openmetrics.text.endswith("# EOF\n")


@pytest.mark.parametrize(
    "accept",
    [
        "application/openmetrics-text; version=banana",
        "text/plain; version=banana",
        "application/openmetrics-text; version=banana, text/plain;q=0.5",
    ],
)
async def test_an_unparsable_accept_version_answers_200_in_the_prometheus_text_format(
    http: httpx.AsyncClient, accept: str
) -> None:
    response = await http.get("/metrics", headers={"Accept": accept})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "sg_test_records_in_total 3.0" in response.text


async def test_the_spec_describes_every_operation_and_its_errors(
    http: httpx.AsyncClient,
) -> None:
    spec = (await http.get("/openapi.json")).json()
    assert spec["info"]["title"] == "sluicegate coordinator"
    assert spec["info"]["version"]
    operations = {
        (method.upper(), path): operation
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
    }
    assert set(operations) == {
        ("GET", "/status"),
        ("GET", "/workers"),
        ("GET", "/subtasks"),
        ("GET", "/checkpoints"),
        ("POST", "/checkpoints"),
        ("POST", "/stop"),
        ("GET", "/metrics"),
        ("GET", "/healthz"),
    }
    for operation in operations.values():
        assert operation["summary"]
        assert operation["description"]
    trigger = operations["POST", "/checkpoints"]["responses"]
    assert set(trigger) == {"202", "401", "403", "409", "500", "503"}
    assert "security" not in operations["POST", "/checkpoints"]  # no tokens: an open API
    error_ref = trigger["409"]["content"]["application/json"]["schema"]["$ref"]
    assert error_ref == "#/components/schemas/ErrorBody"
    metrics = operations["GET", "/metrics"]["responses"]["200"]["content"]
    assert set(metrics) == {"text/plain", "application/openmetrics-text"}


async def test_serve_on_port_zero_reports_the_real_port_and_stops(
    view: FakeView, registry: CollectorRegistry
) -> None:
    sigint, sigterm = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    api = await serve(create_app(view, registry), "127.0.0.1", 0)
    try:
        assert api.port != 0
        assert api.url == f"http://127.0.0.1:{api.port}"
        async with httpx.AsyncClient(base_url=api.url, trust_env=False) as client:
            assert (await client.get("/healthz")).status_code == 200
        assert signal.getsignal(signal.SIGINT) is sigint, "signals belong to the coordinator"
        assert signal.getsignal(signal.SIGTERM) is sigterm
    finally:
        await api.stop()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", api.port)


async def test_serve_on_a_busy_port_raises_config_error(
    view: FakeView, registry: CollectorRegistry
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            await serve(create_app(view, registry), "127.0.0.1", port)

"""Requests a web page could make a browser send are refused before any route runs: the
attacks of issue 13 (a text/plain POST with a foreign Origin approved an email and stopped the
job) against an API without tokens, as on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.routes.approvals import approvals_router
from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.auth import Scope, identity
from tests.unit.coordinator.httpapi.test_app import FakeView

EVIL = {"Origin": "https://evil.example", "Content-Type": "text/plain"}


@pytest.fixture
def view() -> FakeView:
    return FakeView()


@pytest.fixture
async def api(view: FakeView) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(view, CollectorRegistry(), allowed_origins=["https://ops.example/"])
    # Nothing listens at this bootstrap: a request that got to the route would fail with 503.
    topics = AgentTopics(tasks="t", approvals="a", events="e", results="r")
    decider = identity(None, Scope.APPROVE)
    app.include_router(approvals_router("127.0.0.1:1", {"desk": topics}, decider=decider))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8470") as c:
        yield c


async def test_the_csrf_of_the_issue_is_refused(api: httpx.AsyncClient, view: FakeView) -> None:
    approve = await api.post("/agents/desk/runs/r1/approve", content=b"{}", headers=EVIL)
    stop = await api.post("/stop", content=b"x", headers=EVIL)
    assert (approve.status_code, stop.status_code) == (403, 403)
    assert approve.json()["error"] == stop.json()["error"] == "cross_origin"
    assert "access-control-allow-origin" not in stop.headers
    assert view.stop_calls == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},  # a form or fetch without a body
        {"Origin": "null"},  # a sandboxed frame
        {"Origin": "http://127.0.0.1:8470"},  # even our own address: a DNS rebinding page
    ],
)
async def test_any_origin_not_allowed_is_refused_on_every_method(
    api: httpx.AsyncClient, view: FakeView, headers: dict[str, str]
) -> None:
    assert (await api.post("/stop", headers=headers)).status_code == 403
    assert (await api.get("/status", headers=headers)).status_code == 403
    assert view.stop_calls == []


async def test_an_allowed_origin_passes(api: httpx.AsyncClient, view: FakeView) -> None:
    answer = await api.post("/stop", headers={"Origin": "https://ops.example"})
    assert answer.status_code == 200
    assert len(view.stop_calls) == 1


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""],
)
async def test_a_body_that_is_not_json_is_refused_with_415(
    api: httpx.AsyncClient, view: FakeView, content_type: str
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    stop = await api.post("/stop", content=b'{"x": 1}', headers=headers)
    approve = await api.post("/agents/desk/runs/r1/approve", content=b"{}", headers=headers)
    assert (stop.status_code, approve.status_code) == (415, 415)
    assert stop.json()["error"] == "unsupported_media_type"
    assert view.stop_calls == []


async def test_json_or_no_body_passes(api: httpx.AsyncClient, view: FakeView) -> None:
    assert (await api.post("/stop", json={})).status_code == 200
    json_utf8 = {"Content-Type": "application/json; charset=utf-8"}
    assert (await api.post("/stop", content=b"{}", headers=json_utf8)).status_code == 200
    assert (await api.post("/stop")).status_code == 200
    assert len(view.stop_calls) == 3
    # The approval route is reached (and fails on the missing broker, not on the guard).
    reached = await api.post("/agents/desk/runs/r1/approve", json={})
    assert reached.status_code == 503


@pytest.fixture
async def with_console(view: FakeView) -> AsyncIterator[httpx.AsyncClient]:
    """The API with the console's prefix given to the guard, and one console route."""
    app = create_app(view, CollectorRegistry(), console_prefix="/console/")

    @app.post("/console/echo")
    async def echo() -> dict[str, str]:
        return {"reached": "yes"}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8470") as c:
        yield c


async def test_the_console_accepts_its_own_origin_and_forms(
    with_console: httpx.AsyncClient,
) -> None:
    form = {"Origin": "http://127.0.0.1:8470", "Content-Type": "application/x-www-form-urlencoded"}
    answer = await with_console.post("/console/echo", content=b"a=1", headers=form)
    assert answer.status_code == 200, answer.text
    assert (await with_console.post("/console/echo", content=b"a=1", headers={
        "Content-Type": "application/x-www-form-urlencoded"})).status_code == 200  # fmt: skip


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:8471",  # another port of the same host: same site, not same origin
        "https://127.0.0.1:8470",  # another scheme
        "http://localhost:8470",  # another name of the same address
        "null",
        "https://evil.example",
    ],
)
async def test_the_console_refuses_every_other_origin(
    with_console: httpx.AsyncClient, origin: str
) -> None:
    form = {"Origin": origin, "Content-Type": "application/x-www-form-urlencoded"}
    answer = await with_console.post("/console/echo", content=b"a=1", headers=form)
    assert answer.status_code == 403
    assert answer.json()["error"] == "cross_origin"


async def test_outside_the_console_the_own_origin_and_forms_are_still_refused(
    with_console: httpx.AsyncClient, view: FakeView
) -> None:
    own = await with_console.post("/stop", headers={"Origin": "http://127.0.0.1:8470"})
    form = await with_console.post(
        "/stop", content=b"a=1", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    text = await with_console.post(
        "/console/echo", content=b"a=1", headers={"Content-Type": "text/plain"}
    )
    assert (own.status_code, form.status_code, text.status_code) == (403, 415, 415)
    assert view.stop_calls == []

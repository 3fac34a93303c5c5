"""The console's routes over fake views: sign-in and its cookie, the anti-forgery token, the
scopes, the guard's "same origin only" for the console, auth off on loopback only, and every
hostile value rendered as text."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.exceptions import RunNotWaitingError
from sluicegate.console import COOKIE, AgentDesk, ConsoleJob, console_router
from sluicegate.console.inbox import WaitingCall
from sluicegate.console.routes import WATCH_SECONDS
from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.auth import ApiTokens, Principal, Scope
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.protocol.messages import SnapshotFile, StateHandle
from sluicegate.operators.storage import NotFoundError, open_storage
from sluicegate.operators.storage.manifest import CheckpointManifest, SubtaskSnapshot
from sluicegate.testing import word_count
from tests.unit.coordinator.httpapi.test_app import FakeView
from tests.unit.coordinator.httpapi.test_savepoint_routes import FakeView as FakeSavepoints

ANN, RITA, OLGA = "ann-token-0123456789", "rita-token-0123456789", "olga-token-0123456789"
TOKENS = ApiTokens({
    ANN: Principal.granted("ann", [Scope.APPROVE]),
    RITA: Principal.granted("rita", [Scope.READ]),
    OLGA: Principal.granted("olga", [Scope.OPERATE]),
})  # fmt: skip
HOSTILE = '<script>alert("x")</script>'
BASE = "http://127.0.0.1:8470"


class FakeDesk(AgentDesk):
    """An `AgentDesk` with one waiting call whose arguments and goal are hostile."""

    def __init__(self) -> None:
        topics = AgentTopics(tasks="t", approvals="a", events="e", results="r")
        super().__init__("127.0.0.1:1", {"desk": topics})  # never contacted
        self.decisions: list[tuple[str, str, bool, str, str | None]] = []
        self.waits = True

    async def waiting(self) -> list[WaitingCall]:
        if not self.waits:
            return []
        arguments: Mapping[str, Any] = {"to": "a@example.com", "body": HOSTILE}
        return [WaitingCall("desk", "r-1", "call-1", "send_email", arguments, 100.0, HOSTILE, 3)]

    async def decide(
        self, agent: str, run_id: str, *, call_id: str, approved: bool, by: str, reason: str | None
    ) -> None:
        if not self.waits:
            raise RunNotWaitingError(agent, run_id, "done")
        self.decisions.append((run_id, call_id, approved, by, reason))
        self.waits = False


class FakeManifests:
    """Checkpoint 6's manifest, with a hostile subtask name; no other."""

    async def load(self, checkpoint_id: int) -> CheckpointManifest:
        if checkpoint_id != 6:
            raise NotFoundError(f"checkpoints/{checkpoint_id}/manifest.json")
        return manifest(6)


def manifest(checkpoint_id: int) -> CheckpointManifest:
    def snapshot(files: int, uploaded: int, segments: int) -> SubtaskSnapshot:
        def file(name: str) -> SnapshotFile:
            return SnapshotFile(name=name, path=f"state/{name}", size=100, sha256="0" * 64)

        handle = StateHandle(
            checkpoint_id=checkpoint_id - (1 if segments else 0),
            files=tuple(file(f"{n:06}.sst") for n in range(files)),
            full_bytes=100 * files,
            uploaded_bytes=uploaded,
            changelog=tuple(file(f"changelog-{n:012}") for n in range(segments)),
        )
        return SubtaskSnapshot(
            positions={}, handle=handle, alignment_seconds=0.25, sync_seconds=0.5,
            async_seconds=1.5,
        )  # fmt: skip

    return CheckpointManifest(
        pipeline="p",
        checkpoint_id=checkpoint_id,
        attempt=2,
        completed_at=1_700_000_010.0,
        triggered_at=1_700_000_008.0,
        subtasks={
            "counter#0": snapshot(2, 200, 0),
            "counter#1": snapshot(2, 100, 0),
            "counter#2": snapshot(2, 0, 3),
            HOSTILE: snapshot(0, 0, 0),
        },
    )


def app_with(
    tokens: ApiTokens | None,
    desk: FakeDesk,
    savepoints: FakeSavepoints | None = None,
    clock: Callable[[], float] = lambda: 160.0,
) -> FastAPI:
    service = Coordinator(
        word_count(uuid.uuid4().hex[:8]),
        bootstrap="127.0.0.1:1",  # never contacted: the coordinator does not run
        storage=open_storage("memory://"),
        settings=CoordinatorSettings(),
    )
    app = create_app(FakeView(), CollectorRegistry(), tokens=tokens, console_prefix="/console/")
    job = ConsoleJob(
        FakeView(), savepoints or FakeSavepoints(), service.facts, service.graph, FakeManifests()
    )
    app.include_router(console_router(job, desk, tokens=tokens, clock=clock))
    return app


@pytest.fixture
def desk() -> FakeDesk:
    return FakeDesk()


@pytest.fixture
async def browser(desk: FakeDesk) -> Any:
    transport = httpx.ASGITransport(app=app_with(TOKENS, desk))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


async def sign_in(client: httpx.AsyncClient, token: str) -> str:
    """Sign in; the anti-forgery token of the session's pages."""
    signed = await client.post("/console/sign-in", data={"token": token}, headers=same_origin())
    assert signed.status_code == 303, signed.text
    page = await client.get("/console/approvals")
    assert page.status_code == 200
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def same_origin() -> dict[str, str]:
    return {"Origin": BASE}


async def test_pages_need_a_sign_in(browser: httpx.AsyncClient) -> None:
    for path in ("/console/job", "/console/checkpoints", "/console/approvals", "/console/runs"):
        answer = await browser.get(path)
        assert (answer.status_code, answer.headers["location"]) == (303, "/console/sign-in")
    form = await browser.get("/console/sign-in")
    assert 'type="password"' in form.text
    assert "default-src 'none'" in form.headers["content-security-policy"]


async def test_a_wrong_token_is_refused_and_a_right_one_gets_a_strict_cookie(
    browser: httpx.AsyncClient,
) -> None:
    wrong = await browser.post("/console/sign-in", data={"token": "nope-0123456789abcdef"})
    assert wrong.status_code == 401
    assert COOKIE not in wrong.headers.get("set-cookie", "")
    right = await browser.post("/console/sign-in", data={"token": ANN}, headers=same_origin())
    cookie = right.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Path=/console/" in cookie
    assert "Secure" not in cookie  # plain HTTP here; over TLS see the next test
    assert ANN not in cookie
    job = await browser.get("/console/job")
    assert job.status_code == 200
    assert "Signed in as ann" in job.text
    assert "tokenizer" in job.text
    assert "counter" in job.text


async def test_over_tls_the_cookie_is_secure(desk: FakeDesk) -> None:
    transport = httpx.ASGITransport(app=app_with(TOKENS, desk))
    async with httpx.AsyncClient(transport=transport, base_url="https://ops.example") as client:
        right = await client.post("/console/sign-in", data={"token": ANN})
    assert "Secure" in right.headers["set-cookie"]


async def test_hostile_values_render_as_text(browser: httpx.AsyncClient) -> None:
    await sign_in(browser, ANN)
    page = (await browser.get("/console/approvals")).text
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "<script" not in page


async def test_an_approval_is_recorded_under_the_signed_in_name(
    browser: httpx.AsyncClient, desk: FakeDesk
) -> None:
    csrf = await sign_in(browser, ANN)
    form = {"csrf": csrf, "call_id": "call-1", "decision": "approve", "reason": "ok <b>"}
    decided = await browser.post("/console/approvals/desk/r-1", data=form, headers=same_origin())
    assert decided.status_code == 303
    assert desk.decisions == [("r-1", "call-1", True, "ann", "ok <b>")]
    after = await browser.get("/console/approvals")
    assert "Run r-1: approved by ann." in after.text
    again = await browser.post("/console/approvals/desk/r-1", data=form, headers=same_origin())
    assert again.status_code == 303
    assert "Not decided" in (await browser.get("/console/approvals")).text


async def test_a_form_without_the_sessions_token_is_refused(
    browser: httpx.AsyncClient, desk: FakeDesk
) -> None:
    await sign_in(browser, ANN)
    for csrf in ("", "forged-token"):
        form = {"csrf": csrf, "call_id": "call-1", "decision": "approve"}
        answer = await browser.post("/console/approvals/desk/r-1", data=form)
        assert answer.status_code == 403
    assert desk.decisions == []


async def test_another_origin_cannot_post_even_with_the_cookie_and_token(
    browser: httpx.AsyncClient, desk: FakeDesk
) -> None:
    csrf = await sign_in(browser, ANN)
    form = {"csrf": csrf, "call_id": "call-1", "decision": "approve"}
    for origin in ("http://127.0.0.1:9999", "https://evil.example", "null"):
        answer = await browser.post(
            "/console/approvals/desk/r-1", data=form, headers={"Origin": origin}
        )
        assert answer.status_code == 403
        assert answer.json()["error"] == "cross_origin"
    assert desk.decisions == []


async def test_a_read_only_token_sees_no_button_and_is_refused_posting_anyway(
    browser: httpx.AsyncClient, desk: FakeDesk
) -> None:
    csrf = await sign_in(browser, RITA)
    page = (await browser.get("/console/approvals")).text
    assert "send_email for run r-1" in page
    assert ">Approve<" not in page
    assert ">Reject<" not in page
    form = {"csrf": csrf, "call_id": "call-1", "decision": "approve"}
    answer = await browser.post("/console/approvals/desk/r-1", data=form, headers=same_origin())
    assert answer.status_code == 403
    assert "lacks the scope &#x27;approve&#x27;" in answer.text
    assert desk.decisions == []
    savepoint = await browser.post("/console/savepoints", data={"csrf": csrf})
    assert savepoint.status_code == 403


async def test_an_operator_creates_a_savepoint_from_the_checkpoints_page(
    browser: httpx.AsyncClient,
) -> None:
    csrf = await sign_in(browser, OLGA)
    page = (await browser.get("/console/checkpoints")).text
    assert "Create savepoint" in page
    made = await browser.post("/console/savepoints", data={"csrf": csrf, "name": "before-up"})
    assert made.status_code == 303
    assert (
        "Savepoint before-up requested (waiting)."
        in (await browser.get("/console/checkpoints")).text
    )


async def test_sign_out_ends_the_session(browser: httpx.AsyncClient) -> None:
    csrf = await sign_in(browser, ANN)
    out = await browser.post("/console/sign-out", data={"csrf": csrf})
    assert (out.status_code, out.headers["location"]) == (303, "/console/sign-in")
    assert (await browser.get("/console/job")).status_code == 303


async def test_with_auth_off_the_console_answers_only_on_loopback(desk: FakeDesk) -> None:
    transport = httpx.ASGITransport(app=app_with(None, desk))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        page = await client.get("/console/approvals")
        assert page.status_code == 200
        assert COOKIE in page.headers["set-cookie"]
        assert ">Approve<" in page.text  # unauthenticated holds every scope, as the API's
    for base in ("http://localhost:8470", "http://[::1]:8470", "http://[::1]"):
        async with httpx.AsyncClient(transport=transport, base_url=base) as client:
            assert (await client.get("/console/approvals")).status_code == 200, base
    for base in ("http://rebound.example", "http://rebound.example:8470", "http://10.0.0.5"):
        async with httpx.AsyncClient(transport=transport, base_url=base) as client:
            assert (await client.get("/console/approvals")).status_code == 403, base


async def test_a_watched_inbox_reloads_itself_without_a_script(browser: httpx.AsyncClient) -> None:
    await sign_in(browser, RITA)
    plain = await browser.get("/console/approvals")
    assert 'http-equiv="refresh"' not in plain.text
    assert 'href="/console/approvals?watch=1"' in plain.text
    watched = await browser.get("/console/approvals", params={"watch": "1"})
    assert f'<meta http-equiv="refresh" content="{WATCH_SECONDS}">' in watched.text
    assert "Stop watching" in watched.text
    assert "<script" not in watched.text
    assert "script-src" not in watched.headers["content-security-policy"]  # default-src 'none'
    job = await browser.get("/console/job", params={"watch": "1"})
    assert 'http-equiv="refresh"' not in job.text  # the inbox only

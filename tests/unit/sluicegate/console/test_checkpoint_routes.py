"""The console's checkpoint detail and its stop-with-savepoint behind a confirmation: what the
manifest records and nothing else, escaped; the confirmation's scope, anti-forgery token,
origin and explicit confirm."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from sluicegate.console.checkpoint_pages import snapshot_kind
from tests.unit.coordinator.httpapi.test_savepoint_routes import FakeView as FakeSavepoints
from tests.unit.sluicegate.console.test_console_routes import (
    ANN,
    BASE,
    HOSTILE,
    OLGA,
    RITA,
    TOKENS,
    FakeDesk,
    app_with,
    manifest,
    same_origin,
    sign_in,
)


@pytest.fixture
def savepoints() -> FakeSavepoints:
    return FakeSavepoints()


@pytest.fixture
async def browser(savepoints: FakeSavepoints) -> Any:
    transport = httpx.ASGITransport(app=app_with(TOKENS, FakeDesk(), savepoints))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


def test_how_each_subtask_wrote_its_state_is_read_from_its_handle() -> None:
    kinds = {name: snapshot_kind(s.handle) for name, s in manifest(6).subtasks.items()}
    assert kinds == {
        "counter#0": "full",
        "counter#1": "incremental",
        "counter#2": "changelog",
        HOSTILE: "empty",
    }


async def test_the_history_links_a_completed_checkpoint_to_its_detail(
    browser: httpx.AsyncClient,
) -> None:
    await sign_in(browser, RITA)
    page = (await browser.get("/console/checkpoints")).text
    assert '<a href="/console/checkpoints/6">6</a>' in page
    assert 'href="/console/checkpoints/7"' not in page  # aborted: no manifest to show
    assert 'href="/console/checkpoints/8"' not in page  # in progress


async def test_a_checkpoints_detail_shows_each_subtask_as_its_manifest_records_it(
    browser: httpx.AsyncClient,
) -> None:
    await sign_in(browser, RITA)
    answer = await browser.get("/console/checkpoints/6")
    assert answer.status_code == 200
    page = answer.text
    assert "<h1>Checkpoint 6</h1>" in page
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", page)
    cells = [row.split("</td><td>") for row in rows]
    by_subtask = {c[0]: c[1:] for c in cells if len(c) == 10}
    assert by_subtask["counter#0"] == [
        "0.25 s", "0.50 s", "1.50 s", "200 B", "200 B", "full", "2", "0", "#6",
    ]  # fmt: skip
    assert by_subtask["counter#1"][5] == "incremental"
    assert by_subtask["counter#2"][5:] == ["changelog", "2", "3", "#5"]
    assert "<dd>2.00 s</dd>" in page  # trigger to completion
    assert HOSTILE not in page
    assert "&lt;script&gt;" in page
    missing = await browser.get("/console/checkpoints/7")
    assert missing.status_code == 404
    assert "retention" in missing.text


async def test_stopping_with_a_savepoint_asks_first_and_then_stops(
    browser: httpx.AsyncClient, savepoints: FakeSavepoints
) -> None:
    csrf = await sign_in(browser, OLGA)
    page = (await browser.get("/console/checkpoints")).text
    assert 'action="/console/savepoints/stop"' in page
    asking = await browser.get("/console/savepoints/stop", params={"name": "final-1"})
    assert asking.status_code == 200
    assert "Every subtask of" in asking.text
    assert "A savepoint named final-1" in asking.text
    assert savepoints.asked == []  # opening the confirmation does nothing
    unconfirmed = {"csrf": csrf, "name": "final-1"}
    refused = await browser.post("/console/savepoints/stop", data=unconfirmed)
    assert refused.status_code == 400
    assert savepoints.asked == []
    confirmed = {**unconfirmed, "confirm": "stop"}
    stopped = await browser.post("/console/savepoints/stop", data=confirmed, headers=same_origin())
    assert stopped.status_code == 303
    assert savepoints.asked == [("final-1", True)]
    after = (await browser.get("/console/checkpoints")).text
    assert "Stopping the job with savepoint final-1 (waiting)." in after


async def test_a_stop_needs_operate_the_sessions_token_and_the_same_origin(
    browser: httpx.AsyncClient, savepoints: FakeSavepoints
) -> None:
    csrf = await sign_in(browser, ANN)  # approve, not operate
    assert 'savepoints/stop"' not in (await browser.get("/console/checkpoints")).text
    assert (await browser.get("/console/savepoints/stop")).status_code == 403
    form = {"csrf": csrf, "confirm": "stop"}
    assert (await browser.post("/console/savepoints/stop", data=form)).status_code == 403
    await browser.post("/console/sign-out", data={"csrf": csrf})
    csrf = await sign_in(browser, OLGA)
    forged = {"csrf": "forged-token", "confirm": "stop"}
    assert (await browser.post("/console/savepoints/stop", data=forged)).status_code == 403
    other = {"Origin": "https://evil.example"}
    form = {"csrf": csrf, "confirm": "stop"}
    answer = await browser.post("/console/savepoints/stop", data=form, headers=other)
    assert answer.status_code == 403
    bad_name = {**form, "name": "../x"}
    assert (await browser.post("/console/savepoints/stop", data=bad_name)).status_code == 400
    assert (await browser.get("/console/savepoints/stop?name=%3Cb%3E")).status_code == 400
    assert savepoints.asked == []


async def test_the_confirmation_escapes_the_name_it_was_given(
    browser: httpx.AsyncClient,
) -> None:
    await sign_in(browser, OLGA)
    answer = await browser.get("/console/savepoints/stop", params={"name": HOSTILE})
    assert answer.status_code == 400
    assert "<script" not in answer.text

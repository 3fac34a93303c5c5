"""The web console in Debian's chromium (Selenium, headless), against a real coordinator, a
worker hosting the refund-desk agent and the session's broker: sign in; the Job and
Checkpoints pages; a savepoint created from the page and listed; two runs reach their approval
in the inbox; one is approved there and completes, its timeline naming the signed-in person; a
page of another origin that auto-submits an approval fails; a read-only token sees no approve
button and gets 403 posting anyway; a checkpoint's detail per subtask; last, the job stopped
with a savepoint from behind its confirmation page. Each page is saved as a PNG: into a
temporary folder, or into docs/images/console-*.png with ``SLUICEGATE_UPDATE_SCREENSHOTS=1``
(`make screenshots`), so that a test run leaves the checkout as it was.

The coordinator, the worker and the API run in an event loop of their own thread: Selenium
blocks the test's thread on every command."""

from __future__ import annotations

import asyncio
import http.server
import os
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from prometheus_client import CollectorRegistry
from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from sluicegate import AgentTopics, add_agent
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.history.events import RunHistory
from sluicegate.agents.messages import TaskRequest
from sluicegate.cli.api_app import coordinator_app
from sluicegate.console.routes import WATCH_SECONDS
from sluicegate.coordinator.httpapi.auth import ApiTokens, Principal, Scope
from sluicegate.coordinator.httpapi.server import ApiServer, serve
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.demos.refund_desk.agent import refund_desk, task_goal
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.worker import Worker
from sluicegate.operators.runtime.worker_settings import WorkerSettings
from sluicegate.operators.storage import open_storage
from tests.helpers import wait_for_sync

T = TypeVar("T")

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
DOC_IMAGES = Path(__file__).resolve().parents[3] / "docs" / "images"
IMAGES = (
    DOC_IMAGES
    if os.environ.get("SLUICEGATE_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.mkdtemp(prefix="console-screenshots-"))
)
ANN, RITA = "ann-console-token-0123456789", "rita-console-token-0123456789"
TOKENS = ApiTokens({
    ANN: Principal.granted("ann", [Scope.APPROVE, Scope.OPERATE]),
    RITA: Principal.granted("rita", [Scope.READ]),
})  # fmt: skip
HOSTILE = "<script>document.title='owned'</script>"

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
)


@dataclass
class Console:
    """A running job with its API, driven from the test's thread."""

    url: str
    topics: AgentTopics
    bootstrap: str
    loop: asyncio.AbstractEventLoop

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def status_of(self, run_id: str) -> str | None:
        async def status() -> str | None:
            history = RunHistory(self.bootstrap, "refund-desk", self.topics.events)
            runs = {r.run_id: r.status for r in await history.runs()}
            return runs.get(run_id)

        return self.run(status())


@pytest.fixture(scope="module")
def console(kafka_bootstrap: str) -> Iterator[Console]:
    tag = uuid.uuid4().hex[:8]
    root = Path(tempfile.mkdtemp(prefix="sluicegate-console-"))
    topics = AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="console-job", daemon=True)
    thread.start()
    with WorldServer() as world:
        p = Pipeline(f"console-{tag}")
        add_agent(p, refund_desk(world.url), partitions=4, parallelism=2, topics=topics)
        graph = p.build()
        storage = open_storage(root / "storage")
        service = Coordinator(
            graph, bootstrap=kafka_bootstrap, storage=storage,
            settings=CoordinatorSettings(interval_seconds=0.5),
        )  # fmt: skip
        worker = Worker(
            graph, WorkerSettings(worker_id="w-1", slots=8, state_dir=root / "state"),
            bootstrap=kafka_bootstrap, storage=storage,
        )  # fmt: skip

        async def start() -> tuple[ApiServer, list[asyncio.Task[None]]]:
            app = coordinator_app(service, CollectorRegistry(), TOKENS)
            server = await serve(app, "127.0.0.1", 0)
            tasks = [asyncio.create_task(service.run()), asyncio.create_task(worker.run())]
            return server, tasks

        server, tasks = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
        job = Console(server.url, topics, kafka_bootstrap, loop)
        try:
            wait_for_sync(
                lambda: service.facts().checkpoints.completed > 0,
                timeout_s=90, interval_s=0.2, what="a first completed checkpoint",
            )  # fmt: skip
            yield job
        finally:

            async def stop() -> None:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await server.stop()

            asyncio.run_coroutine_threadsafe(stop(), loop).result(60)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--disable-gpu"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


class AttackerPage:
    """Another origin (another port of 127.0.0.1): a page that auto-submits an approval."""

    def __init__(self, target: str) -> None:
        page = (
            "<!doctype html><title>win a prize</title>"
            f'<form method="post" action="{target}">'
            '<input name="csrf" value="guessed"><input name="call_id" value="">'
            '<input name="decision" value="approve"></form>'
            "<script>document.forms[0].submit()</script>"
        ).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def shot(driver: WebDriver, name: str) -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(700, min(int(height) + 40, 2400)))
    path = IMAGES / f"console-{name}.png"
    assert driver.save_screenshot(str(path))
    assert path.read_bytes().startswith(b"\x89PNG")
    driver.set_window_size(1280, 1000)


def sign_in(driver: WebDriver, url: str, token: str) -> None:
    driver.get(f"{url}/console/")
    assert driver.current_url.endswith("/console/sign-in")
    field = driver.find_element(By.ID, "token")
    assert driver.switch_to.active_element == field  # the form is ready for the keyboard
    field.send_keys(token)
    field.submit()
    wait_for_sync(
        lambda: driver.current_url.endswith("/console/job"), timeout_s=10, what="the Job page"
    )


def shows(driver: WebDriver, text: str, timeout_s: float = 10) -> None:
    """Wait until the page shows ``text``: a click on a form's button returns before the page
    it leads to has replaced the old one, whose elements then go stale, and while the new one
    loads it may have no ``main`` yet. Chromium reports an element of the replaced page
    either as stale or as a node that "does not belong to the document"."""

    def shown() -> bool:
        try:
            return text in driver.find_element(By.TAG_NAME, "main").text
        except (StaleElementReferenceException, NoSuchElementException):
            return False
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return False
            raise

    wait_for_sync(shown, timeout_s=timeout_s, interval_s=0.1, what=f"{text!r} on the page")


def reload_until(driver: WebDriver, url: str, text: str, timeout_s: float) -> None:
    def shown() -> bool:
        driver.get(url)
        return text in driver.find_element(By.TAG_NAME, "main").text

    wait_for_sync(shown, timeout_s=timeout_s, interval_s=0.5, what=f"{text!r} at {url}")


def records_of(driver: WebDriver, url: str, caption: str, first_cell: str) -> tuple[int, int]:
    """Records in and out in the row of ``first_cell`` of the Job page's table whose caption
    starts with ``caption`` (reloaded); 0 for a number not reported ("—")."""
    driver.get(f"{url}/console/job")
    row = driver.find_element(
        By.XPATH, f"//table[starts-with(caption, '{caption}')]//tr[td[1]='{first_cell}']"
    )
    cells = [cell.text.replace(",", "") for cell in row.find_elements(By.TAG_NAME, "td")]
    records_in, records_out = cells[-3], cells[-2]
    return (
        int(records_in) if records_in.isdigit() else 0,
        int(records_out) if records_out.isdigit() else 0,
    )


def test_a_person_approves_in_the_console_and_nobody_else_can(
    console: Console, browser: WebDriver
) -> None:
    tag = uuid.uuid4().hex[:6]
    first, second = f"console-{tag}-a", f"console-{tag}-b"
    tasks = [
        TaskRequest(
            run_id=first,
            goal=f"{task_goal(f'ord-{tag}a', research=1)} {HOSTILE}",
            metadata={"tenant": f"acme-{tag}"},
        ),
        TaskRequest(run_id=second, goal=task_goal(f"ord-{tag}b", research=1)),
    ]
    console.run(submit_tasks(console.bootstrap, console.topics.tasks, tasks))
    url = console.url

    # Sign in; the sign-in page first, as a person sees it.
    browser.get(f"{url}/console/sign-in")
    shot(browser, "sign-in")
    sign_in(browser, url, ANN)
    main = browser.find_element(By.TAG_NAME, "main").text
    assert "Signed in as ann" in browser.find_element(By.TAG_NAME, "header").text
    assert "refund-desk" in main
    assert "w-1" in main
    assert "alive" in main

    # Checkpoints: the history, and a savepoint created from the page and listed.
    browser.find_element(By.LINK_TEXT, "Checkpoints").click()
    shows(browser, "completed")
    browser.find_element(By.ID, "savepoint-name").send_keys(f"sp-{tag}")
    browser.find_element(By.XPATH, "//button[text()='Create savepoint']").click()
    shows(browser, f"Savepoint sp-{tag} requested")
    reload_until(browser, f"{url}/console/checkpoints", "stored", timeout_s=60)
    assert f"sp-{tag}" in browser.find_element(By.TAG_NAME, "main").text
    shot(browser, "checkpoints")

    # A completed checkpoint's detail, from its link in the history: a row per subtask.
    browser.find_element(By.XPATH, "//table//a[contains(@href, '/console/checkpoints/')]").click()
    shows(browser, "Per subtask")
    main = browser.find_element(By.TAG_NAME, "main").text
    assert "refund-desk#0" in main
    assert re.search(r"\b(full|incremental|changelog|empty)\b", main)
    shot(browser, "checkpoint")

    # The inbox: both runs reach their approval; the hostile goal is text, never a script.
    inbox = f"{url}/console/approvals"
    reload_until(browser, inbox, f"send_email for run {first}", timeout_s=90)
    reload_until(browser, inbox, f"send_email for run {second}", timeout_s=30)
    assert HOSTILE in browser.find_element(By.TAG_NAME, "main").text
    assert browser.find_elements(By.TAG_NAME, "script") == []
    assert browser.title != "owned"
    shot(browser, "approvals")

    # Watched, the inbox reloads itself (a meta refresh: the page has no script).
    browser.get(f"{inbox}?watch=1")
    loaded = browser.execute_script("return performance.timeOrigin")
    wait_for_sync(
        lambda: browser.execute_script("return performance.timeOrigin") != loaded,
        timeout_s=WATCH_SECONDS + 15, interval_s=0.5, what="the watched inbox reloading itself",
    )  # fmt: skip
    shows(browser, f"send_email for run {first}")
    browser.get(inbox)

    # Approve the first, with a reason, from the keyboard-reachable form.
    form = browser.find_element(By.XPATH, f"//form[contains(@action, '/{first}')]")
    form.find_element(By.TAG_NAME, "textarea").send_keys("customer verified")
    form.find_element(By.XPATH, ".//button[@value='approve']").click()
    shows(browser, f"Run {first}: approved by ann.")
    wait_for_sync(
        lambda: console.status_of(first) == "done", timeout_s=60, interval_s=0.5,
        what=f"{first} done",
    )  # fmt: skip
    # The Job page: the agent's records in and out, per operator and per subtask, as the
    # workers' heartbeats report them (the run read its task and its approval).
    browser.get(f"{url}/console/job")
    wait_for_sync(
        lambda: records_of(browser, url, "Operators", "refund-desk")[0] > 0, timeout_s=30,
        interval_s=0.5, what="records in of refund-desk on the Job page",
    )  # fmt: skip
    per_subtask = [records_of(browser, url, "Subtasks", f"refund-desk#{i}") for i in (0, 1)]
    assert sum(n for n, _ in per_subtask) > 0, per_subtask
    shot(browser, "job")
    reload_until(browser, f"{url}/console/runs/refund-desk/{first}", "approved by ann", 30)
    assert "customer verified" in browser.find_element(By.TAG_NAME, "main").text
    shot(browser, "run")
    # Fork it after step 1, behind the confirmation page; the fork runs as its own.
    browser.find_element(By.CSS_SELECTOR, "#step option[value='1']").click()
    browser.find_element(By.XPATH, "//button[@value='fork']").click()
    shows(browser, f"starts from the state of run {first} after step 1")
    shot(browser, "fork")
    browser.find_element(By.XPATH, "//button[text()='Fork the run']").click()
    shows(browser, "requested by ann.")
    notice = browser.find_element(By.CSS_SELECTOR, "main .notice").text
    forked = re.search(r"Fork (\S+) of run", notice)
    assert forked is not None, notice
    assert notice.endswith("requested by ann.")
    reload_until(browser, f"{url}/console/runs/refund-desk/{forked.group(1)}", "forked", 60)
    browser.get(f"{url}/console/runs?agent=refund-desk")
    assert first in browser.find_element(By.TAG_NAME, "main").text
    # Filtered on the server by age and a metadata field, through the page's form.
    browser.find_element(By.ID, "hours").send_keys("1")
    browser.find_element(By.ID, "meta").send_keys(f"tenant=acme-{tag}")
    browser.find_element(By.XPATH, "//button[text()='Show']").click()
    shows(browser, "of 2,")  # the run and its fork, which carries its metadata
    main = browser.find_element(By.TAG_NAME, "main").text
    assert first in main
    assert forked.group(1) in main
    assert second not in main
    shot(browser, "runs")

    # Another origin's page, in the same browser with the session cookie: refused.
    attacker = AttackerPage(f"{url}/console/approvals/refund-desk/{second}")
    try:
        browser.get(attacker.url)
        wait_for_sync(
            lambda: "cross_origin" in browser.page_source, timeout_s=10,
            what="the guard's refusal of the other origin's post",
        )  # fmt: skip
    finally:
        attacker.close()
    assert console.status_of(second) == "waiting_approval"

    # A read-only token: sees the waiting call, no approve button; posting anyway is a 403.
    browser.get(f"{url}/console/job")
    browser.find_element(By.XPATH, "//button[text()='Sign out']").click()
    sign_in(browser, url, RITA)
    browser.get(inbox)
    assert f"send_email for run {second}" in browser.find_element(By.TAG_NAME, "main").text
    assert browser.find_elements(By.XPATH, "//button[@value='approve']") == []
    with httpx.Client(base_url=url, headers={"Origin": url}) as client:
        assert client.post("/console/sign-in", data={"token": RITA}).status_code == 303
        page = client.get("/console/approvals").text
        found = re.search(r'name="csrf" value="([^"]+)"', page)
        assert found is not None
        form_data = {"csrf": found.group(1), "call_id": "", "decision": "approve"}
        refused = client.post(f"/console/approvals/refund-desk/{second}", data=form_data)
    assert refused.status_code == 403
    assert console.status_of(second) == "waiting_approval"

    # Last, as it ends the job: stop with a savepoint, behind its confirmation page.
    browser.find_element(By.XPATH, "//button[text()='Sign out']").click()
    sign_in(browser, url, ANN)
    browser.get(f"{url}/console/checkpoints")
    browser.find_element(By.ID, "stop-name").send_keys(f"final-{tag}")
    browser.find_element(By.XPATH, "//button[starts-with(text(), 'Stop the job')]").click()
    shows(browser, "Every subtask of")
    main = browser.find_element(By.TAG_NAME, "main").text
    assert f"A savepoint named final-{tag}" in main
    shot(browser, "stop")
    browser.find_element(By.XPATH, "//button[text()='Stop the job with a savepoint']").click()
    shows(browser, f"Stopping the job with savepoint final-{tag}")
    bearer = {"Authorization": f"Bearer {ANN}"}
    with httpx.Client(base_url=url, headers=bearer) as client:

        def stopped_and_stored() -> bool:
            state: str = client.get("/status").json()["state"]
            saved: str | None = client.get(f"/savepoints/final-{tag}").json().get("status")
            return state == "stopped" and saved == "stored"

        wait_for_sync(
            stopped_and_stored, timeout_s=90, interval_s=0.5,
            what="the job stopped and its savepoint stored",
        )  # fmt: skip

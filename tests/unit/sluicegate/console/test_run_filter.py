"""The Runs page's filter: by status, age and a metadata field, read from the query with what
it could not read said; and the page over it, paged, the filters kept in the links, escaped."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from sluicegate.agents.history.events import RunHistory, RunSummary
from sluicegate.agents.history.index import RunIndex
from sluicegate.console.run_filter import RunFilter
from tests.unit.sluicegate.console.test_console_routes import (
    BASE,
    HOSTILE,
    RITA,
    TOKENS,
    FakeDesk,
    app_with,
    sign_in,
)

NOW = 1_700_100_000.0
STATUSES = frozenset({"running", "done", "waiting_approval"})


def run(run_id: str, hours_ago: float | None, metadata: dict[str, Any] | None) -> RunSummary:
    started = None if hours_ago is None else NOW - hours_ago * 3600
    return RunSummary(
        run_id, "done", 1, 3, started, started_at=started, goal=run_id, metadata=metadata
    )


def test_an_empty_query_matches_every_run() -> None:
    where, problems = RunFilter.parse(status=None, hours="", meta="", statuses=STATUSES)
    assert (where, problems) == (RunFilter(), [])
    assert where.matches(run("r", None, None), NOW)


def test_age_keeps_runs_started_within_the_hours() -> None:
    where, _ = RunFilter.parse(status=None, hours="2", meta=None, statuses=STATUSES)
    assert where.matches(run("new", 1.5, None), NOW)
    assert where.matches(run("edge", 2, None), NOW)
    assert not where.matches(run("old", 2.01, None), NOW)
    assert not where.matches(run("unknown", None, None), NOW)


def test_a_metadata_field_compares_strings_as_they_are_and_json_as_its_text() -> None:
    def where(meta: str) -> RunFilter:
        return RunFilter.parse(status=None, hours=None, meta=meta, statuses=STATUSES)[0]

    tenant = run("r", 1, {"tenant": "acme", "vip": True, "tier": 3, "tag": "a=b"})
    assert where("tenant=acme").matches(tenant, NOW)
    assert where(" tenant = acme ").matches(tenant, NOW)
    assert not where("tenant=acm").matches(tenant, NOW)
    assert where("vip=true").matches(tenant, NOW)
    assert where("tier=3").matches(tenant, NOW)
    assert where("tag=a=b").matches(tenant, NOW)  # the first = splits
    assert not where("missing=").matches(tenant, NOW)
    assert not where("tenant=acme").matches(run("none", 1, None), NOW)


@pytest.mark.parametrize(
    ("hours", "meta", "status", "problem"),
    [
        ("soon", None, None, "Started within"),
        ("-1", None, None, "Started within"),
        ("nan", None, None, "Started within"),
        ("inf", None, None, "Started within"),
        (None, "tenant", None, "Metadata"),
        (None, "=acme", None, "Metadata"),
        (None, None, "sleeping", "no status"),
    ],
)
def test_what_cannot_be_read_is_said_and_left_out(
    hours: str | None, meta: str | None, status: str | None, problem: str
) -> None:
    where, problems = RunFilter.parse(status=status, hours=hours, meta=meta, statuses=STATUSES)
    assert where == RunFilter()
    assert len(problems) == 1
    assert problem in problems[0]


def test_the_query_round_trips() -> None:
    where = RunFilter("done", 1.5, ("tenant", "acme"))
    assert where.query() == {"status": "done", "hours": "1.5", "meta": "tenant=acme"}
    again, problems = RunFilter.parse(**where.query(), statuses=STATUSES)
    assert (again, problems) == (where, [])


class FakeIndex(RunIndex):
    """120 runs: the even ones of tenant acme, the first 60 started in the last hour."""

    async def runs(self) -> list[RunSummary]:
        return [
            run(f"r-{n:03}", 0.5 if n < 60 else 5, {"tenant": "acme" if n % 2 == 0 else HOSTILE})
            for n in range(120)
        ]


@pytest.fixture
async def browser() -> Any:
    desk = FakeDesk()
    desk._indexes = {"desk": FakeIndex(RunHistory("127.0.0.1:1", "desk", "e"))}
    app = app_with(TOKENS, desk, clock=lambda: NOW)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        yield client


async def test_the_runs_page_filters_on_the_server_and_pages_keeping_the_filters(
    browser: httpx.AsyncClient,
) -> None:
    await sign_in(browser, RITA)
    query = {"agent": "desk", "hours": "1", "meta": "tenant=acme"}
    first = (await browser.get("/console/runs", params=query)).text
    assert "Runs 1 to 30 of 30" in first  # the even ones of the first 60
    assert 'value="tenant=acme"' in first
    assert 'value="1"' in first
    everyone = (await browser.get("/console/runs", params={"agent": "desk"})).text
    assert "Runs 1 to 50 of 120" in everyone
    older = re.search(r'href="([^"]+)" rel="next"', everyone)
    assert older is not None
    acme = await browser.get("/console/runs", params={"agent": "desk", "meta": "tenant=acme"})
    link = re.search(r'href="([^"]+)" rel="next"', acme.text)
    assert link is not None
    assert "meta=tenant%3Dacme" in link.group(1)
    second = (await browser.get(link.group(1).replace("&amp;", "&"))).text
    assert "Runs 51 to 60 of 60" in second


async def test_a_hostile_filter_is_text_and_a_mistake_is_said(browser: httpx.AsyncClient) -> None:
    await sign_in(browser, RITA)
    page = await browser.get("/console/runs", params={"meta": f"tenant={HOSTILE}"})
    assert page.status_code == 200
    assert "Runs 1 to 50 of 60" in page.text
    assert "<script" not in page.text
    wrong = (await browser.get("/console/runs", params={"hours": "soon"})).text
    assert "Started within: a number of hours" in wrong
    assert "Runs 1 to 50 of 120" in wrong

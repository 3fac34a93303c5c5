"""The console's Runs page over 100,000 runs in a real events topic: a filtered page has the
right rows, in order, paged; a later request reads only the events written since (the
`RunIndex`), and shows them; a run's timeline is read from its first event on."""

from __future__ import annotations

import re

import httpx

from bench.console_runs import T0, console_app, create_topic, run_event, write_events

RUNS, PARTITIONS = 100_000, 4


def expected(runs: range) -> list[str]:
    """The runs ``status=done&meta=tenant=t7`` matches, most recently updated first."""
    return [f"run-{i:06}" for i in reversed(runs) if i % 3 == 1 and i % 100 == 7]


def listed(page: str) -> list[str]:
    return re.findall(r'href="/console/runs/desk/(run-\d+)"', page)


async def test_a_filtered_page_of_100000_runs_and_then_only_what_is_new(
    kafka_bootstrap: str,
) -> None:
    topic = await create_topic(kafka_bootstrap, PARTITIONS)
    events = (run_event(i) for i in range(RUNS))
    assert await write_events(kafka_bootstrap, topic, PARTITIONS, events) == RUNS
    app, desk = console_app(kafka_bootstrap, "desk", topic)
    index = desk.index("desk")
    query = {"agent": "desk", "status": "done", "meta": "tenant=t7"}
    want = expected(range(RUNS))
    assert len(want) == 334

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        first = await client.get("/console/runs", params=query)
        assert first.status_code == 200, first.text[:500]
        assert "Runs 1 to 50 of 334," in first.text
        assert listed(first.text) == want[:50]
        assert index.records_read == RUNS  # the whole topic, once

        second = await client.get("/console/runs", params={**query, "offset": "50"})
        assert "Runs 51 to 100 of 334," in second.text
        assert listed(second.text) == want[50:100]
        assert index.records_read == RUNS  # nothing new: nothing read

        # A new run that matches, and the newest matching run failing (it no longer does).
        newest = want[0]
        changes = [
            {**run_event(RUNS + 207), "at": T0 + 2 * RUNS},
            {**run_event(int(newest[4:])), "seq": 1, "type": "failed", "status": "failed",
             "at": T0 + 2 * RUNS + 1},
        ]  # fmt: skip
        assert await write_events(kafka_bootstrap, topic, PARTITIONS, changes) == 2
        third = await client.get("/console/runs", params=query)
        assert index.records_read == RUNS + 2  # only what was written since
        assert "Runs 1 to 50 of 334," in third.text
        assert listed(third.text) == [f"run-{RUNS + 207:06}", *want[1:50]]
        everyone = await client.get("/console/runs", params={"agent": "desk"})
        assert f"of {RUNS + 1}," in everyone.text
        assert listed(everyone.text)[0] == newest  # updated last

        timeline = await client.get(f"/console/runs/desk/{newest}")
        assert timeline.status_code == 200, timeline.text[:500]
        assert f"refund order {int(newest[4:])}" in timeline.text
        assert "failed" in timeline.text
        assert index.records_read == RUNS + 2

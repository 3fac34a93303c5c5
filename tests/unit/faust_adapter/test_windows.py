"""Windowed tables as faust's documentation writes them (`tests.faust_apps.pageviews`), run in
memory with record timestamps chosen here: exact counts per tumbling and hopping window, the
rows as faust encodes them, expiry, and the wall clock for ``relative_to_now()``."""

from __future__ import annotations

import json
import struct
import time

import pytest

from sluicegate.cli.main import main
from sluicegate.faust_adapter import build_pipeline, read_app
from sluicegate.faust_adapter.binding import TABLE_PREFIX
from sluicegate.faust_adapter.windows import WINDOW_PREFIX, ordered_float
from tests.faust_apps import pageviews
from tests.unit.faust_adapter.runner import MemoryRun

B = 1_699_999_980  # a minute's start (B % 60 == 0), in seconds
AGENT = "tests.faust_apps.pageviews.count_views"
VIEWS = [("home", B + 1), ("home", B + 30), ("about", B + 59), ("home", B + 61),
         ("home", B + 119.5), ("about", B + 125)]  # fmt: skip


def run_of(tag: str, expires: float = 3600.0) -> MemoryRun:
    plan = read_app(pageviews.make_app(tag, expires=expires), modules=[pageviews])
    assert plan.refusals == ()
    return MemoryRun(build_pipeline(plan))


def view(run: MemoryRun, tag: str, page: str, at: float) -> None:
    run.feed(f"views-{tag}", json.dumps(page).encode(), key=page.encode(),
             timestamp_ms=round(at * 1000))  # fmt: skip


def window_row(table: str, page: str, start: float, size: float) -> bytes:
    """The row of ``page``'s window from ``start``, as faust's json key codec writes it."""
    window = [float(start), float(start) + size - 0.1]  # faust's WindowRange_from_start
    return TABLE_PREFIX + f"{table}/{json.dumps([page, window], separators=(',', ':'))}".encode()


async def test_views_count_per_tumbling_and_hopping_window_of_the_record_timestamp() -> None:
    run = run_of("w1")
    for page, at in VIEWS:
        view(run, "w1", page, at)
    assert run.failures == []
    sent = [pageviews.PageCount.loads(v) for _, v in run.sinks["view-counts-w1"]]
    found = [(c.page, c.viewed_at // 60 * 60 - B, c.minute, c.two_minutes, c.previous_minute)
             for c in sent]  # fmt: skip
    assert found == [
        ("home", 0, 1, 1, 0), ("home", 0, 2, 2, 0), ("about", 0, 1, 1, 0),
        # B+61: minute B+60; the hopping window read is the latest one holding it, [B+60, B+180);
        # .delta(1 minute): the minute before, B
        ("home", 60, 1, 1, 2), ("home", 60, 2, 2, 2), ("about", 120, 1, 1, 0),
    ]  # fmt: skip
    rows = run.states[AGENT].rows
    per_minute = {k: int(v) for k, v in rows.items()
                  if k.startswith(TABLE_PREFIX + b"views_per_minute/")}  # fmt: skip
    assert per_minute == {
        window_row("views_per_minute", "home", B, 60): 2,
        window_row("views_per_minute", "home", B + 60, 60): 2,
        window_row("views_per_minute", "about", B, 60): 1,
        window_row("views_per_minute", "about", B + 120, 60): 1,
    }
    hopping = {k: int(v) for k, v in rows.items()
               if k.startswith(TABLE_PREFIX + b"views_per_two_minutes/")}  # fmt: skip
    # every view counts in the two windows of 2 minutes that hold it, one starting each minute
    assert hopping == {
        window_row("views_per_two_minutes", "home", B - 60, 120): 2,
        window_row("views_per_two_minutes", "home", B, 120): 4,
        window_row("views_per_two_minutes", "home", B + 60, 120): 2,
        window_row("views_per_two_minutes", "about", B - 60, 120): 1,
        window_row("views_per_two_minutes", "about", B, 120): 1,
        window_row("views_per_two_minutes", "about", B + 60, 120): 1,
        window_row("views_per_two_minutes", "about", B + 120, 120): 1,
    }
    latest = rows[WINDOW_PREFIX + b"views_per_minute/latest"]
    assert latest == struct.pack(">d", B + 179.9)  # the latest window end written


async def test_windows_older_than_expires_are_deleted_when_the_partition_next_writes() -> None:
    run = run_of("w2", expires=60.0)
    view(run, "w2", "home", B + 1)
    view(run, "w2", "home", B + 61)
    rows = run.states[AGENT].rows
    assert window_row("views_per_minute", "home", B, 60) in rows  # not stale yet
    view(run, "w2", "about", B + 200)  # latest window [B+180, B+240): stale ended by B+120
    assert window_row("views_per_minute", "home", B, 60) not in rows
    assert window_row("views_per_minute", "home", B + 60, 60) not in rows
    assert rows[window_row("views_per_minute", "about", B + 180, 60)] == b"1"
    index = [k for k in rows if k.startswith(WINDOW_PREFIX + b"views_per_minute/ends/")]
    assert len(index) == 1
    assert index[0].endswith(window_row("views_per_minute", "about", B + 180, 60))
    view(run, "w2", "home", B + 2)  # late: counted in its (expired) window, then deleted again
    assert window_row("views_per_minute", "home", B, 60) not in rows
    assert pageviews.PageCount.loads(run.sinks["view-counts-w2"][-1][1]).minute == 1
    assert run.failures == []


def test_window_ends_order_as_their_bytes() -> None:
    ends = [-120.5, -0.1, 0.0, 59.9, 60.0, 1_700_000_039.9]
    assert sorted(ends, key=ordered_float) == ends


async def test_relative_to_now_counts_in_the_window_of_the_wall_clock() -> None:
    run = run_of("w3")
    before = time.time()
    for page, at in VIEWS:
        view(run, "w3", page, at)  # record timestamps of 2023: not what relative_to_now reads
    after = time.time()
    starts = {before // 60 * 60, after // 60 * 60}
    rows = run.states[AGENT].rows
    prefix = TABLE_PREFIX + b"views_per_clock_minute/"
    clock = [(json.loads(k[len(prefix) :]), int(v)) for k, v in rows.items()
             if k.startswith(prefix)]  # fmt: skip
    assert {start for (_, (start, _)), _ in clock} <= starts
    per_page: dict[str, int] = {}
    for (page, _), count in clock:
        per_page[page] = per_page.get(page, 0) + count
    assert per_page == {"home": 4, "about": 2}
    if len(starts) == 1:  # not across a minute's end: .now() read each view's own window
        sent = [pageviews.PageCount.loads(v) for _, v in run.sinks["view-counts-w3"]]
        assert [c.clock_minute for c in sent] == [1, 2, 1, 3, 4, 2]


def test_faust_check_shows_each_tables_window(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["faust", "check", "tests.faust_apps.pageviews:app"]) == 0
    out = capsys.readouterr().out
    assert "views_per_minute/(<key>, (<start>, <end>)): tumbling 60 s, expires 3600 s" in out
    assert "(<key>, (<start>, <end>)): hopping 120 s every 60 s, expires 3600 s" in out
    assert "views_per_clock_minute/(<key>, (<start>, <end>)): tumbling 60 s (" in out

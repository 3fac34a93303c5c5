"""Records in/out and lag on the Job page: per operator as ``GET /status`` sums the heartbeats'
``records`` group, per subtask from the live worker of the current attempt; a subtask of an
older worker (no such group) shows "—", a stale attempt's numbers are not shown."""

from __future__ import annotations

import re

from sluicegate.console import pages, records
from sluicegate.coordinator.numbering import take_attempt
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.protocol.messages import RECORDS_GROUP, Heartbeat
from tests.unit.coordinator.driving import Driving


async def running_attempt_2() -> Driving:
    d = Driving()
    await take_attempt(d.storage)
    await d.start()
    assert d.facts().attempt == 2
    new = {
        "tokenizer#0": {RECORDS_GROUP: {"in": 10, "out": 40, "lag": 3}},
        "tokenizer#1": {RECORDS_GROUP: {"in": 5, "out": 20}},  # lag not read yet
        "counter#0": {RECORDS_GROUP: {"in": 60, "out": 7, "lag": 0}, "rows": {"keys": 7}},
    }
    old = {"counter#1": {"rows": {"keys": 1}}}  # a worker of a version without the group
    stale = {"tokenizer#0": {RECORDS_GROUP: {"in": 999, "out": 999, "lag": 999}}}
    await d.step(
        Heartbeat("w1", "i", 4, 2, ("tokenizer#0", "tokenizer#1", "counter#0"), new),
        Heartbeat("w2", "j", 4, 2, ("counter#1",), old),
        Heartbeat("w3", "k", 4, 1, ("tokenizer#0",), stale),  # a zombie of attempt 1
    )
    return d


async def test_per_operator_is_the_sum_status_shows_and_per_subtask_the_last_heartbeat() -> None:
    d = await running_attempt_2()
    status = CoordinatorStatus(d.coordinator).status()

    assert status.counts["tokenizer"][RECORDS_GROUP] == {"in": 15, "out": 60, "lag": 3}
    by_operator = records.per_operator(status.counts)
    assert by_operator["tokenizer"] == records.RecordCounts(15, 60, 3)
    assert by_operator["counter"] == records.RecordCounts(60, 7, 0)

    by_subtask = records.per_subtask(d.facts())
    assert by_subtask["tokenizer#1"] == records.RecordCounts(5, 20, None)
    assert by_subtask["counter#1"] == records.RecordCounts()
    assert by_subtask["tokenizer#0"] == records.RecordCounts(10, 40, 3)  # not the zombie's


def rows(html: str, caption_start: str) -> dict[str, list[str]]:
    """The rows of the table whose caption starts so, by their first cell."""
    table = re.search(rf"<table><caption>{re.escape(caption_start)}.*?</table>", html, flags=re.S)
    assert table is not None, caption_start
    found: dict[str, list[str]] = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table.group(0), flags=re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)
        if cells:
            found[cells[0]] = cells
    return found


async def test_the_job_page_shows_them_per_operator_and_per_subtask() -> None:
    d = await running_attempt_2()
    view = CoordinatorStatus(d.coordinator)
    html = str(pages.job_body(d.graph, view.status(), view.workers(), view.subtasks(), d.facts()))

    operators = rows(html, "Operators")
    assert operators["tokenizer"][-3:] == ["15", "60", "3"]
    assert operators["counter"][-3:] == ["60", "7", "0"]
    subtasks = rows(html, "Subtasks")
    assert subtasks["tokenizer#0"][-3:] == ["10", "40", "3"]
    assert subtasks["tokenizer#1"][-3:] == ["5", "20", "—"]
    assert subtasks["counter#1"][-3:] == ["—", "—", "—"]
    counts = rows(html, "Counts reported")
    assert counts["counter"][1:] == ["rows", "keys", "8"]  # 7 + 1: the other counts stay
    assert RECORDS_GROUP not in [cells[1] for cells in counts.values()]

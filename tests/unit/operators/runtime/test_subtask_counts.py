"""A subtask's status counts (sent in worker heartbeats) come from its operator; an operator
whose `status_counts` raises gives none, so the heartbeats go on."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from sluicegate.operators.contract import Context, Operator, Record
from sluicegate.operators.graph import SubtaskId
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.control import InMemoryControl
from sluicegate.operators.runtime.subtask import Subtask
from sluicegate.operators.storage import open_storage


class Counting(Operator):
    def __init__(self, counts: Mapping[str, Mapping[str, int]] | None) -> None:
        self.counts = counts

    def process(self, record: Record, ctx: Context) -> None:
        return None

    def status_counts(self) -> Mapping[str, Mapping[str, int]]:
        if self.counts is None:
            raise RuntimeError("counting failed")
        return self.counts


def subtask(tmp_path: Path, counts: Mapping[str, Mapping[str, int]] | None) -> Subtask:
    p = Pipeline("counts")
    p.source("in", partitions=1)
    p.operator("op", factory=lambda: Counting(counts), inputs="in")
    return Subtask(
        graph=p.build(),
        subtask=SubtaskId("op", 0),
        attempt=1,
        bootstrap="127.0.0.1:1",  # never contacted: the subtask does not run
        storage=open_storage("memory://"),
        control=InMemoryControl().link("op#0"),
        local_dir=tmp_path,
        registry=CollectorRegistry(),
    )


def test_counts_are_the_operators_copied(tmp_path: Path) -> None:
    counts = {"runs": {"running": 2}}
    got = subtask(tmp_path, counts).status_counts()
    assert got == counts
    got["runs"]["running"] = 99
    assert counts == {"runs": {"running": 2}}


def test_failing_counts_are_logged_and_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert subtask(tmp_path, None).status_counts() == {}
    assert "op#0: status_counts failed" in caplog.text


def test_records_counts_of_a_subtask_not_running_are_zero_and_no_lag(tmp_path: Path) -> None:
    assert subtask(tmp_path, {}).records_counts() == {"in": 0, "out": 0}

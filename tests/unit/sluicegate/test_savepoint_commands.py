"""The savepoint commands' terminal output: a progress line whenever a savepoint moves on, and
the end of a stop-with-savepoint read from storage once the coordinator is gone."""

from __future__ import annotations

from typing import Any

import pytest

from sluicegate.cli import savepoints
from sluicegate.cli.savepoints import progress_line, render_savepoints
from sluicegate.coordinator.httpapi.client import CoordinatorUnreachableError
from sluicegate.coordinator.httpapi.savepoint_models import SavepointInfo


class FakeClient:
    def __init__(self, answers: list[SavepointInfo | Exception]) -> None:
        self.answers = answers

    def savepoint(self, name: str) -> SavepointInfo:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def info(status: str, **fields: Any) -> SavepointInfo:
    return SavepointInfo(name="sp", status=status, **fields)


def follow(answers: list[SavepointInfo | Exception], first: SavepointInfo) -> tuple[int, list[str]]:
    said: list[str] = []
    client: Any = FakeClient(answers)
    return savepoints._follow(client, first, 10, said.append), said


def test_progress_lines_say_each_change_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(savepoints, "_POLL_SECONDS", 0)
    writing = info("writing", checkpoint_id=4, partitions_done=1, partitions_total=4, rows=10,
                   size_bytes=2048)  # fmt: skip
    code, said = follow([writing, writing, info("completed", checkpoint_id=4)], info("waiting"))
    assert code == 0
    assert said == [
        "savepoint sp: waiting",
        "savepoint sp: writing (checkpoint 4), 1/4 partitions, 10 rows, 2.0 KiB",
        "savepoint sp: completed (checkpoint 4)",
        "savepoint sp written; restore it with --from-savepoint sp",
    ]


def test_a_failure_is_exit_1_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(savepoints, "_POLL_SECONDS", 0)
    code, _ = follow([info("failed", error="its checkpoint 5 aborted: x")], info("waiting"))
    assert code == 1
    assert "its checkpoint 5 aborted" in capsys.readouterr().err


def test_after_a_stop_the_savepoint_is_read_from_storage(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(savepoints, "_POLL_SECONDS", 0)
    monkeypatch.setattr(savepoints, "_after_stop", lambda name, say: say(f"read {name}") or 0)
    gone = CoordinatorUnreachableError("http://x", "connection refused")
    code, said = follow([gone], info("waiting", stop=True))
    assert code == 0
    assert said[-1] == "read sp"


def test_the_list_shows_versions_or_the_problem() -> None:
    text = render_savepoints([
        info("stored", pipeline="p", checkpoint_id=3, created_at=0.0, size_bytes=1024, rows=5,
             state_versions={"agent": 2}),
        SavepointInfo(name="half", status="incomplete", error="incomplete (no manifest)"),
    ])  # fmt: skip
    lines = text.splitlines()
    assert lines[0].split() == [
        "name", "status", "pipeline", "checkpoint", "created", "size", "rows", "state"
    ]  # fmt: skip
    assert "agent:v2" in lines[-2]
    assert "incomplete (no manifest)" in lines[-1]
    assert progress_line(info("stored")) == "savepoint sp: stored"
    assert render_savepoints([]) == "no savepoints"

"""``sluicegate status --watch``: `render` draws one frame from the API's models; `watch`
redraws frames in place on a terminal and appends them elsewhere, surviving a coordinator that
cannot answer."""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator

import pytest

from sluicegate.cli.watch import JobSource, render, watch
from sluicegate.coordinator.httpapi.client import CoordinatorClient, CoordinatorUnreachableError
from sluicegate.coordinator.httpapi.view import (
    CheckpointInfo,
    CheckpointStatus,
    JobStatus,
    WorkerInfo,
)

T0 = 1_700_000_000.0


def job(**changes: object) -> JobStatus:
    fields: dict[str, object] = {
        "pipeline": "refund-demo",
        "state": "running",
        "attempt": 2,
        "last_completed_checkpoint": 41,
        "checkpoint_lag_seconds": 0.42,
        "restarts": 1,
    }
    return JobStatus.model_validate(fields | changes)


def checkpoint(
    checkpoint_id: int, status: CheckpointStatus = CheckpointStatus.COMPLETED, **changes: object
) -> CheckpointInfo:
    fields: dict[str, object] = {
        "checkpoint_id": checkpoint_id,
        "attempt": 2,
        "status": status,
        "triggered_at": T0 + checkpoint_id,
        "completed_at": T0 + checkpoint_id + 0.25,
        "full_bytes": 3 * 1024 * 1024,
        "incremental_bytes": 2048,
        "alignment_seconds": 0.01,
        "sync_seconds": 0.02,
        "async_seconds": 0.15,
    }
    return CheckpointInfo.model_validate(fields | changes)


def worker(worker_id: str, *, alive: bool = True, subtasks: int = 2) -> WorkerInfo:
    return WorkerInfo(
        worker_id=worker_id,
        slots=4,
        subtasks=[f"refund-desk#{i}" for i in range(subtasks)],
        seconds_since_heartbeat=0.3 if alive else 12.5,
        alive=alive,
    )


def test_render_shows_the_job_its_last_checkpoints_and_workers() -> None:
    checkpoints = [
        checkpoint(42, CheckpointStatus.IN_PROGRESS, completed_at=None),
        checkpoint(41),
        checkpoint(40, CheckpointStatus.ABORTED, completed_at=None, reason="failed"),
    ]
    runs = {"running": 5, "waiting_approval": 3, "done": 40, "failed": 0}
    status = job(counts={"refund-desk": {"runs": runs}})
    frame = render(status, checkpoints, [worker("worker-2"), worker("worker-1")])
    assert frame.splitlines() == [
        "pipeline            refund-demo",
        "state               running",
        "attempt             2",
        "checkpoint lag      0.42s, checkpoint 41",
        "restarts            1",
        "workers alive       2 of 2",
        "runs (refund-desk)  done 40, running 5, waiting_approval 3",
        "",
        "CHECKPOINT  STATUS       ATTEMPT  DURATION  ALIGN  SYNC   ASYNC  FULL     INCR     REASON",
        "42          in_progress  2        -         0.01s  0.02s  0.15s  3.0 MiB  2.0 KiB  -",
        "41          completed    2        0.25s     0.01s  0.02s  0.15s  3.0 MiB  2.0 KiB  -",
        "40          aborted      2        -         0.01s  0.02s  0.15s  3.0 MiB  2.0 KiB  failed",
        "",
        "WORKER    ALIVE  SUBTASKS  HEARTBEAT",
        "worker-1  yes    2 of 4    0.30s ago",
        "worker-2  yes    2 of 4    0.30s ago",
    ]


def test_render_before_the_first_checkpoint_and_without_workers() -> None:
    frame = render(job(last_completed_checkpoint=None, checkpoint_lag_seconds=None), [], [])
    assert "checkpoint lag  no checkpoint completed yet" in frame.splitlines()
    assert "workers alive   0 of 0" in frame.splitlines()
    assert frame.endswith("no checkpoints yet\n\nno workers registered")


def test_render_names_the_workers_that_are_not_alive() -> None:
    frame = render(job(), [], [worker("w-1"), worker("w-2", alive=False, subtasks=0)])
    assert "workers alive   1 of 2 (not alive: w-2)" in frame.splitlines()
    assert "w-2     NO     0 of 4    12.5s ago" in frame.splitlines()


def test_render_shows_only_the_last_checkpoints() -> None:
    checkpoints = [checkpoint(n) for n in range(30, 0, -1)]
    rows = render(job(), checkpoints, [], last=3).split("\n\n")[1].splitlines()
    assert [row.split()[0] for row in rows] == ["CHECKPOINT", "30", "29", "28"]


def test_render_shows_each_operators_counts_and_none_when_all_are_zero() -> None:
    counts = {"b-agent": {"runs": {"failed": 0}}, "a-agent": {"runs": {"running": 1}}}
    lines = render(job(counts=counts), [], []).splitlines()
    assert lines[6:8] == ["runs (a-agent)  running 1", "runs (b-agent)  none"]
    assert not any(line.startswith("runs") for line in render(job(), [], []).splitlines())


class FakeSource:
    """A `JobSource` that fails on the calls a test lists."""

    def __init__(self, failures: Iterator[bool]) -> None:
        self._failures = failures
        self.calls = 0

    def status(self) -> JobStatus:
        self.calls += 1
        if next(self._failures):
            raise CoordinatorUnreachableError("http://127.0.0.1:1", "connection refused")
        return job(attempt=self.calls)

    def workers(self) -> list[WorkerInfo]:
        return [worker("w-1")]

    def checkpoints(self) -> list[CheckpointInfo]:
        return [checkpoint(41)]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_watch_appends_frames_when_not_on_a_terminal_and_sleeps_between() -> None:
    out, sleeps = io.StringIO(), list[float]()
    source: JobSource = FakeSource(iter([False, False, False]))
    watch(source, 2.0, out, frames=3, sleep=sleeps.append, clock=lambda: T0)
    text = out.getvalue()
    assert "\x1b" not in text
    assert text.count("every 2s, at 22:13:20Z (Ctrl-C stops)") == 3
    assert [line for line in text.splitlines() if line.startswith("attempt")] == [
        "attempt         1",
        "attempt         2",
        "attempt         3",
    ]
    assert sleeps == [2.0, 2.0]


def test_watch_redraws_in_place_on_a_terminal() -> None:
    out = Terminal()
    watch(FakeSource(iter([False, False])), 1.0, out, frames=2, sleep=lambda s: None)
    frames = out.getvalue().split("\x1b[H")
    assert frames[0] == ""
    assert len(frames) == 3
    for frame in frames[1:]:
        assert frame.endswith("\x1b[K\n\x1b[J")
        assert all(line.endswith("\x1b[K") for line in frame.split("\n")[:-1])


def test_watch_keeps_going_while_the_coordinator_cannot_answer() -> None:
    out = io.StringIO()
    watch(FakeSource(iter([True, False])), 1.0, out, frames=2, sleep=lambda s: None)
    first, second = out.getvalue().split("\nevery ")
    assert "cannot read the coordinator: cannot reach the coordinator at" in first
    assert "Check that the coordinator is running" in first
    assert "attempt         2" in second


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A URL whose port is bound but not listening: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_watch_takes_the_real_client(refused_url: str) -> None:
    out = io.StringIO()
    watch(CoordinatorClient(refused_url), 0.5, out, frames=1)
    assert f"cannot reach the coordinator at {refused_url}: connection refused" in out.getvalue()


def test_watch_refuses_a_non_positive_interval() -> None:
    with pytest.raises(ValueError, match="positive"):
        watch(FakeSource(iter([])), 0, io.StringIO(), frames=1)


def test_render_says_what_placement_waits_for_and_when_the_coordinator_is_fenced() -> None:
    waiting = JobStatus(
        pipeline="orders", state="recovering", attempt=4, last_completed_checkpoint=None,
        checkpoint_lag_seconds=None, restarts=3,
        waiting_for="slots: 4 subtasks, the live workers offer 1 (w1: 1)",
    )  # fmt: skip
    frame = render(waiting, [], [])
    assert "waiting for     slots: 4 subtasks, the live workers offer 1 (w1: 1)\n" in frame
    assert "FENCED" not in frame
    fenced = render(waiting.model_copy(update={"waiting_for": None, "fenced_by": 7}), [], [])
    assert "FENCED          by coordinator epoch 7: this status is stale\n" in fenced
    assert "waiting for" not in fenced

"""``sluicegate status --watch``: the job's health redrawn every few seconds, for a terminal.

For people without Grafana: state, attempt, checkpoint lag, restarts, workers alive, operators'
status counts (an agent's runs by status, from the workers' heartbeats) and the last
checkpoints with their durations and sizes, read from the coordinator's HTTP API.
`render` makes one frame from the API's models (pure, so tests call it directly); `watch`
fetches and draws frames until interrupted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol, TextIO

from sluicegate.cli.text import (
    bytes_text,
    counts_rows,
    duration_text,
    placement_rows,
    seconds_text,
    table,
)
from sluicegate.coordinator.httpapi.view import CheckpointInfo, JobStatus, WorkerInfo
from sluicegate.operators.exceptions import SluicegateError

__all__ = ["JobSource", "render", "watch"]

# Cursor home, then each line erases what is left of the previous frame's line, and the screen
# below the frame is erased last: redrawing in place does not flicker like a full clear does.
_HOME = "\x1b[H"
_ERASE_LINE = "\x1b[K"
_ERASE_BELOW = "\x1b[J"


class JobSource(Protocol):
    """What `watch` reads; `coordinator.httpapi.client.CoordinatorClient` is one."""

    def status(self) -> JobStatus: ...

    def workers(self) -> list[WorkerInfo]: ...

    def checkpoints(self) -> list[CheckpointInfo]:
        """Newest first."""
        ...


def render(
    status: JobStatus,
    checkpoints: Sequence[CheckpointInfo],
    workers: Sequence[WorkerInfo],
    *,
    last: int = 8,
) -> str:
    """One frame: the job with its operators' status counts (an agent's runs by status), the
    ``last`` checkpoints of ``checkpoints`` (newest first, as the API lists them) and the
    workers."""
    if status.last_completed_checkpoint is None:
        lag = "no checkpoint completed yet"
    else:
        seconds = status.checkpoint_lag_seconds
        age = "" if seconds is None else f"{seconds_text(seconds)}, "
        lag = f"{age}checkpoint {status.last_completed_checkpoint}"
    alive = sum(w.alive for w in workers)
    dead = sorted(w.worker_id for w in workers if not w.alive)
    alive_text = f"{alive} of {len(workers)}" + (f" (not alive: {', '.join(dead)})" if dead else "")
    summary = [
        ["pipeline", status.pipeline],
        ["state", status.state],
        ["attempt", str(status.attempt)],
        ["checkpoint lag", lag],
        ["restarts", str(status.restarts)],
        ["workers alive", alive_text],
        *placement_rows(status.waiting_for, status.fenced_by),
        *counts_rows(status.counts),
    ]
    sections = [table(None, summary)]
    shown = list(checkpoints[:last])
    if shown:
        headers = ["CHECKPOINT", "STATUS", "ATTEMPT", "DURATION", "ALIGN", "SYNC", "ASYNC"]
        headers += ["FULL", "INCR", "REASON"]
        rows = [
            [
                str(c.checkpoint_id),
                c.status.value,
                str(c.attempt),
                duration_text(c.triggered_at, c.completed_at),
                seconds_text(c.alignment_seconds),
                seconds_text(c.sync_seconds),
                seconds_text(c.async_seconds),
                bytes_text(c.full_bytes),
                bytes_text(c.incremental_bytes),
                c.reason or "-",
            ]
            for c in shown
        ]
        sections.append(table(headers, rows))
    else:
        sections.append("no checkpoints yet")
    if workers:
        rows = [
            [
                w.worker_id,
                "yes" if w.alive else "NO",
                f"{len(w.subtasks)} of {w.slots}",
                f"{seconds_text(w.seconds_since_heartbeat)} ago",
            ]
            for w in sorted(workers, key=lambda w: w.worker_id)
        ]
        sections.append(table(["WORKER", "ALIVE", "SUBTASKS", "HEARTBEAT"], rows))
    else:
        sections.append("no workers registered")
    return "\n\n".join(sections)


def watch(
    client: JobSource,
    interval_s: float,
    out: TextIO,
    *,
    frames: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> None:
    """Draw a frame every ``interval_s`` seconds until interrupted (or ``frames`` are drawn).

    Steps of each frame:

    1. read status, workers and checkpoints from ``client``; if the coordinator cannot
       answer (restarting, unreachable), the frame says so and the next one tries again;
    2. on a terminal, move the cursor home and draw over the previous frame (ANSI codes);
       otherwise (a pipe, a file) append the frame after a blank line;
    3. sleep ``interval_s``.

    Returns only after ``frames`` frames; a person stops it with Ctrl-C (KeyboardInterrupt
    propagates, and the CLI turns it into exit code 130).
    """
    if interval_s <= 0:
        raise ValueError(f"the watch interval must be positive, not {interval_s}")
    tty = out.isatty()
    drawn = 0
    while frames is None or drawn < frames:
        stamp = datetime.fromtimestamp(clock(), UTC).strftime("%H:%M:%SZ")
        header = f"every {interval_s:g}s, at {stamp} (Ctrl-C stops)"
        try:
            body = render(client.status(), client.checkpoints(), client.workers())
        except SluicegateError as exc:
            what_to_do = getattr(exc, "what_to_do", "")
            body = f"cannot read the coordinator: {exc}" + (f"\n{what_to_do}" if what_to_do else "")
        frame = f"{header}\n\n{body}"
        if tty:
            lines = frame.split("\n")
            out.write(_HOME + "".join(line + _ERASE_LINE + "\n" for line in lines) + _ERASE_BELOW)
        else:
            out.write(("\n" if drawn else "") + frame + "\n")
        out.flush()
        drawn += 1
        if frames is None or drawn < frames:
            sleep(interval_s)

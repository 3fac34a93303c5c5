"""The CLI commands that talk to a running coordinator over its HTTP API.

* ``sluicegate status [--url URL] [--json] [--watch [--interval S]]``: the job, its workers
  and subtasks; ``--watch`` redraws a live view (checkpoints, lag, restarts, workers);
* ``sluicegate checkpoint list [--url URL] [--json]``: checkpoints, newest first;
* ``sluicegate checkpoint trigger [--url URL]``: trigger a checkpoint now;
* ``sluicegate stop [--url URL] [--no-checkpoint] [--timeout S]``: stop the job gracefully (a
  final checkpoint, then every subtask) and wait until it is stopped.

The URL defaults to ``$SLUICEGATE_COORDINATOR_URL``, else ``http://127.0.0.1:8470``. The
bearer token sent is ``$SLUICEGATE_API_TOKEN``, else the content of
``$SLUICEGATE_API_TOKEN_FILE`` (none when neither is set). A command returns 0, or prints
what went wrong and what to do on stderr and returns 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from sluicegate.cli.settings import DEFAULT_URL, URL_ENV, CliSettings
from sluicegate.cli.text import (
    bytes_text,
    counts_rows,
    duration_text,
    placement_rows,
    seconds_text,
    table,
)
from sluicegate.coordinator.httpapi.auth import admin_token
from sluicegate.coordinator.httpapi.client import (
    CoordinatorApiError,
    CoordinatorClient,
    CoordinatorUnreachableError,
)
from sluicegate.coordinator.httpapi.view import CheckpointInfo, JobStatus, SubtaskInfo, WorkerInfo
from sluicegate.operators.exceptions import ConfigError

__all__ = [
    "DEFAULT_URL",
    "URL_ENV",
    "api_token",
    "coordinator_url",
    "register",
    "render_checkpoints",
    "render_status",
    "run_checkpoint_list",
    "run_checkpoint_trigger",
    "run_status",
    "run_stop",
]


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Add ``status``, ``stop`` and ``checkpoint list|trigger`` to a parser's subcommands.

    Each sets ``run`` to a function of the parsed arguments that returns the exit code.
    Returns the ``checkpoint`` subcommands, for commands that do not go through the API.
    """
    status = subparsers.add_parser("status", help="show the job, its workers and subtasks")
    _add_url(status)
    _add_json(status)
    status.add_argument("--watch", action="store_true", help="a live view, redrawn until Ctrl-C")
    status.add_argument("--interval", type=float, default=2.0, help="--watch: seconds per frame")
    status.set_defaults(run=run_status)

    stop = subparsers.add_parser(
        "stop", help="stop the job gracefully: a final checkpoint, then every subtask"
    )
    _add_url(stop)
    stop.add_argument(
        "--no-checkpoint",
        dest="final_checkpoint",
        action="store_false",
        help="stop without a final checkpoint (the next start replays from the last one)",
    )
    stop.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the job to stop"
    )
    stop.set_defaults(run=run_stop)

    checkpoint = subparsers.add_parser("checkpoint", help="list or trigger checkpoints")
    what = checkpoint.add_subparsers(required=True, metavar="WHAT")
    listing = what.add_parser("list", help="list checkpoints, newest first")
    _add_url(listing)
    _add_json(listing)
    listing.set_defaults(run=run_checkpoint_list)
    trigger = what.add_parser("trigger", help="trigger a checkpoint now")
    _add_url(trigger)
    trigger.add_argument(
        "--full", action="store_true", help="a full checkpoint: its files shared with no other"
    )
    trigger.set_defaults(run=run_checkpoint_trigger)
    return what


def coordinator_url(given: str | None) -> str:
    """The coordinator URL: ``given`` (--url), else the environment, else the default."""
    return given or CliSettings().coordinator_url


def api_token() -> str | None:
    """The bearer token the CLI sends: ``$SLUICEGATE_API_TOKEN(_FILE)``, or None."""
    return admin_token(CliSettings())


def run_status(args: argparse.Namespace) -> int:
    """``sluicegate status``."""

    if args.watch:
        from sluicegate.cli.watch import watch

        return _run(args, lambda client: watch(client, args.interval, sys.stdout))

    def show(client: CoordinatorClient) -> None:
        job, workers, subtasks = client.status(), client.workers(), client.subtasks()
        if args.json:
            _print_json({"job": job, "workers": workers, "subtasks": subtasks})
        else:
            print(render_status(job, workers, subtasks))

    return _run(args, show)


def run_checkpoint_list(args: argparse.Namespace) -> int:
    """``sluicegate checkpoint list``."""

    def show(client: CoordinatorClient) -> None:
        checkpoints = client.checkpoints()
        if args.json:
            _print_json(checkpoints)
        else:
            print(render_checkpoints(checkpoints))

    return _run(args, show)


def run_checkpoint_trigger(args: argparse.Namespace) -> int:
    """``sluicegate checkpoint trigger``."""

    def trigger(client: CoordinatorClient) -> None:
        full = getattr(args, "full", False)
        checkpoint_id = client.trigger_full_checkpoint() if full else client.trigger_checkpoint()
        print(f"checkpoint {checkpoint_id} triggered; `sluicegate checkpoint list` follows it")

    return _run(args, trigger)


def run_stop(args: argparse.Namespace) -> int:
    """``sluicegate stop``: 0 once the job is stopped, else 1 with what to do."""

    def stop(client: CoordinatorClient) -> int:
        job = client.stop(final_checkpoint=args.final_checkpoint, wait_seconds=args.timeout)
        line, what_to_do = stop_text(job)
        if what_to_do:
            return _fail(line, what_to_do)
        print(line)
        return 0

    return _run(args, stop)


def stop_text(job: JobStatus) -> tuple[str, str]:
    """What ``sluicegate stop`` says of ``job``: a line, and what to do (empty: stopped)."""
    if job.state == "stopped":
        final = job.stop.final_checkpoint if job.stop else None
        if final is not None:
            return (
                f"{job.pipeline} stopped at checkpoint {final}; starting it again resumes there",
                "",
            )
        why = f" ({job.stop.note})" if job.stop and job.stop.note else ""
        resume = job.last_completed_checkpoint
        since = "from the beginning" if resume is None else f"from checkpoint {resume}"
        return f"{job.pipeline} stopped without a final checkpoint{why}; it resumes {since}", ""
    if job.state == "failed":
        return f"{job.pipeline} had failed: nothing to stop", "Read the coordinator's log."
    phase = job.stop.phase if job.stop else job.state
    return (
        f"{job.pipeline} is still stopping ({phase})",
        "Wait longer (--timeout) or follow it with `sluicegate status`.",
    )


def render_status(
    job: JobStatus, workers: Sequence[WorkerInfo], subtasks: Sequence[SubtaskInfo]
) -> str:
    """The human form of ``sluicegate status``: the job, then tables of workers and subtasks."""
    last = (
        "none yet" if job.last_completed_checkpoint is None else str(job.last_completed_checkpoint)
    )
    if job.checkpoint_lag_seconds is not None:
        last += f" ({seconds_text(job.checkpoint_lag_seconds)} ago)"
    sections = [
        table(
            None,
            [
                ["pipeline", job.pipeline],
                ["state", job.state],
                ["attempt", str(job.attempt)],
                ["last checkpoint", last],
                ["restarts", str(job.restarts)],
                *placement_rows(job.waiting_for, job.fenced_by),
                *counts_rows(job.counts),
            ],
        )
    ]
    if workers:
        rows = [
            [
                w.worker_id,
                "yes" if w.alive else "NO",
                str(w.slots),
                str(len(w.subtasks)),
                f"{seconds_text(w.seconds_since_heartbeat)} ago",
            ]
            for w in sorted(workers, key=lambda w: w.worker_id)
        ]
        sections.append(table(["WORKER", "ALIVE", "SLOTS", "SUBTASKS", "HEARTBEAT"], rows))
    else:
        sections.append("no workers")
    if subtasks:
        rows = [
            [s.subtask, s.worker_id or "-", str(s.attempt)]
            for s in sorted(subtasks, key=lambda s: s.subtask)
        ]
        sections.append(table(["SUBTASK", "WORKER", "ATTEMPT"], rows))
    else:
        sections.append("no subtasks")
    return "\n\n".join(sections)


def render_checkpoints(checkpoints: Sequence[CheckpointInfo]) -> str:
    """The human form of ``sluicegate checkpoint list``: one row per checkpoint, as given."""
    if not checkpoints:
        return "no checkpoints"
    headers = ["ID", "STATUS", "ATTEMPT", "TRIGGERED", "DURATION", "FULL", "INCR"]
    headers += ["ALIGN", "SYNC", "ASYNC", "REASON"]
    rows = [
        [
            str(c.checkpoint_id),
            c.status.value,
            str(c.attempt),
            _time(c.triggered_at),
            duration_text(c.triggered_at, c.completed_at),
            bytes_text(c.full_bytes),
            bytes_text(c.incremental_bytes),
            seconds_text(c.alignment_seconds),
            seconds_text(c.sync_seconds),
            seconds_text(c.async_seconds),
            c.reason or "-",
        ]
        for c in checkpoints
    ]
    return table(headers, rows)


def _run(args: argparse.Namespace, action: Callable[[CoordinatorClient], int | None]) -> int:
    """Run ``action`` against the coordinator; its exit code (None: 0), or 1 on an API error."""
    url = coordinator_url(args.url)
    try:
        return action(CoordinatorClient(url, token=api_token())) or 0
    except CoordinatorUnreachableError as exc:
        return _fail(
            str(exc),
            f"{exc.what_to_do} Give its address with --url or ${URL_ENV}.",
        )
    except CoordinatorApiError as exc:
        return _fail(f"{exc.message} (HTTP {exc.status} {exc.error})", exc.what_to_do)
    except ConfigError as exc:
        if exc.setting.startswith("SLUICEGATE_API_TOKEN"):
            return _fail(str(exc), "Fix the token setting (docs/security.md).")
        return _fail(str(exc), f"Pass --url or set ${URL_ENV}.")


def _fail(message: str, what_to_do: str) -> int:
    print(f"sluicegate: {message}", file=sys.stderr)
    if what_to_do:
        print(f"what to do: {what_to_do}", file=sys.stderr)
    return 1


def _add_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default=None,
        help=f"coordinator API URL (default: ${URL_ENV}, else {DEFAULT_URL})",
    )


def _add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _print_json(data: Any) -> None:
    print(json.dumps(_plain(data), indent=2))


def _plain(data: Any) -> Any:
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, dict):
        return {key: _plain(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_plain(item) for item in data]
    return data


def _time(unix: float | None) -> str:
    if unix is None:
        return "-"
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

"""The savepoint and state-version commands.

* ``sluicegate savepoint create [--name N] [--stop] [--url URL] [--timeout S]``: ask the
  running coordinator for a savepoint (``--stop``: stop-with-savepoint) and follow it to the
  end, one progress line whenever it moves on;
* ``sluicegate savepoint list [--json]`` and ``sluicegate savepoint delete NAME``: read and
  delete in checkpoint storage directly (``SLUICEGATE_STORAGE_URL``), so they work while no
  coordinator runs, e.g. after a stop-with-savepoint;
* ``sluicegate state versions [--json]``: retained checkpoints and savepoints per operator and
  state version (remove an upgrader only when its version counts zero).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

from sluicegate.cli.commands import api_token
from sluicegate.cli.settings import CliSettings
from sluicegate.cli.text import bytes_text, table
from sluicegate.coordinator.httpapi.client import (
    CoordinatorApiError,
    CoordinatorClient,
    CoordinatorUnreachableError,
)
from sluicegate.coordinator.httpapi.savepoint_models import SavepointInfo
from sluicegate.coordinator.savepoints.census import count_state_versions
from sluicegate.coordinator.savepoints.view import stored_info
from sluicegate.operators.savepoints.exceptions import SavepointError, SavepointNotFoundError
from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.storage import Storage, open_storage

__all__ = ["progress_line", "register", "render_savepoints"]

_POLL_SECONDS = 0.5


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``savepoint create|list|delete`` and ``state versions``."""
    from sluicegate.cli.commands import coordinator_url

    savepoint = subparsers.add_parser("savepoint", help="create, list or delete savepoints")
    what = savepoint.add_subparsers(required=True, metavar="WHAT")
    create = what.add_parser("create", help="take a savepoint of the running job")
    create.add_argument("--name", default=None, help="default: <pipeline>-<UTC time>")
    create.add_argument(
        "--stop",
        action="store_true",
        help="stop-with-savepoint: a final checkpoint, sinks published, every subtask stops, "
        "then the savepoint is written and the coordinator exits",
    )
    create.add_argument("--url", default=None, help="coordinator URL")
    create.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for it")
    create.set_defaults(run=lambda args: _create(args, coordinator_url(args.url)))
    listing = what.add_parser("list", help="savepoints in checkpoint storage")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=_list)
    delete = what.add_parser("delete", help="delete a savepoint from checkpoint storage")
    delete.add_argument("name", metavar="NAME")
    delete.set_defaults(run=_delete)

    state = subparsers.add_parser("state", help="operator state versions in storage")
    state_what = state.add_subparsers(required=True, metavar="WHAT")
    versions = state_what.add_parser(
        "versions", help="checkpoints and savepoints per operator and state version"
    )
    versions.add_argument("--json", action="store_true", help="print JSON")
    versions.set_defaults(run=_versions)


def progress_line(info: SavepointInfo) -> str:
    """One line of how a savepoint goes."""
    line = f"savepoint {info.name}: {info.status}"
    if info.checkpoint_id is not None:
        line += f" (checkpoint {info.checkpoint_id})"
    if info.partitions_total:
        line += f", {info.partitions_done}/{info.partitions_total} partitions"
    if info.rows or info.size_bytes:
        line += f", {info.rows} rows, {bytes_text(info.size_bytes)}"
    if info.error:
        line += f": {info.error}"
    return line


def render_savepoints(savepoints: list[SavepointInfo]) -> str:
    if not savepoints:
        return "no savepoints"
    rows = [
        [
            s.name,
            s.status,
            s.pipeline or "",
            "" if s.checkpoint_id is None else str(s.checkpoint_id),
            ""
            if s.created_at is None
            else datetime.fromtimestamp(s.created_at, UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
            bytes_text(s.size_bytes),
            str(s.rows),
            " ".join(f"{uid}:v{v}" for uid, v in sorted(s.state_versions.items())) or s.error,
        ]
        for s in savepoints
    ]
    headers = ["name", "status", "pipeline", "checkpoint", "created", "size", "rows", "state"]
    return table(headers, rows)


def _fail(message: str, what_to_do: str = "") -> int:
    print(f"sluicegate: {message}", file=sys.stderr)
    if what_to_do:
        print(what_to_do, file=sys.stderr)
    return 1


def _create(args: argparse.Namespace, url: str) -> int:
    client = CoordinatorClient(url, token=api_token())
    try:
        info = client.create_savepoint(args.name, stop=args.stop)
    except CoordinatorUnreachableError as exc:
        return _fail(
            str(exc), "Is the coordinator running? Set --url or $SLUICEGATE_COORDINATOR_URL"
        )
    except CoordinatorApiError as exc:
        return _fail(exc.message, exc.what_to_do)
    return _follow(client, info, args.timeout, print)


def _follow(
    client: CoordinatorClient, info: SavepointInfo, timeout: float, say: Callable[[str], None]
) -> int:
    """Poll the savepoint until it is written or failed, saying each change; after a stop the
    coordinator exits, so a savepoint no longer reachable over the API is read from storage."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        line = progress_line(info)
        if line != last:
            say(line)
            last = line
        if info.status in ("completed", "stored"):
            say(f"savepoint {info.name} written; restore it with --from-savepoint {info.name}")
            return 0
        if info.status == "failed":
            return _fail(f"savepoint {info.name} failed: {info.error}")
        if time.monotonic() >= deadline:
            return _fail(
                f"savepoint {info.name} is not written after {timeout:g} s ({info.status})",
                "Follow it with `sluicegate savepoint list`",
            )
        time.sleep(_POLL_SECONDS)
        try:
            info = client.savepoint(info.name)
        except (CoordinatorUnreachableError, CoordinatorApiError):
            if not info.stop:
                raise
            return _after_stop(info.name, say)


def _after_stop(name: str, say: Callable[[str], None]) -> int:
    try:
        stored = asyncio.run(SavepointStore(_storage()).load(name))
    except SavepointNotFoundError:
        return _fail(
            f"the coordinator stopped but savepoint {name} is not in checkpoint storage",
            "Read the coordinator's log for why; starting it again resumes from its last "
            "checkpoint",
        )
    say(
        f"savepoint {name} written from checkpoint {stored.from_checkpoint}; the job stopped. "
        f"Restore it with --from-savepoint {name}"
    )
    sys.stdout.flush()
    return 0


def _storage() -> Storage:
    # Output is flushed by each command before it returns: a storage client's threads have
    # been seen to abort the interpreter at exit (also `checkpoint audit`), losing buffered
    # output to a pipe.
    return open_storage(CliSettings().storage_url)


def _list(args: argparse.Namespace) -> int:
    stored = asyncio.run(SavepointStore(_storage()).list())
    infos = [stored_info(s) for s in stored]
    if args.json:
        print(json.dumps([i.model_dump(mode="json") for i in infos], indent=2))
    else:
        print(render_savepoints(infos))
    sys.stdout.flush()
    return 0


def _delete(args: argparse.Namespace) -> int:
    try:
        files = asyncio.run(SavepointStore(_storage()).delete(args.name))
    except SavepointError as exc:
        return _fail(str(exc))
    print(f"savepoint {args.name} deleted ({files} files)")
    sys.stdout.flush()
    return 0


def _versions(args: argparse.Namespace) -> int:
    census = asyncio.run(count_state_versions(_storage()))
    if args.json:
        versions = [
            {"operator": uid, "version": v, "checkpoints": c, "savepoints": s}
            for uid, v, c, s in census.rows()
        ]
        print(
            json.dumps({"versions": versions, "unreadable_savepoints": census.unreadable}, indent=2)
        )
        sys.stdout.flush()
        return 0
    rows = [[uid, str(v), str(c), str(s)] for uid, v, c, s in census.rows()]
    print(
        table(["operator", "state version", "checkpoints", "savepoints"], rows)
        if rows
        else "no checkpoints or savepoints"
    )
    for name, problem in census.unreadable.items():
        print(f"savepoint {name} could not be read: {problem}")
    sys.stdout.flush()
    return 0

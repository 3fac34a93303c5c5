"""The ``sluicegate runs`` commands: an agent's runs from its events topic (no coordinator
needed), their history and replay, and forks.

* ``runs list [--status S] [--limit N] [--json]``: runs, the most recently updated first;
* ``runs show RUN [--json]``: one run, as a replay of its events rebuilds it;
* ``runs history RUN [--json]``: every event: model output, tool calls and results, costs,
  timings, approvals;
* ``runs replay RUN [--json]``: the state after each event, rebuilt calling no model and no
  tool;
* ``runs fork RUN --from-step N [--patch FILE] [--recorded-only] [--run-id NEW]``: start a new
  run from RUN's state after step N with one change (see docs/run-history.md).

Each takes ``--agent`` (default ``refund-desk``), ``--events-topic`` (default
``<agent>.events``) and ``--bootstrap``; ``fork`` also ``--topic`` (the approvals topic,
default ``<agent>.approvals``) and ``--by``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path
from typing import Any

from sluicegate.agents.client import request_fork
from sluicegate.agents.fork.patch import ForkPatch, read_patch
from sluicegate.agents.history.events import RunHistory
from sluicegate.agents.history.replay import replay
from sluicegate.cli.decisions import who_asks
from sluicegate.cli.run_text import history_text, replay_text, run_text, runs_table
from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.kafka import KafkaSettings

__all__ = ["add_runs_commands"]

_RUN_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")


def add_runs_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Add the ``runs`` group; returns its subcommands (others may add theirs)."""
    runs = commands.add_parser(
        "runs", help="an agent's runs: list, show, history, replay, fork, rollback"
    )
    what = runs.add_subparsers(required=True, metavar="WHAT")

    listing = what.add_parser("list", help="runs, the most recently updated first")
    _common(listing, json_flag=True)
    listing.add_argument("--status", default=None, help="only runs with this status")
    listing.add_argument("--limit", type=int, default=100, help="at most this many runs")
    listing.set_defaults(run=_list)

    for name, run, help_text in (
        ("show", _show, "one run, as a replay of its events rebuilds it"),
        ("history", _history, "every event of a run: model output, tool calls, costs, timings"),
        ("replay", _replay, "the state after each event, rebuilt without calling anything"),
    ):
        command = what.add_parser(name, help=help_text)
        command.add_argument("run_id", metavar="RUN")
        _common(command, json_flag=True)
        command.set_defaults(run=run)

    fork = what.add_parser("fork", help="start a new run from a run's state after a step")
    fork.add_argument("run_id", metavar="RUN")
    fork.add_argument("--from-step", type=int, required=True, metavar="N",
                      help="fork after step N (its reply and tool results settled)")  # fmt: skip
    fork.add_argument("--patch", type=Path, default=None, metavar="FILE",
                      help="a JSON file with the one change (docs/run-history.md)")  # fmt: skip
    fork.add_argument("--recorded-only", action="store_true",
                      help="execute no tool with an effect: calls the parent made get its "
                      "recorded results, others a tool error")  # fmt: skip
    fork.add_argument("--run-id", dest="new_run_id", default=None, metavar="NEW",
                      help="the fork's run id (default: RUN.fork-<random>)")  # fmt: skip
    fork.add_argument("--topic", default=None, help="the approvals topic (<agent>.approvals)")
    fork.add_argument("--by", default=None, help="who forks (default: $USER)")
    _common(fork, json_flag=True)
    fork.set_defaults(run=_fork)
    return what


def _common(parser: argparse.ArgumentParser, *, json_flag: bool) -> None:
    parser.add_argument("--agent", default="refund-desk", help="the agent's name")
    parser.add_argument("--events-topic", default=None, help="default: <agent>.events")
    parser.add_argument("--bootstrap", default=None, metavar="HOST:PORT",
                        help="Kafka (default: $SLUICEGATE_KAFKA_BOOTSTRAP)")  # fmt: skip
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON")


def _history_of(args: argparse.Namespace) -> RunHistory:
    topic = args.events_topic or f"{args.agent}.events"
    return RunHistory(KafkaSettings.from_env(args.bootstrap), args.agent, topic)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _list(args: argparse.Namespace) -> int:
    runs = asyncio.run(_history_of(args).runs(limit=1_000_000))
    if args.status is not None:
        runs = [r for r in runs if r.status == args.status]
    runs = runs[: max(1, args.limit)]
    if args.json:
        _print_json([r.to_json() for r in runs])
    else:
        print(runs_table(runs))
    return 0


def _show(args: argparse.Namespace) -> int:
    history = replay(asyncio.run(_history_of(args).events(args.run_id)))
    state = history[-1].state
    if args.json:
        _print_json(state.model_dump(mode="json"))
    else:
        print(run_text(state))
    return 0


def _history(args: argparse.Namespace) -> int:
    events = asyncio.run(_history_of(args).events(args.run_id))
    if args.json:
        _print_json(events)
    else:
        print(history_text(events))
    return 0


def _replay(args: argparse.Namespace) -> int:
    history = replay(asyncio.run(_history_of(args).events(args.run_id)))
    if args.json:
        _print_json([{"event": r.event, "state": r.state.model_dump(mode="json")} for r in history])
    else:
        print(replay_text(history))
    return 0


def _fork(args: argparse.Namespace) -> int:
    patch = None if args.patch is None else _read_patch(args.patch)
    new_id = args.new_run_id
    if new_id is not None and not _RUN_ID.fullmatch(new_id):
        raise ConfigError("--run-id", f"{new_id!r} is not a run id ({_RUN_ID.pattern})")
    history = _history_of(args)
    approvals = args.topic or f"{args.agent}.approvals"
    fork = asyncio.run(
        request_fork(
            history, approvals, args.run_id, args.from_step, patch=patch,
            recorded_only=args.recorded_only, run_id=new_id, by=args.by or who_asks(),
        )
    )  # fmt: skip
    if args.json:
        _print_json({"run_id": fork.run_id, "parent_run_id": fork.parent_run_id,
                     "from_step": fork.from_step, "topic": approvals})  # fmt: skip
    else:
        change = f" ({fork.note})" if fork.note else ""
        mode = ", recorded-only" if fork.recorded_only else ""
        print(f"forked run {fork.parent_run_id} after step {fork.from_step}{change}{mode} as "
              f"run {fork.run_id} (written to {approvals})")  # fmt: skip
    return 0


def _read_patch(path: Path) -> ForkPatch:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError("--patch", f"cannot read {path}: {exc}") from None
    try:
        return read_patch(data)
    except ValueError as exc:
        raise ConfigError("--patch", f"{path} {exc}") from None

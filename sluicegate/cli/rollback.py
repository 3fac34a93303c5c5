"""``sluicegate runs rollback RUN --to-step N [--agent A] [--url URL]``: undo a run's effects
after step N (`agents.rollback.machine`, docs/rollback.md).

Without ``--url`` the command is written to the agent's approvals topic directly, as
``sluicegate approve`` does, after the agent's events topic showed that the run exists and is
not being rolled back already (``--force`` skips the check); who asks is ``--by``, else
``$USER``. With ``--url`` the coordinator checks and writes it, and who asks is the name of
``$SLUICEGATE_API_TOKEN`` (a token with the ``operate`` scope).

Exit codes: 0 written, 1 refused (what went wrong and what to do on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from sluicegate.cli.decisions import coordinator_client, report_api_error, who_asks
from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.kafka import KafkaSettings

__all__ = ["add_rollback_command"]


def add_rollback_command(runs_commands: Any) -> None:
    """Add ``rollback`` to the ``runs`` subcommands (an argparse subparsers action)."""
    rollback = runs_commands.add_parser(
        "rollback",
        help="undo a run's effects after a step: compensate, or wait for a person",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    rollback.add_argument("run_id", metavar="RUN")
    rollback.add_argument(
        "--to-step", type=int, required=True, metavar="N", help="undo the effects of steps > N"
    )
    rollback.add_argument("--agent", default="refund-desk", help="the agent's name")
    rollback.add_argument("--reason", default=None, help="why (kept in the run's events)")
    rollback.add_argument(
        "--topic", default=None, help="the approvals topic (default: <agent>.approvals)"
    )
    rollback.add_argument(
        "--events-topic",
        default=None,
        help="the events topic, where the run is checked (default: <agent>.events)",
    )
    rollback.add_argument(
        "--force", action="store_true", help="write the command without checking the run"
    )
    rollback.add_argument("--by", default=None, help="who asks (default: $USER); not with --url")
    rollback.add_argument(
        "--url",
        default=None,
        help="go through the coordinator's API at this URL instead of writing to Kafka: who "
        "asks is then the name of $SLUICEGATE_API_TOKEN (scope operate)",
    )
    rollback.set_defaults(run=run_rollback)


def run_rollback(args: argparse.Namespace) -> int:
    """``sluicegate runs rollback``."""
    if args.to_step < 0:
        raise ConfigError("--to-step", "a step is 0 or more")
    if args.url is not None:
        return _over_api(args)
    from sluicegate.agents.client import request_rollback
    from sluicegate.agents.exceptions import RollingBackError
    from sluicegate.agents.messages import RollbackRun
    from sluicegate.agents.runs.directory import RunDirectory

    topic = args.topic or f"{args.agent}.approvals"
    events = args.events_topic or f"{args.agent}.events"
    command = RollbackRun(
        run_id=args.run_id, to_step=args.to_step, by=args.by or who_asks(), reason=args.reason
    )
    bootstrap = KafkaSettings.from_env(None)
    directory = RunDirectory(bootstrap, args.agent, events)
    try:
        asyncio.run(request_rollback(directory, topic, command, force=args.force))
    except RollingBackError as exc:
        print(f"sluicegate: {exc.message}", file=sys.stderr)
        print(f"what to do: {exc.what_to_do}", file=sys.stderr)
        return 1
    print(
        f"rollback of run {args.run_id} to step {args.to_step} asked "
        f"(written to {topic} at {bootstrap}); follow it on {events}"
    )
    return 0


def _over_api(args: argparse.Namespace) -> int:
    from sluicegate.coordinator.httpapi.client import CoordinatorApiError

    client = coordinator_client(args, who="who asks")
    try:
        accepted = client.rollback(
            args.agent, args.run_id, to_step=args.to_step, reason=args.reason, force=args.force
        )
    except CoordinatorApiError as exc:
        return report_api_error(exc)
    print(
        f"rollback of run {args.run_id} to step {args.to_step} asked by {accepted.get('by')} "
        f"(written to {accepted.get('topic')} by the coordinator)"
    )
    return 0

"""``sluicegate approve|reject RUN``: a person's decision on the call a run waits on.

Without ``--url`` the decision is written to the agent's approvals topic, after the agent's
events topic showed that the run waits for it (``--force`` skips the check); who decides is
``--by``, else `who_asks`. With ``--url`` the coordinator checks and writes it, and who decides
is the name of ``$SLUICEGATE_API_TOKEN`` (docs/security.md).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from typing import TYPE_CHECKING, Any

from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.kafka import KafkaSettings

if TYPE_CHECKING:
    from sluicegate.coordinator.httpapi.client import CoordinatorApiError, CoordinatorClient

__all__ = ["add_decision_commands", "coordinator_client", "report_api_error", "who_asks"]


def add_decision_commands(commands: Any) -> None:
    """Add ``approve`` and ``reject`` to the CLI's commands (an argparse subparsers action)."""
    for verb in ("approve", "reject"):
        decide = commands.add_parser(verb, help=f"{verb} the call a run waits on")
        decide.add_argument("run_id", metavar="RUN")
        decide.add_argument("--agent", default="refund-desk", help="the agent's name")
        decide.add_argument(
            "--topic", default=None, help="the approvals topic (default: <agent>.approvals)"
        )
        decide.add_argument(
            "--events-topic",
            default=None,
            help="the events topic, where the run's status is checked (default: <agent>.events)",
        )
        decide.add_argument(
            "--call-id", default="", help="the call decided on (default: the one it waits on)"
        )
        decide.add_argument(
            "--force",
            action="store_true",
            help="write the decision without checking that the run waits for approval",
        )
        decide.add_argument(
            "--by", default=None, help="who decides (default: $USER); not with --url"
        )
        decide.add_argument(
            "--url",
            default=None,
            help="decide through the coordinator's API at this URL instead of writing to Kafka: "
            "who decides is then the name of $SLUICEGATE_API_TOKEN (docs/security.md)",
        )
        decide.add_argument("--reason", required=verb == "reject", default=None)
        decide.set_defaults(run=_decide, approved=verb == "approve")


def who_asks() -> str:
    """Who runs the command, for a decision's ``by`` when ``--by`` is not given."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cli"


def _decide(args: argparse.Namespace) -> int:
    """``sluicegate approve|reject RUN``: check in the agent's events topic that the run waits
    for approval (else exit 1 saying why: unknown run, or its status), then write the decision.
    """
    from sluicegate.agents.client import send_decision
    from sluicegate.agents.messages import ApprovalDecision
    from sluicegate.agents.runs.directory import RunDirectory

    if args.url is not None:
        return _decide_over_api(args)
    args.by = args.by or who_asks()
    topic = args.topic or f"{args.agent}.approvals"
    events = args.events_topic or f"{args.agent}.events"
    decision = ApprovalDecision(
        run_id=args.run_id, approved=args.approved, call_id=args.call_id, by=args.by,
        reason=args.reason,
    )  # fmt: skip
    bootstrap = KafkaSettings.from_env(None)

    async def decide() -> None:
        if not args.force:
            directory = RunDirectory(bootstrap, args.agent, events)
            await directory.check_decision(args.run_id, args.call_id)
        await send_decision(bootstrap, topic, decision)

    asyncio.run(decide())
    verb = "approved" if args.approved else "rejected"
    print(f"{verb} run {args.run_id} (written to {topic} at {bootstrap})")
    return 0


def _decide_over_api(args: argparse.Namespace) -> int:
    """``sluicegate approve|reject RUN --url URL``: the coordinator checks the run and writes
    the decision, with the token's name as who decides."""
    from sluicegate.coordinator.httpapi.client import CoordinatorApiError

    client = coordinator_client(args, who="who decides")
    try:
        accepted = client.decide(
            args.agent, args.run_id, approved=args.approved, reason=args.reason,
            call_id=args.call_id, force=args.force,
        )  # fmt: skip
    except CoordinatorApiError as exc:
        return report_api_error(exc)
    verb = "approved" if args.approved else "rejected"
    print(f"{verb} run {args.run_id} (written to {accepted.get('topic')} by the coordinator)")
    return 0


def coordinator_client(args: argparse.Namespace, *, who: str) -> CoordinatorClient:
    """The client of ``--url`` with ``$SLUICEGATE_API_TOKEN``, for a command about a run; the
    coordinator takes ``who`` from the token and knows the agent's topics, so ``--by``,
    ``--topic`` and ``--events-topic`` are refused."""
    from sluicegate.cli.commands import api_token
    from sluicegate.coordinator.httpapi.client import CoordinatorClient

    if args.by is not None or args.topic is not None or args.events_topic is not None:
        raise ConfigError(
            "--url",
            f"the coordinator takes {who} from the token and knows the agent's topics: "
            "drop --by, --topic and --events-topic",
        )
    return CoordinatorClient(args.url, token=api_token())


def report_api_error(exc: CoordinatorApiError) -> int:
    """Say on stderr why the coordinator refused, and what to do; the exit code (1)."""
    print(f"sluicegate: {exc.message} (HTTP {exc.status} {exc.error})", file=sys.stderr)
    if exc.what_to_do:
        print(f"what to do: {exc.what_to_do}", file=sys.stderr)
    return 1

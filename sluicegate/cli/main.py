"""The ``sluicegate`` command line.

Only this module configures logging handlers. Subcommands so far:

* ``sluicegate dev kafka [--port N] [--controller-port N] [--data-dir D]``: run the
  development broker until Ctrl-C (`sluicegate.cli.dev`).
* ``sluicegate coordinator|worker --pipeline module:attr [--bootstrap HOST:PORT]``: the two
  processes of a pipeline; each waits for Kafka (retrying with backoff) before it starts.
* ``sluicegate up --pipeline module:attr``: broker, coordinator and workers on this machine
  (these three in `sluicegate.cli.processes`).
* ``sluicegate status``, ``sluicegate stop``, ``sluicegate checkpoint list|trigger|audit``: ask a
  running coordinator.
* ``sluicegate savepoint create|list|delete``, ``sluicegate state versions``: savepoints
  (`sluicegate.cli.savepoints`); ``coordinator`` and ``up`` take ``--from-savepoint NAME
  [--allow-non-restored-state]``.
* ``sluicegate approve RUN`` / ``sluicegate reject RUN --reason R``: decide on a run waiting
  for a person; exit 1 saying why when the agent's events show no such run, or a run that is
  not waiting (``--force`` writes the decision unchecked).
* ``sluicegate blobs list|erase|gc``: payloads agents stored by reference
  (`sluicegate.cli.blobs`).
* ``sluicegate memory list|show|erase``: an agent's memory per key (`sluicegate.cli.memory`).
* ``sluicegate runs list|show|history|replay|fork``: an agent's runs from its events topic,
  replayed without calling anything, and forked (`sluicegate.cli.runs`).
* ``sluicegate runs rollback RUN --to-step N``: undo a run's effects after step N
  (`sluicegate.cli.rollback`, docs/rollback.md).
* ``sluicegate deploy render --pipeline module:attr --workers N ...``: Kubernetes manifests.
* ``sluicegate faust check|run myapp:app``: a faust-streaming application on sluicegate
  (`sluicegate.cli.faust`, docs/faust.md).
* ``sluicegate demo``: the refund-desk agent demo through ``up``, with a worker killed mid-run;
  ``sluicegate demo --wordcount``: the word-count demo in one process.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from sluicegate.cli.blobs import register as register_blob_commands
from sluicegate.cli.commands import register as register_client_commands
from sluicegate.cli.decisions import add_decision_commands
from sluicegate.cli.deploy import register as register_deploy_commands
from sluicegate.cli.dev import register as register_dev_commands
from sluicegate.cli.faust import register as register_faust_commands
from sluicegate.cli.logs import configure_logging
from sluicegate.cli.memory import register as register_memory_commands
from sluicegate.cli.processes import register as register_process_commands
from sluicegate.cli.rollback import add_rollback_command
from sluicegate.cli.runs import add_runs_commands
from sluicegate.cli.savepoints import register as register_savepoint_commands
from sluicegate.cli.settings import CliSettings
from sluicegate.devkafka import KAFKA_VERSION, DevBroker
from sluicegate.operators.exceptions import SluicegateError
from sluicegate.operators.kafka import KafkaLike, KafkaSettings

__all__ = ["console", "main"]

logger = logging.getLogger("sluicegate")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``sluicegate`` console script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    configure_logging(verbose=args.verbose)
    _stop_on_sigterm()
    try:
        code: int = args.run(args)
        return code
    except KeyboardInterrupt:
        return 130
    except SluicegateError as exc:
        print(f"sluicegate: {exc}", file=sys.stderr)
        return 1


def console() -> NoReturn:
    """Entry point of the ``sluicegate`` console script and of ``python -m sluicegate``: run
    `main`, flush what it wrote, and end the process without interpreter finalization.

    obstore runs storage calls on tokio threads, which hand each result back to Python; one may
    still be doing so just after the command's last await returned. If the interpreter is
    finalizing by then, CPython ends that thread with ``pthread_exit`` inside Rust code, which
    aborts the process (SIGABRT, exit 134): about one run in three of ``sluicegate savepoint
    list`` or ``blobs erase`` did, after printing its result. Every client, file and job is
    closed by the commands themselves, so nothing is left for finalization to do.
    """
    try:
        code = main()
    except SystemExit as exc:  # argparse: --help, a usage error
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluicegate", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    register_dev_commands(commands)
    register_process_commands(commands)
    checkpoint = register_client_commands(commands)
    register_savepoint_commands(commands)
    register_blob_commands(commands)
    register_memory_commands(commands)
    audit = checkpoint.add_parser(
        "audit", help="list stored files no checkpoint references (needs no coordinator)"
    )
    audit.add_argument(
        "--delete", action="store_true", help="delete what is safe to delete now (see docs)"
    )
    audit.set_defaults(run=_audit)

    add_decision_commands(commands)
    add_rollback_command(add_runs_commands(commands))
    register_deploy_commands(commands)
    register_faust_commands(commands)

    demo = commands.add_parser("demo", help="run the demo pipeline on the embedded defaults")
    demo.add_argument("--runs", type=int, default=60, help="how many refund requests")
    demo.add_argument("--no-kill", action="store_true", help="do not SIGKILL a worker mid-run")
    demo.add_argument(
        "--approval-delay", type=float, default=1.0, help="seconds the approver takes"
    )
    demo.add_argument(
        "--wordcount", action="store_true", help="the word-count demo (one process) instead"
    )
    demo.add_argument("--records", type=int, default=10_000, help="word count: source records")
    demo.add_argument(
        "--console",
        action="store_true",
        help="keep the job and its web console (/console/) up after the summary, until Ctrl-C",
    )
    demo.set_defaults(run=_demo)
    return parser


def _stop_on_sigterm() -> None:
    """Make SIGTERM and SIGINT take the clean path of Ctrl-C.

    SIGINT is set explicitly: a process started in the background by a non-interactive shell
    inherits SIGINT as ignored, and Python then installs no handler of its own.
    """

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)


def _audit(args: argparse.Namespace) -> int:
    """``sluicegate checkpoint audit``: orphans in checkpoint storage; ``--delete`` removes the
    ones the audit rule allows (a file must be found orphaned by two audits with a completed
    checkpoint in between; the previous report is kept in storage at ``audits/last.json``)."""
    from sluicegate.coordinator.retention import audit, delete_orphans, load_report, save_report
    from sluicegate.operators.storage import open_storage

    storage = open_storage(CliSettings().storage_url)

    async def run() -> int:
        report = await audit(storage, previous=await load_report(storage))
        print(f"newest completed checkpoint: {report.newest_completed}")
        for path in report.orphans:
            mark = "deletable" if path in report.deletable else "orphan (confirm in a later audit)"
            print(f"  {path}  {mark}")
        if not report.orphans:
            print("no orphans")
        if args.delete:
            deleted = await delete_orphans(storage, report.deletable)
            print(f"deleted {len(deleted)} files")
        await save_report(storage, report)
        return 0

    return asyncio.run(run())


def _demo(args: argparse.Namespace) -> int:
    from sluicegate.demos.refund_desk.run import run_agent_demo
    from sluicegate.demos.wordcount import run_demo

    def run(bootstrap: KafkaLike) -> int:
        if args.wordcount:
            return asyncio.run(run_demo(bootstrap, args.records))
        demo = run_agent_demo(
            bootstrap, runs=args.runs, kill=not args.no_kill,
            approval_delay_s=args.approval_delay, console=args.console,
        )  # fmt: skip
        return asyncio.run(demo)

    settings = CliSettings()
    if settings.kafka_bootstrap:
        return run(KafkaSettings.from_env())
    with DevBroker(port=0, kafka_home=settings.kafka_home) as broker:
        print(f"started a local Kafka {KAFKA_VERSION} broker at {broker.bootstrap}", flush=True)
        return run(broker.bootstrap)


if __name__ == "__main__":
    sys.exit(main())

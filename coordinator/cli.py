"""The ``sluicegate`` command line.

Only this module configures logging handlers. Subcommands so far:

* ``sluicegate dev kafka [--port N] [--data-dir D]``: run the development broker until Ctrl-C.
* ``sluicegate demo``: start the development broker and push records through the demo pipeline.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from coordinator.config import CoordinatorSettings
from coordinator.devkafka import KAFKA_VERSION, DevBroker
from operators.exceptions import SluicegateError

__all__ = ["main"]

logger = logging.getLogger("sluicegate")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``sluicegate`` console script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    _stop_on_sigterm()
    try:
        code: int = args.run(args)
        return code
    except KeyboardInterrupt:
        return 130
    except SluicegateError as exc:
        print(f"sluicegate: {exc}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluicegate", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    dev = commands.add_parser("dev", help="development helpers")
    dev_commands = dev.add_subparsers(required=True, metavar="WHAT")
    kafka = dev_commands.add_parser(
        "kafka", help=f"run a local single-node Apache Kafka {KAFKA_VERSION} broker until Ctrl-C"
    )
    kafka.add_argument("--port", type=int, default=9092, help="client port (0: any free port)")
    kafka.add_argument(
        "--data-dir", type=Path, default=None, help="keep broker data here (default: temporary)"
    )
    kafka.set_defaults(run=_dev_kafka)

    demo = commands.add_parser("demo", help="run the demo pipeline on the embedded defaults")
    demo.add_argument("--records", type=int, default=10_000, help="how many source records")
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


def _dev_kafka(args: argparse.Namespace) -> int:
    settings = CoordinatorSettings()
    broker = DevBroker(port=args.port, data_dir=args.data_dir, kafka_home=settings.kafka_home)
    try:
        broker.start()
        print(f"Kafka {KAFKA_VERSION} is ready at {broker.bootstrap}", flush=True)
        print(f"broker log: {broker.log_path}; Ctrl-C stops it", flush=True)
        while broker.is_running():
            time.sleep(0.5)
        print(f"sluicegate: the broker exited unexpectedly\n{broker.log_tail()}", file=sys.stderr)
        return 1
    finally:
        broker.stop()


def _demo(args: argparse.Namespace) -> int:
    from coordinator.demo import run_demo

    settings = CoordinatorSettings()
    if settings.kafka_bootstrap:
        return asyncio.run(run_demo(settings.kafka_bootstrap, args.records))
    with DevBroker(port=0, kafka_home=settings.kafka_home) as broker:
        print(f"started a local Kafka {KAFKA_VERSION} broker at {broker.bootstrap}", flush=True)
        return asyncio.run(run_demo(broker.bootstrap, args.records))

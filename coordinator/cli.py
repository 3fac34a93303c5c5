"""The ``sluicegate`` command line.

Only this module configures logging handlers. Subcommands so far:

* ``sluicegate dev kafka [--port N] [--data-dir D]``: run the development broker until Ctrl-C.
* ``sluicegate demo``: start the development broker and push records through the demo pipeline.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
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

    pipeline_help = "the pipeline as module:attribute (a Pipeline, a JobGraph or a function)"
    coordinator = commands.add_parser("coordinator", help="run the coordinator of a pipeline")
    coordinator.add_argument("--pipeline", required=True, help=pipeline_help)
    coordinator.add_argument("--interval", type=float, default=1.0, help="checkpoint interval (s)")
    coordinator.add_argument(
        "--heartbeat-timeout", type=float, default=6.0, help="seconds before a worker is dead"
    )
    coordinator.set_defaults(run=_coordinator)

    worker = commands.add_parser("worker", help="run a worker hosting subtasks of a pipeline")
    worker.add_argument("--pipeline", required=True, help=pipeline_help)
    worker.add_argument("--worker-id", default=f"worker-{os.getpid()}")
    worker.add_argument("--slots", type=int, default=4, help="how many subtasks it may host")
    worker.set_defaults(run=_worker)

    up = commands.add_parser("up", help="broker, coordinator and workers on this machine")
    up.add_argument("--pipeline", required=True, help=pipeline_help)
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--slots", type=int, default=4, help="slots per worker")
    up.add_argument("--interval", type=float, default=1.0, help="checkpoint interval (s)")
    up.set_defaults(run=_up)

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


def _bootstrap(settings: CoordinatorSettings) -> str:
    return settings.kafka_bootstrap or "127.0.0.1:9092"


def _coordinator(args: argparse.Namespace) -> int:
    from coordinator.loader import load_graph
    from coordinator.service import Coordinator
    from coordinator.service import CoordinatorSettings as Timing
    from operators.storage import open_storage

    settings = CoordinatorSettings()
    service = Coordinator(
        load_graph(args.pipeline),
        bootstrap=_bootstrap(settings),
        storage=open_storage(settings.storage_url),
        settings=Timing(
            interval_seconds=args.interval, heartbeat_timeout_seconds=args.heartbeat_timeout
        ),
    )
    asyncio.run(service.run())
    return 0


def _worker(args: argparse.Namespace) -> int:
    from coordinator.loader import load_graph
    from operators.runtime.worker import Worker
    from operators.storage import open_storage

    settings = CoordinatorSettings()
    worker = Worker(
        load_graph(args.pipeline),
        worker_id=args.worker_id,
        slots=args.slots,
        bootstrap=_bootstrap(settings),
        storage=open_storage(settings.storage_url),
        work_dir=settings.state_dir / args.worker_id,
    )
    asyncio.run(worker.run())
    return 0


def _up(args: argparse.Namespace) -> int:
    from coordinator.loader import load_graph
    from coordinator.supervisor import Child, Supervisor

    load_graph(args.pipeline)  # refuse a bad pipeline before starting anything
    settings = CoordinatorSettings()
    me = [sys.executable, "-m", "coordinator.cli"]
    children = [
        Child("coordinator", [*me, "coordinator", "--pipeline", args.pipeline,
                              "--interval", str(args.interval)], restart=False),
        *(
            Child(f"worker-{i}", [*me, "worker", "--pipeline", args.pipeline,
                                  "--worker-id", f"worker-{i}", "--slots", str(args.slots)],
                  restart=True)
            for i in range(1, args.workers + 1)
        ),
    ]  # fmt: skip
    env = {"SLUICEGATE_STORAGE_URL": settings.storage_url}
    if settings.kafka_bootstrap:
        env["SLUICEGATE_KAFKA_BOOTSTRAP"] = settings.kafka_bootstrap
        return asyncio.run(Supervisor(children, env).run())
    with DevBroker(port=0, kafka_home=settings.kafka_home) as broker:
        print(f"started a local Kafka {KAFKA_VERSION} broker at {broker.bootstrap}", flush=True)
        env["SLUICEGATE_KAFKA_BOOTSTRAP"] = broker.bootstrap
        return asyncio.run(Supervisor(children, env).run())


def _demo(args: argparse.Namespace) -> int:
    from coordinator.demo import run_demo

    settings = CoordinatorSettings()
    if settings.kafka_bootstrap:
        return asyncio.run(run_demo(settings.kafka_bootstrap, args.records))
    with DevBroker(port=0, kafka_home=settings.kafka_home) as broker:
        print(f"started a local Kafka {KAFKA_VERSION} broker at {broker.bootstrap}", flush=True)
        return asyncio.run(run_demo(broker.bootstrap, args.records))


if __name__ == "__main__":
    sys.exit(main())

"""The ``sluicegate`` command line.

Only this module configures logging handlers. Subcommands so far:

* ``sluicegate dev kafka [--port N] [--controller-port N] [--data-dir D]``: run the
  development broker until Ctrl-C.
* ``sluicegate coordinator|worker --pipeline module:attr [--bootstrap HOST:PORT]``: the two
  processes of a pipeline; each waits for Kafka (retrying with backoff) before it starts.
* ``sluicegate up --pipeline module:attr``: broker, coordinator and workers on this machine.
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
* ``sluicegate runs list|show|history|replay|fork``: an agent's runs from its events topic,
  replayed without calling anything, and forked (`sluicegate.cli.runs`).
* ``sluicegate runs rollback RUN --to-step N``: undo a run's effects after step N
  (`sluicegate.cli.rollback`, docs/rollback.md).
* ``sluicegate deploy render --pipeline module:attr --workers N ...``: Kubernetes manifests.
* ``sluicegate demo``: the refund-desk agent demo through ``up``, with a worker killed mid-run;
  ``sluicegate demo --wordcount``: the word-count demo in one process.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from coordinator.config import CoordinatorSettings
from coordinator.httpapi.auth import ApiTokens, is_loopback
from coordinator.job_state import JobState
from coordinator.service import Coordinator
from operators.exceptions import ConfigError, SluicegateError
from operators.kafka import KafkaLike, KafkaSettings
from sluicegate.cli.blobs import register as register_blob_commands
from sluicegate.cli.commands import register as register_client_commands
from sluicegate.cli.decisions import add_decision_commands
from sluicegate.cli.deploy import register as register_deploy_commands
from sluicegate.cli.logs import configure_logging
from sluicegate.cli.reach import wait_for_kafka
from sluicegate.cli.rollback import add_rollback_command
from sluicegate.cli.runs import add_runs_commands
from sluicegate.cli.savepoints import register as register_savepoint_commands
from sluicegate.devkafka import KAFKA_VERSION, DevBroker
from sluicegate.devkafka.secure import SaslSslListener, make_certificate

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

if TYPE_CHECKING:
    from operators.runtime.loop_health import LoopHealth
    from operators.runtime.worker import Worker

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

    dev = commands.add_parser("dev", help="development helpers")
    dev_commands = dev.add_subparsers(required=True, metavar="WHAT")
    kafka = dev_commands.add_parser(
        "kafka", help=f"run a local single-node Apache Kafka {KAFKA_VERSION} broker until Ctrl-C"
    )
    kafka.add_argument("--port", type=int, default=9092, help="client port (0: any free port)")
    kafka.add_argument(
        "--host",
        default="127.0.0.1",
        help="address clients connect to (default 127.0.0.1; another exposes the broker, "
        "which has no authentication, to that network)",
    )
    kafka.add_argument(
        "--controller-port",
        type=int,
        default=0,
        help="KRaft controller port (default 0: any free port, chosen at each start)",
    )
    kafka.add_argument(
        "--data-dir", type=Path, default=None, help="keep broker data here (default: temporary)"
    )
    kafka.add_argument(
        "--auto-create-topics",
        action="store_true",
        help="producing to a topic nobody created creates it (1 partition), e.g. with kcat -P; "
        "start pipelines first so that they create their topics with the declared partitions",
    )
    kafka.add_argument(
        "--sasl-ssl-port",
        type=int,
        default=None,
        metavar="N",
        help="also listen with SASL_SSL on N (0: any free port): a self-signed certificate is "
        "made for 127.0.0.1 and the --user users get SCRAM-SHA-256/512 and PLAIN",
    )
    kafka.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="NAME:PASSWORD",
        help="a SASL user of the --sasl-ssl-port listener (repeatable; letters, digits, . _ -)",
    )
    kafka.set_defaults(run=_dev_kafka)

    pipeline_help = "the pipeline as module:attribute (a Pipeline, a JobGraph or a function)"
    coordinator = commands.add_parser("coordinator", help="run the coordinator of a pipeline")
    coordinator.add_argument("--pipeline", required=True, help=pipeline_help)
    coordinator.add_argument("--interval", type=float, default=1.0, help="checkpoint interval (s)")
    coordinator.add_argument(
        "--heartbeat-timeout", type=float, default=6.0, help="seconds before a worker is dead"
    )
    _add_bootstrap(coordinator)
    coordinator.add_argument(
        "--http-host",
        default="127.0.0.1",
        help="HTTP API address; another than loopback needs API tokens (docs/security.md)",
    )
    coordinator.add_argument(
        "--http-port", type=int, default=8470, help="HTTP API port (0: any free port)"
    )
    coordinator.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="also serve /metrics, without a token, on this port (0: any free port, logged)",
    )
    coordinator.add_argument("--metrics-host", default="127.0.0.1", help="address of /metrics")
    _add_restore(coordinator)
    coordinator.set_defaults(run=_coordinator)

    worker = commands.add_parser("worker", help="run a worker hosting subtasks of a pipeline")
    worker.add_argument("--pipeline", required=True, help=pipeline_help)
    worker.add_argument(
        "--worker-id", default=socket.gethostname(), help="unique per worker (default: hostname)"
    )
    worker.add_argument("--slots", type=int, default=4, help="how many subtasks it may host")
    worker.add_argument(
        "--retire-seconds",
        type=float,
        default=10.0,
        help="on a recovery, how long subtasks may finish the calls they are running (an "
        "agent's tool call in flight) before they are cancelled (default 10)",
    )
    _add_bootstrap(worker)
    worker.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve /metrics on this port (0: any free port, logged); "
        "default: $SLUICEGATE_METRICS_PORT, else no metrics server",
    )
    worker.add_argument("--metrics-host", default="127.0.0.1", help="address of /metrics")
    worker.add_argument(
        "--health-stale-seconds",
        type=float,
        default=30.0,
        help="/healthz on the metrics port answers 503 once the worker's event loop has not "
        "turned for this long (default 30)",
    )
    worker.set_defaults(run=_worker)

    up = commands.add_parser("up", help="broker, coordinator and workers on this machine")
    up.add_argument("--pipeline", required=True, help=pipeline_help)
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--slots", type=int, default=4, help="slots per worker")
    up.add_argument("--interval", type=float, default=1.0, help="checkpoint interval (s)")
    up.add_argument(
        "--metrics-port-base",
        type=int,
        default=8470,
        metavar="N",
        help="the coordinator's HTTP API (with /metrics) listens on N, worker i serves /metrics "
        "on N+i (default 8470: workers on 8471, 8472, ...; 0: any free port for each)",
    )
    _add_restore(up)
    up.set_defaults(run=_up)

    checkpoint = register_client_commands(commands)
    register_savepoint_commands(commands)
    register_blob_commands(commands)
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
    demo.set_defaults(run=_demo)
    return parser


def _add_restore(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from-savepoint",
        metavar="NAME",
        default=None,
        help="restore the job from this savepoint (operators mapped by uid, state re-split "
        "to the current parallelism and upgraded); once: a later start resumes from the "
        "job's own newer checkpoints",
    )
    parser.add_argument(
        "--full-checkpoint-every",
        type=int,
        default=0,
        metavar="K",
        help="every K-th checkpoint is full: its files shared with no other checkpoint, so "
        "no damaged shared file can break it; retention keeps the newest (default 0: only on "
        "demand, `sluicegate checkpoint trigger --full`)",
    )
    parser.add_argument(
        "--allow-non-restored-state",
        action="store_true",
        help="restore even if the savepoint holds state of operators the pipeline no longer "
        "has (that state is dropped)",
    )


def _restore_args(args: argparse.Namespace) -> list[str]:
    flags = ["--from-savepoint", args.from_savepoint] if args.from_savepoint else []
    flags += ["--full-checkpoint-every", str(args.full_checkpoint_every)]
    return flags + (["--allow-non-restored-state"] if args.allow_non_restored_state else [])


def _add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="Kafka bootstrap servers (default: $SLUICEGATE_KAFKA_BOOTSTRAP, else "
        "127.0.0.1:9092); unreachable: retried with backoff until it answers",
    )


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
    sasl_ssl = _sasl_ssl_listener(args)
    broker = DevBroker(
        port=args.port,
        controller_port=args.controller_port,
        host=args.host,
        data_dir=args.data_dir,
        auto_create_topics=args.auto_create_topics,
        kafka_home=settings.kafka_home,
        sasl_ssl=sasl_ssl,
    )
    try:
        broker.start()
        print(f"Kafka {KAFKA_VERSION} is ready at {broker.bootstrap}", flush=True)
        if sasl_ssl is not None:
            user = next(iter(sasl_ssl.users), "NAME")
            print(
                f"SASL_SSL at {sasl_ssl.bootstrap}: SLUICEGATE_KAFKA_BOOTSTRAP={sasl_ssl.bootstrap}"
                " SLUICEGATE_KAFKA_SECURITY_PROTOCOL=SASL_SSL"
                " SLUICEGATE_KAFKA_SASL_MECHANISM=SCRAM-SHA-512"
                f" SLUICEGATE_KAFKA_SASL_USERNAME={user} SLUICEGATE_KAFKA_SASL_PASSWORD=..."
                f" SLUICEGATE_KAFKA_SSL_CAFILE={sasl_ssl.certificate.cafile}",
                flush=True,
            )
        print(f"broker log: {broker.log_path}; Ctrl-C stops it", flush=True)
        while broker.is_running():
            time.sleep(0.5)
        print(f"sluicegate: the broker exited unexpectedly\n{broker.log_tail()}", file=sys.stderr)
        return 1
    finally:
        broker.stop()


def _sasl_ssl_listener(args: argparse.Namespace) -> SaslSslListener | None:
    """The ``--sasl-ssl-port`` listener with its certificate and ``--user`` users, or None."""
    if args.sasl_ssl_port is None:
        if args.user:
            raise ConfigError("--user", "users need a SASL_SSL listener: add --sasl-ssl-port")
        return None
    from sluicegate.devkafka.broker import free_port

    users = {}
    for given in args.user:
        name, _, password = given.partition(":")
        if not name or not password:
            raise ConfigError("--user", f"{name or given!r}: give it as NAME:PASSWORD")
        users[name] = password
    if not users:
        raise ConfigError("--sasl-ssl-port", "add at least one --user NAME:PASSWORD")
    folder = (args.data_dir or Path(tempfile.mkdtemp(prefix="sluicegate-kafka-tls-"))) / "tls"
    try:
        return SaslSslListener(args.sasl_ssl_port or free_port(), make_certificate(folder), users)
    except ValueError as exc:
        raise ConfigError("--user", str(exc)) from None


def _kafka(given: str | None = None) -> KafkaSettings:
    """Kafka settings from ``SLUICEGATE_KAFKA_*``; ``given`` (``--bootstrap``) overrides the
    bootstrap address, whose default is 127.0.0.1:9092."""
    return KafkaSettings.from_env(given)


def _coordinator(args: argparse.Namespace) -> int:
    from coordinator.options import CoordinatorOptions
    from operators.storage import open_storage
    from sluicegate.cli.loader import load_graph

    settings = CoordinatorSettings()
    tokens = _api_tokens(settings, args.http_host)
    graph = load_graph(args.pipeline)
    bootstrap = _kafka(args.bootstrap)
    asyncio.run(wait_for_kafka(bootstrap))
    service = Coordinator(
        graph,
        bootstrap=bootstrap,
        storage=open_storage(settings.storage_url),
        settings=CoordinatorOptions(
            interval_seconds=args.interval,
            heartbeat_timeout_seconds=args.heartbeat_timeout,
            from_savepoint=args.from_savepoint,
            allow_non_restored_state=args.allow_non_restored_state,
            full_checkpoint_every=args.full_checkpoint_every,
        ),
    )
    from prometheus_client import CollectorRegistry

    from coordinator.metrics import CoordinatorCollector
    from operators.runtime.metrics_server import MetricsServer

    registry = CollectorRegistry()
    registry.register(CoordinatorCollector(service))
    metrics = (
        None
        if args.metrics_port is None
        else MetricsServer.start(args.metrics_host, args.metrics_port, registry)
    )
    try:
        asyncio.run(_serve_coordinator(service, registry, tokens, args.http_host, args.http_port))
    finally:
        if metrics is not None:
            metrics.stop()
    # The run ends when the job ended: stopped (`sluicegate stop`) or failed.
    return 0 if service.job.state is JobState.STOPPED else 1


def _api_tokens(settings: CoordinatorSettings, host: str) -> ApiTokens | None:
    """The API's tokens; without any, refuse a non-loopback ``host`` and say the API is open."""
    tokens = ApiTokens.from_settings(settings)
    if tokens is None and not is_loopback(host):
        raise ConfigError(
            "--http-host",
            f"the coordinator API would listen on {host} without authentication; set "
            "SLUICEGATE_API_TOKEN (or SLUICEGATE_API_TOKEN_FILE, SLUICEGATE_API_TOKENS_FILE) "
            "to require bearer tokens, or listen on 127.0.0.1 (see docs/security.md)",
        )
    if tokens is None:
        logger.warning(
            "coordinator API authentication is off (no SLUICEGATE_API_TOKEN, "
            "SLUICEGATE_API_TOKEN_FILE or SLUICEGATE_API_TOKENS_FILE): it listens on %s only",
            host,
        )
    else:
        logger.info("coordinator API requires bearer tokens (%d configured)", len(tokens))
    return tokens


async def _serve_coordinator(
    service: Coordinator,
    registry: CollectorRegistry,
    tokens: ApiTokens | None,
    host: str,
    port: int,
) -> None:
    """Run the coordinator with its HTTP API (status, checkpoints, ``/metrics``)."""
    from agents.agent import agents_in
    from agents.approval_routes import approvals_router
    from agents.rollback_routes import rollback_router
    from agents.run_routes import runs_router
    from coordinator.httpapi.app import create_app
    from coordinator.httpapi.auth import Scope, identity, requirement
    from coordinator.httpapi.savepoints import savepoints_router
    from coordinator.httpapi.server import serve
    from coordinator.savepoints.view import CoordinatorSavepoints
    from coordinator.status import CoordinatorStatus

    app = create_app(CoordinatorStatus(service), registry, tokens=tokens)
    app.include_router(savepoints_router(CoordinatorSavepoints(service), tokens=tokens))
    agents = agents_in(service.graph)
    if agents:  # POST /agents/{agent}/runs/{run_id}/approve|reject|rollback, history, forks
        decider = identity(tokens, Scope.APPROVE)
        operator = identity(tokens, Scope.OPERATE)
        app.include_router(approvals_router(service.kafka, agents, decider=decider))
        app.include_router(
            runs_router(
                service.kafka, agents, reader=requirement(tokens, Scope.READ), operator=operator
            )
        )
        app.include_router(rollback_router(service.kafka, agents, operator=operator))
    server = await serve(app, host, port)
    print(f"coordinator API at {server.url}", flush=True)
    try:
        await service.run()
    finally:
        await server.stop()


def _worker(args: argparse.Namespace) -> int:
    from operators.runtime.loop_health import LoopHealth
    from operators.runtime.metrics_server import MetricsServer
    from operators.runtime.worker import Worker
    from operators.storage import open_storage
    from sluicegate.cli.loader import load_graph

    settings = CoordinatorSettings()
    graph = load_graph(args.pipeline)
    bootstrap = _kafka(args.bootstrap)
    asyncio.run(wait_for_kafka(bootstrap))
    worker = Worker(
        graph,
        worker_id=args.worker_id,
        slots=args.slots,
        bootstrap=bootstrap,
        storage=open_storage(settings.storage_url),
        work_dir=settings.state_dir / args.worker_id,
        retire_seconds=args.retire_seconds,
    )
    port = args.metrics_port if args.metrics_port is not None else settings.metrics_port
    health = LoopHealth(stale_after_seconds=args.health_stale_seconds)
    metrics = None if port is None else MetricsServer.start(args.metrics_host, port, health=health)
    try:
        asyncio.run(_run_worker(worker, health))
    finally:
        if metrics is not None:
            metrics.stop()
    return 0


async def _run_worker(worker: Worker, health: LoopHealth) -> None:
    """Run ``worker`` with ``health`` marking its event loop's turns (``/healthz``)."""
    ticks = asyncio.create_task(health.run())
    try:
        await worker.run()
    finally:
        ticks.cancel()
        await asyncio.gather(ticks, return_exceptions=True)


def _up(args: argparse.Namespace) -> int:
    from sluicegate.cli.loader import load_graph
    from sluicegate.cli.supervisor import Child, Supervisor

    load_graph(args.pipeline)  # refuse a bad pipeline before starting anything
    settings = CoordinatorSettings()
    me = [sys.executable, "-m", "sluicegate"]
    base = args.metrics_port_base
    children = [
        Child("coordinator", [*me, "coordinator", "--pipeline", args.pipeline,
                              "--interval", str(args.interval), "--http-port", str(base),
                              *_restore_args(args)],
              restart=False),
        *(
            Child(f"worker-{i}", [*me, "worker", "--pipeline", args.pipeline,
                                  "--worker-id", f"worker-{i}", "--slots", str(args.slots),
                                  "--metrics-port", str(base + i if base else 0)],
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


def _audit(args: argparse.Namespace) -> int:
    """``sluicegate checkpoint audit``: orphans in checkpoint storage; ``--delete`` removes the
    ones the audit rule allows (a file must be found orphaned by two audits with a completed
    checkpoint in between; the previous report is kept in storage at ``audits/last.json``)."""
    from coordinator.retention import audit, delete_orphans, load_report, save_report
    from operators.storage import open_storage

    storage = open_storage(CoordinatorSettings().storage_url)

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
            bootstrap, runs=args.runs, kill=not args.no_kill, approval_delay_s=args.approval_delay
        )
        return asyncio.run(demo)

    settings = CoordinatorSettings()
    if settings.kafka_bootstrap:
        return run(_kafka())
    with DevBroker(port=0, kafka_home=settings.kafka_home) as broker:
        print(f"started a local Kafka {KAFKA_VERSION} broker at {broker.bootstrap}", flush=True)
        return run(broker.bootstrap)


if __name__ == "__main__":
    sys.exit(main())

"""The processes of a pipeline: ``sluicegate coordinator``, ``sluicegate worker``, and
``sluicegate up`` (a broker, a coordinator and workers on this machine, supervised).

``coordinator`` and ``worker`` wait for Kafka (retrying with backoff) before they start; the
coordinator serves its HTTP API (`coordinator.httpapi`) and, on ``--metrics-port``, ``/metrics``
without a token; a worker serves ``/metrics`` and ``/healthz`` on its metrics port.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from sluicegate.cli.reach import wait_for_kafka, wait_for_storage
from sluicegate.cli.settings import CliSettings
from sluicegate.coordinator.httpapi.auth import ApiTokens, is_loopback
from sluicegate.coordinator.job_state import JobState
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.devkafka import KAFKA_VERSION, DevBroker
from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.kafka import KafkaSettings
from sluicegate.operators.runtime.worker_settings import WorkerSettings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from sluicegate.operators.runtime.loop_health import LoopHealth
    from sluicegate.operators.runtime.worker import Worker

__all__ = ["add_up_flags", "flags_of", "register", "run_up"]

logger = logging.getLogger("sluicegate")

PIPELINE_HELP = "the pipeline as module:attribute (a Pipeline, a JobGraph or a function)"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``coordinator``, ``worker`` and ``up``."""
    coordinator = commands.add_parser("coordinator", help="run the coordinator of a pipeline")
    coordinator.add_argument("--pipeline", required=True, help=PIPELINE_HELP)
    _add_interval(coordinator)
    coordinator.add_argument(
        "--heartbeat-timeout",
        dest="heartbeat_timeout_seconds",
        type=float,
        default=_default(CoordinatorSettings, "heartbeat_timeout_seconds"),
        help="seconds before a worker is dead",
    )
    coordinator.add_argument(
        "--settle",
        dest="settle_seconds",
        type=float,
        default=_default(CoordinatorSettings, "settle_seconds"),
        help="seconds the first placement waits after the first worker is heard, so workers "
        "started together all get subtasks (0: as soon as the workers have enough slots)",
    )
    _add_bootstrap(coordinator)
    coordinator.add_argument(
        "--http-host",
        default=_default(CoordinatorSettings, "http_host"),
        help="HTTP API address; another than loopback needs API tokens (docs/security.md)",
    )
    coordinator.add_argument(
        "--http-port",
        type=int,
        default=_default(CoordinatorSettings, "http_port"),
        help="HTTP API port (0: any free port)",
    )
    coordinator.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="also serve /metrics, without a token, on this port (0: any free port, logged)",
    )
    coordinator.add_argument(
        "--metrics-host",
        default=_default(CoordinatorSettings, "metrics_host"),
        help="address of /metrics",
    )
    _add_restore(coordinator)
    _add_restart_delays(coordinator)
    coordinator.set_defaults(run=_coordinator)

    worker = commands.add_parser("worker", help="run a worker hosting subtasks of a pipeline")
    worker.add_argument("--pipeline", required=True, help=PIPELINE_HELP)
    worker.add_argument(
        "--worker-id",
        default=_default(WorkerSettings, "worker_id"),
        help="unique per worker (default: hostname)",
    )
    worker.add_argument(
        "--slots",
        type=int,
        default=_default(WorkerSettings, "slots"),
        help="how many subtasks it may host",
    )
    worker.add_argument(
        "--retire-seconds",
        type=float,
        default=_default(WorkerSettings, "retire_seconds"),
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
    worker.add_argument(
        "--metrics-host",
        default=_default(WorkerSettings, "metrics_host"),
        help="address of /metrics",
    )
    worker.add_argument(
        "--health-stale-seconds",
        type=float,
        default=_default(WorkerSettings, "health_stale_seconds"),
        help="/healthz on the metrics port answers 503 once the worker's event loop has not "
        "turned for this long (default 30)",
    )
    _add_state_changelog(worker)
    worker.set_defaults(run=_worker)

    up = commands.add_parser("up", help="broker, coordinator and workers on this machine")
    up.add_argument("--pipeline", required=True, help=PIPELINE_HELP)
    add_up_flags(up)
    up.set_defaults(run=_up)


def add_up_flags(up: argparse.ArgumentParser) -> None:
    """The flags of ``up`` besides ``--pipeline`` (``sluicegate faust run`` takes them too)."""
    up.add_argument("--workers", type=int, default=2, help="how many workers")
    up.add_argument(
        "--slots", type=int, default=_default(WorkerSettings, "slots"), help="slots per worker"
    )
    _add_interval(up)
    up.add_argument(
        "--metrics-port-base",
        type=int,
        default=8470,
        metavar="N",
        help="the coordinator's HTTP API (with /metrics) listens on N, worker i serves /metrics "
        "on N+i (default 8470: workers on 8471, 8472, ...; 0: any free port for each)",
    )
    _add_restore(up)
    _add_state_changelog(up)


def run_up(args: argparse.Namespace) -> int:
    """``sluicegate up`` with ``args.pipeline``."""
    return _up(args)


def flags_of(model: type[BaseModel], args: argparse.Namespace) -> dict[str, Any]:
    """The flags in ``args`` that set a field of ``model``: those whose ``dest`` is its name."""
    return {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}


def _default(model: type[BaseModel], name: str) -> Any:
    """The default of a setting, for its flag: one default, the model's."""
    return model.model_fields[name].get_default(call_default_factory=True)


def _add_restart_delays(parser: argparse.ArgumentParser) -> None:
    """The exponential restart delay (Flink's ``restart-strategy.exponential-delay``)."""
    for flag, field, help_text in (
        ("--restart-delay", "restart_delay_seconds", "seconds before the first restart"),
        ("--restart-delay-multiplier", "restart_delay_multiplier", "each failure multiplies it"),
        ("--restart-max-delay", "restart_max_delay_seconds", "the most a restart waits (s)"),
        ("--restart-reset", "restart_reset_seconds", "seconds without failure that reset it"),
    ):
        parser.add_argument(
            flag,
            dest=field,
            type=float,
            default=_default(CoordinatorSettings, field),
            help=help_text,
        )


def _add_interval(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interval",
        dest="interval_seconds",
        type=float,
        default=_default(CoordinatorSettings, "interval_seconds"),
        help="checkpoint interval (s)",
    )


def _add_state_changelog(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-changelog",
        action="store_true",
        help="checkpoint state as a changelog of each interval's writes, with RocksDB's files "
        "uploaded in the background now and then: smaller, steadier checkpoints, longer "
        "restores (docs/architecture.md, 'State changelog')",
    )


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
        default=_default(CoordinatorSettings, "full_checkpoint_every"),
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


def _worker_args(args: argparse.Namespace, i: int) -> list[str]:
    """The flags ``up`` gives its worker ``i``."""
    port = args.metrics_port_base + i if args.metrics_port_base else 0
    flags = ["--worker-id", f"worker-{i}", "--slots", str(args.slots), "--metrics-port", str(port)]
    return flags + (["--state-changelog"] if args.state_changelog else [])


def _add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="Kafka bootstrap servers (default: $SLUICEGATE_KAFKA_BOOTSTRAP, else "
        "127.0.0.1:9092); unreachable: retried with backoff until it answers",
    )


def _coordinator(args: argparse.Namespace) -> int:
    from sluicegate.cli.loader import load_graph
    from sluicegate.operators.storage import open_storage
    from sluicegate.operators.tracing import start_tracing, stop_tracing

    settings = CoordinatorSettings.from_env(**flags_of(CoordinatorSettings, args))
    tokens = _api_tokens(settings)
    graph = load_graph(args.pipeline)
    bootstrap = KafkaSettings.from_env(args.bootstrap)
    asyncio.run(wait_for_kafka(bootstrap))
    storage = open_storage(settings.storage_url)
    asyncio.run(wait_for_storage(storage, settings.storage_url))
    start_tracing(settings.otlp_endpoint, service="sluicegate-coordinator")
    service = Coordinator(graph, bootstrap=bootstrap, storage=storage, settings=settings)
    from prometheus_client import CollectorRegistry

    from sluicegate.coordinator.metrics import CoordinatorCollector
    from sluicegate.operators.runtime.metrics_server import MetricsServer

    registry = CollectorRegistry()
    registry.register(CoordinatorCollector(service))
    metrics = (
        None
        if settings.metrics_port is None
        else MetricsServer.start(settings.metrics_host, settings.metrics_port, registry)
    )
    try:
        serving = _serve_coordinator(
            service, registry, tokens, settings.http_host, settings.http_port
        )
        asyncio.run(serving)
    finally:
        stop_tracing()
        if metrics is not None:
            metrics.stop()
    # The run ends when the job ended: stopped (`sluicegate stop`) or failed.
    return 0 if service.facts().state is JobState.STOPPED else 1


def _api_tokens(settings: CoordinatorSettings) -> ApiTokens | None:
    """The API's tokens; without any, refuse a non-loopback ``http_host`` and say the API is
    open."""
    host = settings.http_host
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
    """Run the coordinator with its HTTP API (status, checkpoints, ``/metrics``, console)."""
    from sluicegate.cli.api_app import coordinator_app
    from sluicegate.coordinator.httpapi.server import serve

    app = coordinator_app(service, registry, tokens)
    server = await serve(app, host, port)
    print(f"coordinator API at {server.url}", flush=True)
    print(f"web console at {server.url}/console/", flush=True)
    try:
        await service.run()
    finally:
        await server.stop()


def _worker(args: argparse.Namespace) -> int:
    from sluicegate.cli.loader import load_graph
    from sluicegate.operators.runtime.loop_health import LoopHealth
    from sluicegate.operators.runtime.metrics_server import MetricsServer
    from sluicegate.operators.runtime.worker import Worker
    from sluicegate.operators.tracing import start_tracing, stop_tracing

    settings = WorkerSettings.from_env(**flags_of(WorkerSettings, args))
    graph = load_graph(args.pipeline)
    bootstrap = KafkaSettings.from_env(args.bootstrap)
    asyncio.run(wait_for_kafka(bootstrap))
    worker = Worker(graph, settings, bootstrap=bootstrap)
    port, host = settings.metrics_port, settings.metrics_host
    health = LoopHealth(stale_after_seconds=settings.health_stale_seconds)
    metrics = None if port is None else MetricsServer.start(host, port, health=health)
    start_tracing(settings.otlp_endpoint, service="sluicegate-worker")
    try:
        asyncio.run(_run_worker(worker, health))
    finally:
        stop_tracing()  # the spans not yet exported go out before the process ends
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
    settings = CliSettings()
    me = [sys.executable, "-m", "sluicegate"]
    base = args.metrics_port_base
    coordinator = ["--interval", str(args.interval_seconds), "--http-port", str(base)]
    children = [
        Child(
            "coordinator",
            [*me, "coordinator", "--pipeline", args.pipeline, *coordinator, *_restore_args(args)],
            restart=False,
        ),
        *(
            Child(
                f"worker-{i}",
                [*me, "worker", "--pipeline", args.pipeline, *_worker_args(args, i)],
                restart=True,
            )
            for i in range(1, args.workers + 1)
        ),
    ]
    env = {"SLUICEGATE_STORAGE_URL": settings.storage_url}
    if settings.kafka_bootstrap:
        env["SLUICEGATE_KAFKA_BOOTSTRAP"] = settings.kafka_bootstrap
        return asyncio.run(Supervisor(children, env).run())
    with DevBroker(port=0, kafka_home=settings.kafka_home) as broker:
        print(f"started a local Kafka {KAFKA_VERSION} broker at {broker.bootstrap}", flush=True)
        env["SLUICEGATE_KAFKA_BOOTSTRAP"] = broker.bootstrap
        return asyncio.run(Supervisor(children, env).run())

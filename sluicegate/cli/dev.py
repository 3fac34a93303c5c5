"""``sluicegate dev kafka``: the development broker (`sluicegate.devkafka`) until Ctrl-C, with
an optional SASL_SSL listener for trying Kafka security locally."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from sluicegate.cli.settings import CliSettings
from sluicegate.devkafka import KAFKA_VERSION, DevBroker
from sluicegate.devkafka.secure import SaslSslListener, make_certificate
from sluicegate.operators.exceptions import ConfigError

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dev kafka``."""
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


def _dev_kafka(args: argparse.Namespace) -> int:
    settings = CliSettings()
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

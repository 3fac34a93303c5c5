"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) for development.

`DevBroker` runs the official jars (see `jars`) as a child process bound to 127.0.0.1. It is
what ``sluicegate dev kafka``, ``make demo`` and the test session use when no
``SLUICEGATE_KAFKA_BOOTSTRAP`` is given.

The child is started in its own session (so Ctrl-C in a terminal reaches us, not it) and with a
parent-death signal (so it never outlives us, even if we are killed with SIGKILL).
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import logging
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO

from sluicegate.devkafka.exceptions import BrokerStartError
from sluicegate.devkafka.jars import broker_resources, ensure_jars, require_tool
from sluicegate.devkafka.secure import SaslSslListener
from sluicegate.operators.kafka import clients as kafka_clients

__all__ = [
    "DevBroker",
    "free_port",
    "new_cluster_id",
    "on_host",
    "server_properties",
    "wait_until_ready",
]

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_STOP_TIMEOUT_S = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_until_ready(bootstrap: str, timeout_s: float) -> None:
    """Return once a metadata round trip to ``bootstrap`` succeeds; raise TimeoutError if not."""
    deadline = time.monotonic() + timeout_s
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    # Wait for the listener first: the Kafka client logs every refused connection as an error.
    while not _accepts(host, int(port)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listens on {bootstrap} after {timeout_s}s")
        await asyncio.sleep(0.25)
    while True:
        admin = kafka_clients.admin(bootstrap, request_timeout_ms=5000)
        try:
            await admin.start()
            cluster = await admin.describe_cluster()
            if cluster["brokers"]:
                return
        except Exception as exc:  # noqa: BLE001 - any failure here means "not yet"
            logger.debug("broker at %s not ready: %s", bootstrap, exc)
        finally:
            await admin.close()
        if time.monotonic() > deadline:
            raise TimeoutError(f"no metadata from {bootstrap} within {timeout_s}s")
        await asyncio.sleep(0.25)


def _accepts(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def server_properties(
    *,
    port: int,
    controller_port: int,
    log_dir: Path,
    auto_create_topics: bool = False,
    sasl_ssl: SaslSslListener | None = None,
) -> str:
    """The broker's ``server.properties``: the template in ``deploy/kafka`` filled in, plus
    the settings of a SASL_SSL listener if given."""
    template = string.Template((broker_resources() / "server.properties").read_text())
    text = template.substitute(
        port=port,
        controller_port=controller_port,
        log_dir=log_dir,
        auto_create_topics=str(auto_create_topics).lower(),
        extra_listeners="" if sasl_ssl is None else f",{sasl_ssl.listener}",
    )
    return text if sasl_ssl is None else text + sasl_ssl.properties()


def on_host(properties: str, host: str, port: int) -> str:
    """``properties`` with the PLAINTEXT client listener on ``host`` instead of 127.0.0.1,
    listened on and advertised; every other listener (the controller's) stays where it is."""
    return properties.replace(f"PLAINTEXT://127.0.0.1:{port}", f"PLAINTEXT://{host}:{port}")


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to send SIGTERM when the parent dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def new_cluster_id(draw: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A KRaft cluster id: URL-safe base64 of 16 random bytes. Like Kafka's own ids, never one
    that starts with ``-``, which the storage tool would take for an option (1 in 64 did)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(draw()).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


class DevBroker:
    """One KRaft broker process.

    ``port=0`` picks a free port; ``controller_port=0`` (the default) a free port for the
    KRaft controller listener at each start. Without ``data_dir`` the broker's data lives in a
    temporary folder removed on `stop`; with one, the data is kept and reused on the next start.
    ``host``: the address clients connect to, listened on and advertised instead of 127.0.0.1
    (a network namespace's own address, so that other hosts reach it; there is no
    authentication), the controller still on loopback.
    ``auto_create_topics``: producing to a topic nobody created creates it (one partition), for
    experiments with kcat; off by default, since it races the coordinator's own topic creation.
    ``sasl_ssl``: a second listener with TLS and SCRAM/PLAIN users (`sluicegate.devkafka.secure`);
    its users are added when storage is formatted.
    """

    def __init__(
        self,
        *,
        port: int = 9092,
        host: str = "127.0.0.1",
        controller_port: int = 0,
        data_dir: Path | None = None,
        kafka_home: Path | None = None,
        heap: str = "512m",
        ready_timeout_s: float = 90.0,
        auto_create_topics: bool = False,
        sasl_ssl: SaslSslListener | None = None,
    ) -> None:
        self.port = port or free_port()
        self.sasl_ssl = sasl_ssl
        self.auto_create_topics = auto_create_topics
        self._given_controller_port = controller_port
        self.controller_port: int | None = None
        """The controller listener's port, once started."""
        self._given_data_dir = data_dir
        self._kafka_home = kafka_home
        self._heap = heap
        self.host = host
        self._ready_timeout_s = ready_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._data_dir: Path | None = None

    @property
    def bootstrap(self) -> str:
        """The address clients connect to: ``<host>:<port>`` (``127.0.0.1:<port>``)."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """Where the broker's own output goes."""
        if self._data_dir is None:
            raise RuntimeError("the broker has not been started")
        return self._data_dir / "broker.log"

    def start(self) -> None:
        """Fetch the jars if needed, format storage if new, start the broker, wait for metadata.

        Blocking; from a running event loop use `start_async`.
        """
        self._launch()
        try:
            asyncio.run(self._ready())
        except BaseException:
            self.stop()
            raise

    async def start_async(self) -> None:
        """`start` for callers inside an event loop."""
        self._launch()
        try:
            await self._ready()
        except BaseException:
            self.stop()
            raise

    def _launch(self) -> None:
        if self._process is not None:
            raise RuntimeError("the broker is already running")
        java = require_tool("java")
        libs = ensure_jars(self._kafka_home)
        self._check_port_free()
        self._data_dir = self._given_data_dir or Path(tempfile.mkdtemp(prefix="sluicegate-kafka-"))
        self._data_dir.mkdir(parents=True, exist_ok=True)
        config = self._write_config(self._data_dir)
        classpath = f"{libs}/*"
        if not (self._data_dir / "log" / "meta.properties").exists():
            self._format(java, classpath, config)
        logging_config = broker_resources() / "log4j2.properties"
        command = [
            java, f"-Xmx{self._heap}", "-Xms128m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={logging_config}", "-cp", classpath,
            "kafka.Kafka", str(config),
        ]  # fmt: skip
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # async-signal-safe: a single prctl call
        )
        logger.info("started Kafka broker pid %s on %s", self._process.pid, self.bootstrap)

    async def _ready(self) -> None:
        waiter = asyncio.ensure_future(wait_until_ready(self.bootstrap, self._ready_timeout_s))
        try:
            while not waiter.done():
                if self._process is not None and self._process.poll() is not None:
                    raise BrokerStartError(
                        f"the broker exited with code {self._process.returncode} while starting",
                        self.log_tail(),
                    )
                await asyncio.wait({waiter}, timeout=0.2)
            waiter.result()
        except TimeoutError as exc:
            raise BrokerStartError(str(exc), self.log_tail()) from exc
        finally:
            waiter.cancel()

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after 30 s) and remove temporary data."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                logger.warning("broker pid %s ignored SIGTERM; killing it", process.pid)
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._given_data_dir is None and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    def is_running(self) -> bool:
        """Whether the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the broker printed."""
        try:
            text = self.log_path.read_text(errors="replace")
        except (OSError, RuntimeError):
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> DevBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _check_port_free(self) -> None:
        ports = [(self.host, self.port, "--port")]
        if self._given_controller_port:
            ports.append(("127.0.0.1", self._given_controller_port, "--controller-port"))
        for host, port, option in ports:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                if sock.connect_ex((host, port)) == 0:
                    raise BrokerStartError(
                        f"port {port} on {host} is already in use: stop what listens there "
                        f"or pass another {option}"
                    )

    def _write_config(self, data_dir: Path) -> Path:
        # Placeholders keep their names even when the data dir is reused, so the controller
        # port may change between starts; KRaft only records the node and cluster ids.
        self.controller_port = self._given_controller_port or free_port()
        config = data_dir / "server.properties"
        config.write_text(
            server_properties(
                port=self.port,
                controller_port=self.controller_port,
                log_dir=data_dir / "log",
                auto_create_topics=self.auto_create_topics,
                sasl_ssl=self.sasl_ssl,
            )
        )
        if self.host != "127.0.0.1":
            config.write_text(on_host(config.read_text(), self.host, self.port))
        return config

    def _format(self, java: str, classpath: str, config: Path) -> None:
        cluster_id = new_cluster_id()
        command = [java, "-cp", classpath, "kafka.tools.StorageTool", "format",
                   "-t", cluster_id, "-c", str(config)]  # fmt: skip
        if self.sasl_ssl is not None:
            command += self.sasl_ssl.format_arguments()
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise BrokerStartError("formatting KRaft storage failed", done.stdout + done.stderr)

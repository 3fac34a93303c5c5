"""A worker's ``/metrics``: a registry served over HTTP from a thread of the worker process.

The worker's asyncio loop is busy with subtasks (a sync process function may hold it for a
while), so the scrape is answered by prometheus_client's small threaded HTTP server instead,
which reads the registry under its own locks. It answers every path with the metrics.
"""

from __future__ import annotations

import logging
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

from operators.exceptions import ConfigError

__all__ = ["MetricsServer"]

logger = logging.getLogger(__name__)


class MetricsServer:
    """Serves a registry over HTTP until `stop`; made by `MetricsServer.start`."""

    def __init__(self, server: WSGIServer, thread: threading.Thread, host: str) -> None:
        self._server = server
        self._thread = thread
        self.host = host
        self.port: int = server.server_port
        """The port it listens on: the one the OS picked when asked for port 0."""

    @classmethod
    def start(
        cls, host: str, port: int, registry: CollectorRegistry | None = None
    ) -> MetricsServer:
        """Listen on ``host:port`` (0: any free port) and serve ``registry`` (default: the
        global one, which also holds the agents' metrics).

        Raises:
            ConfigError: the address cannot be bound (port in use, unknown host).
        """
        try:
            served = REGISTRY if registry is None else registry
            server, thread = start_http_server(port, addr=host, registry=served)
        except OSError as exc:
            raise ConfigError(
                "worker metrics address",
                f"cannot listen on {host}:{port} ({exc.strerror or exc}); "
                "choose another --metrics-port or stop what uses this one",
            ) from exc
        metrics = cls(server, thread, host)
        logger.info("metrics at %s", metrics.url, extra={"metrics_url": metrics.url})
        return metrics

    @property
    def url(self) -> str:
        """Where to scrape, e.g. ``http://127.0.0.1:8471/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        """Stop accepting, close the socket and wait for the serving thread to end."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

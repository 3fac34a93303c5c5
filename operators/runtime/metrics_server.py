"""A worker's ``/metrics``: a registry served over HTTP from a thread of the worker process.

The worker's asyncio loop is busy with subtasks (a sync process function may hold it for a
while), so the scrape is answered by prometheus_client's small threaded HTTP server instead,
which reads the registry under its own locks. It answers every path with the metrics, in the
format the ``Accept`` header asks for when it can, else in the Prometheus text format; given a
`LoopHealth`, ``/healthz`` answers 200 while the worker's event loop turns and 503 once it has
not for a while (a liveness probe that means something; see `operators.runtime.loop_health`).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app

from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.runtime.exposition import tolerant_accept
from sluicegate.operators.runtime.loop_health import LoopHealth

__all__ = ["MetricsServer"]

logger = logging.getLogger(__name__)


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one line per scrape is noise)."""


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
        cls,
        host: str,
        port: int,
        registry: CollectorRegistry | None = None,
        health: LoopHealth | None = None,
    ) -> MetricsServer:
        """Listen on ``host:port`` (0: any free port) and serve ``registry`` (default: the
        global one, which also holds the agents' metrics), and ``/healthz`` from ``health``
        (without it, ``/healthz`` is the metrics like any path).

        Raises:
            ConfigError: the address cannot be bound (port in use, unknown host).
        """
        try:
            served = REGISTRY if registry is None else registry
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
            server_class = type(
                "MetricsHTTPServer", (_ThreadingServer,), {"address_family": family}
            )
            app = tolerant_accept(make_wsgi_app(served))
            if health is not None:
                app = _with_healthz(app, health)
            server: WSGIServer = make_server(
                host, port, app, server_class, handler_class=_QuietHandler
            )
        except OSError as exc:
            raise ConfigError(
                "worker metrics address",
                f"cannot listen on {host}:{port} ({exc.strerror or exc}); "
                "choose another --metrics-port or stop what uses this one",
            ) from exc
        thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
        thread.start()
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


_WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _with_healthz(app: _WsgiApp, health: LoopHealth) -> _WsgiApp:
    """``app`` with ``GET /healthz``: 200 or 503, and the loop's age as JSON."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/healthz":
            return app(environ, start_response)
        report = health.report()
        body = json.dumps(
            {
                "status": "ok" if report.healthy else "stuck",
                "loop_age_seconds": round(report.loop_age_seconds, 3),
                "stale_after_seconds": health.stale_after_seconds,
            }
        ).encode()
        status = "200 OK" if report.healthy else "503 Service Unavailable"
        start_response(status, [("Content-Type", "application/json")])
        return [body]

    return wrapped

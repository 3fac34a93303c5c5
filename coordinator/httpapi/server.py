"""Serving the HTTP API with uvicorn inside the coordinator's own asyncio loop.

The coordinator owns the process: its signal handlers, its logging configuration (the CLI's)
and its lifecycle. uvicorn therefore installs no signal handlers, configures no logging, runs
no lifespan and writes no access log (a Prometheus scrape every few seconds is not news).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

from sluicegate.operators.exceptions import ConfigError, RetryableError

__all__ = ["ApiServer", "serve"]

logger = logging.getLogger(__name__)

_STARTUP_TIMEOUT_SECONDS = 10.0


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signals to its host and says when it accepts."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.accepting = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.accepting.set()


class ApiServer:
    """A running HTTP API; `stop` ends it. Made by `serve`."""

    def __init__(
        self, server: _EmbeddedServer, task: asyncio.Task[None], host: str, port: int
    ) -> None:
        self._server = server
        self._task = task
        self.host = host
        self.port = port
        """The port it listens on: the one the OS picked when asked for port 0."""

    @property
    def url(self) -> str:
        """Base URL of the API, e.g. ``http://127.0.0.1:8470``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        """Stop accepting, let requests in progress finish (a few seconds at most), return.

        Re-raises what ended the server if it failed on its own.
        """
        self._server.should_exit = True
        await self._task
        logger.info("coordinator API stopped", extra={"api_url": self.url})


async def serve(app: FastAPI, host: str, port: int) -> ApiServer:
    """Serve ``app`` on ``host:port`` in the running loop; returns once it accepts connections.

    Steps:

    1. bind and listen here, so a busy port raises `ConfigError` and port 0 gives its real
       number (uvicorn would ``sys.exit`` on a bind error);
    2. run uvicorn over that socket in a task of the running loop;
    3. wait until uvicorn accepts, or fail with what ended its task.
    """
    sock = _listen(host, port)
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        http="h11",
        ws="none",
        server_header=False,
        timeout_graceful_shutdown=5,
    )
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=f"http-api-{host}:{port}")
    accepting = asyncio.create_task(server.accepting.wait())
    try:
        done, _ = await asyncio.wait(
            {task, accepting},
            timeout=_STARTUP_TIMEOUT_SECONDS,
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        accepting.cancel()
    if accepting not in done:
        server.should_exit = True
        sock.close()
        if task in done:
            await task  # raises what ended it
        else:
            task.cancel()
        raise RetryableError(
            f"the coordinator API did not start on {host}:{port} "
            f"within {_STARTUP_TIMEOUT_SECONDS:.0f} s"
        )
    api = ApiServer(server, task, host, sock.getsockname()[1])
    logger.info("coordinator API listening on %s", api.url, extra={"api_url": api.url})
    return api


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        raise ConfigError(
            "coordinator API address",
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); "
            "choose another port or stop what uses this one",
        ) from exc

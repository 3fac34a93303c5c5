"""The refund desk's "world": a small HTTP service that records every effect by idempotency key.

The demo's tools issue refunds, reverse them and send emails here. Every effect request carries
an ``Idempotency-Key`` header. The first request with a key executes, and its answer (2xx, or a
4xx refusal) is stored under the key; every later request with that key gets the stored answer
back unchanged: a *replay*. Doing the same business action twice under different keys (a second
active refund of one order, a second reversal of one refund, one run's email subject sent twice)
is still done but counted as a *duplicate*: what an effectively-once run must never cause.
``GET /stats`` and `WorldState.snapshot` let tests assert that.

Endpoints (JSON; errors are ``{"error": code, "message": text}``)::

    GET  /orders/{order_id}             the order (read-only, deterministic from its id)
    POST /refunds                       effect: {order_id, amount, run_id} -> refund, 201
    POST /refunds/{refund_id}/reverse   effect: -> refund with status "reversed", 200
    POST /emails                        effect: {to, subject, body, run_id} -> email, 201
    GET  /effects/{key}                 {status_code, body} stored under key, or 404
    GET  /stats                         counters, see `WorldState.stats`
    POST /admin/faults                  {every, mode}: set fault injection

Fault injection, for tests: with ``every=k`` the k-th, 2k-th, ... effect request (counted from
when faults were set) is answered 503. Mode ``"before"`` answers before executing: nothing
happened and a retry with the same key executes. Mode ``"after"`` answers after executing: the
effect happened but the caller did not learn it (the unknown outcome ``GET /effects/{key}``
resolves). Set it with ``WorldState(fail_every=...)``, `WorldState.set_faults` or the endpoint.

Nothing is persisted: the world process outlives the workers that the tests kill.
Run it by hand with ``python -m sluicegate.demos.refund_desk.world --port 8480``.
"""

from __future__ import annotations

import argparse
import logging
import socket
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Annotated, Self

import httpx
import uvicorn
from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from sluicegate.demos.refund_desk.exceptions import WorldUnavailableError
from sluicegate.demos.refund_desk.world_state import (
    IDEMPOTENCY_HEADER,
    FaultMode,
    Reply,
    WorldState,
    error_reply,
    lookup_order,
)
from sluicegate.operators.exceptions import ConfigError

__all__ = ["WorldServer", "create_world_app", "main"]

logger = logging.getLogger(__name__)


class _RefundBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str
    amount: float
    run_id: str


class _EmailBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: str
    subject: str
    body: str
    run_id: str


class _FaultsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    every: int = Field(ge=0)
    mode: FaultMode = "before"


_Key = Annotated[str | None, Header(alias=IDEMPOTENCY_HEADER)]
_MISSING_KEY = error_reply(
    400, "missing_idempotency_key", f"effects need an {IDEMPOTENCY_HEADER} header"
)


def _respond(reply: Reply) -> JSONResponse:
    return JSONResponse(reply.body, status_code=reply.status_code)


def create_world_app(state: WorldState) -> FastAPI:
    """The HTTP API over ``state``; the endpoints are listed in the module docstring."""
    app = FastAPI(title="sluicegate demo world")

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        return _respond(error_reply(422, "invalid_request", problems))

    @app.get("/orders/{order_id}")
    def get_order(order_id: str) -> JSONResponse:
        order = lookup_order(order_id)
        if order is None:
            return _respond(error_reply(404, "order_not_found", f"no order {order_id!r}"))
        return JSONResponse(order)

    @app.post("/refunds")
    def issue_refund(body: _RefundBody, key: _Key = None) -> JSONResponse:
        if not key:
            return _respond(_MISSING_KEY)
        return _respond(state.issue_refund(key, **body.model_dump()))

    @app.post("/refunds/{refund_id}/reverse")
    def reverse_refund(refund_id: str, key: _Key = None) -> JSONResponse:
        if not key:
            return _respond(_MISSING_KEY)
        return _respond(state.reverse_refund(key, refund_id=refund_id))

    @app.post("/emails")
    def send_email(body: _EmailBody, key: _Key = None) -> JSONResponse:
        if not key:
            return _respond(_MISSING_KEY)
        return _respond(state.send_email(key, **body.model_dump()))

    @app.get("/effects/{key:path}")
    def find_effect(key: str) -> JSONResponse:
        reply = state.find_effect(key)
        if reply is None:
            return _respond(error_reply(404, "effect_not_found", f"no effect under key {key!r}"))
        return JSONResponse({"status_code": reply.status_code, "body": reply.body})

    @app.get("/stats")
    def stats() -> JSONResponse:
        return JSONResponse(state.stats())

    @app.post("/admin/faults")
    def set_faults(body: _FaultsBody) -> JSONResponse:
        state.set_faults(body.every, body.mode)
        return JSONResponse(body.model_dump())

    return app


class WorldServer:
    """The world served by uvicorn on 127.0.0.1 in a background thread; a context manager.

    ``port=0`` lets the OS choose; `port` and `url` are the real ones once `start` returns.
    """

    def __init__(
        self, state: WorldState | None = None, *, port: int = 0, startup_timeout: float = 10.0
    ) -> None:
        self.state = state if state is not None else WorldState()
        self.port = port
        self._startup_timeout = startup_timeout
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._error: Exception | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Serve, and return once the world answers HTTP. Steps:

        1. bind and listen here, so a busy port raises `ConfigError` and port 0 gives its real
           number before uvicorn runs;
        2. run uvicorn over that socket in a daemon thread with its own event loop;
        3. poll ``GET /stats`` until it answers 200; if the thread dies or the deadline passes
           first, stop and raise `WorldUnavailableError`.
        """
        if self._server is not None:
            raise RuntimeError("the world server is already started")
        try:
            self._socket = socket.create_server(("127.0.0.1", self.port), backlog=128)
        except OSError as exc:
            raise ConfigError(
                "world port", f"cannot listen on 127.0.0.1:{self.port}: {exc}"
            ) from exc
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(
            create_world_app(self.state),
            log_config=None,
            access_log=False,
            lifespan="off",
            loop="asyncio",
            http="h11",
            ws="none",
            server_header=False,
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name=f"world-{self.port}", daemon=True)
        self._thread.start()
        try:
            self._wait_until_answering()
        except BaseException:
            self.stop()
            raise
        logger.info("demo world listening on %s", self.url)

    def stop(self) -> None:
        """Stop serving (requests in progress get two seconds) and close the socket; idempotent."""
        server, thread, sock = self._server, self._thread, self._socket
        self._server = self._thread = self._socket = None
        if server is None or thread is None or sock is None:
            return
        server.should_exit = True
        thread.join(timeout=5.0)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout=5.0)
        sock.close()
        logger.info("demo world on %s stopped", self.url)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        assert self._server is not None
        assert self._socket is not None
        try:
            self._server.run(sockets=[self._socket])
        except Exception as exc:
            self._error = exc
            logger.exception("demo world server failed")

    def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + self._startup_timeout
        with httpx.Client(base_url=self.url, timeout=1.0) as client:
            while time.monotonic() < deadline:
                if self._thread is None or not self._thread.is_alive():
                    reason = f"its thread ended ({self._error!r})"
                    raise WorldUnavailableError("start", reason)
                try:
                    if client.get("/stats").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.01)  # poll interval, not a wait for correctness
        raise WorldUnavailableError("start", f"no answer within {self._startup_timeout:.0f} s")


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m sluicegate.demos.refund_desk.world``: serve the world until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m sluicegate.demos.refund_desk.world",
        description="Serve the refund desk's world: orders, refunds and emails by idempotency key.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    parser.add_argument("--port", type=int, default=8480, help="port (default %(default)s)")
    parser.add_argument(
        "--fail-every", type=int, default=0, help="answer every k-th effect request 503 (0: never)"
    )
    parser.add_argument(
        "--fail-mode",
        choices=("before", "after"),
        default="before",
        help="503 before or after executing the effect (default %(default)s)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    state = WorldState(fail_every=args.fail_every, fail_mode=args.fail_mode)
    uvicorn.run(create_world_app(state), host=args.host, port=args.port, log_config=None)


if __name__ == "__main__":
    main()

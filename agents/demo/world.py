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
Run it by hand with ``python -m agents.demo.world --port 8480``.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Annotated, Any, Literal, Self

import httpx
import uvicorn
from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from agents.demo.exceptions import WorldUnavailableError
from operators.exceptions import ConfigError

__all__ = [
    "IDEMPOTENCY_HEADER",
    "EffectKind",
    "FaultMode",
    "Reply",
    "WorldServer",
    "WorldState",
    "create_world_app",
    "lookup_order",
    "main",
]

logger = logging.getLogger(__name__)

IDEMPOTENCY_HEADER = "Idempotency-Key"
FaultMode = Literal["before", "after"]
EffectKind = Literal["refund", "reversal", "email"]

_ORDER_ID = re.compile(r"ord-[0-9a-z-]{1,40}")
_FIRST_NAMES = ("Ada", "Bruno", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hiro", "Ines")
_LAST_NAMES = ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Haddad", "Byrne")
_ORDER_STATUSES = ("delivered", "delivered", "shipped", "delayed")


def lookup_order(order_id: str) -> dict[str, Any] | None:
    """The order ``order_id`` names, derived from its SHA-256; ``None`` if the id is malformed.

    Ids match ``ord-[0-9a-z-]{1,40}``; the amount lies between 5.00 and 500.00 EUR.
    """
    if _ORDER_ID.fullmatch(order_id) is None:
        return None
    n = int.from_bytes(hashlib.sha256(order_id.encode()).digest()[:8], "big")
    first = _FIRST_NAMES[n % len(_FIRST_NAMES)]
    last = _LAST_NAMES[(n >> 8) % len(_LAST_NAMES)]
    return {
        "order_id": order_id,
        "customer": f"{first} {last}",
        "email": f"{first}.{last}@example.com".lower(),
        "amount": (500 + (n >> 16) % 49_501) / 100,
        "currency": "EUR",
        "status": _ORDER_STATUSES[(n >> 40) % len(_ORDER_STATUSES)],
    }


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer of the world: status code and JSON body."""

    status_code: int
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Effect:
    """What one idempotency key executed, as stored."""

    seq: int
    key: str
    kind: EffectKind
    request: dict[str, Any]
    reply: Reply
    duplicate: bool


def _error(status_code: int, code: str, message: str) -> Reply:
    return Reply(status_code, {"error": code, "message": message})


class WorldState:
    """Orders, refunds, emails and the effect ledger, behind one lock (uvicorn runs handlers in
    threads); every effect is checked, executed and recorded atomically.
    """

    def __init__(self, *, fail_every: int = 0, fail_mode: FaultMode = "before") -> None:
        self._lock = threading.Lock()
        self._fail_every = 0
        self._fail_mode: FaultMode = "before"
        self._since_faults_set = 0
        self.set_faults(fail_every, fail_mode)
        self._effects: dict[str, _Effect] = {}
        self._refunds: dict[str, dict[str, Any]] = {}
        self._emails: list[dict[str, Any]] = []
        self._email_subjects: set[tuple[str, str]] = set()
        self._counts = dict.fromkeys(
            ("requests", "replays", "mismatched_replays", "duplicates", "rejected", "faults"), 0
        )
        self._by_kind: dict[EffectKind, int] = {"refund": 0, "reversal": 0, "email": 0}

    def set_faults(self, every: int, mode: FaultMode = "before") -> None:
        """Answer every ``every``-th effect request from now on 503 (``0``: never), see module."""
        if every < 0:
            raise ValueError(f"fail every must be >= 0, not {every}")
        with self._lock:
            self._fail_every, self._fail_mode, self._since_faults_set = every, mode, 0
        logger.info("world faults set: every %s, mode %s", every, mode)

    def issue_refund(self, key: str, *, order_id: str, amount: float, run_id: str) -> Reply:
        """Effect: refund ``amount`` of an order (201); 404 unknown order, 422 bad amount."""
        request = {"order_id": order_id, "amount": amount, "run_id": run_id}
        return self._execute("refund", key, request, lambda: self._refund(order_id, amount, run_id))

    def reverse_refund(self, key: str, *, refund_id: str) -> Reply:
        """Effect: mark a refund reversed (200); 404 if unknown."""
        request = {"refund_id": refund_id}
        return self._execute("reversal", key, request, lambda: self._reverse(refund_id))

    def send_email(self, key: str, *, to: str, subject: str, body: str, run_id: str) -> Reply:
        """Effect: send an email (201); 422 if ``to`` is not an address."""
        request = {"to": to, "subject": subject, "body": body, "run_id": run_id}
        return self._execute("email", key, request, lambda: self._email(to, subject, body, run_id))

    def find_effect(self, key: str) -> Reply | None:
        """The reply stored under ``key``, or ``None`` if no request with it ever executed."""
        with self._lock:
            effect = self._effects.get(key)
            return None if effect is None else copy.deepcopy(effect.reply)

    def stats(self) -> dict[str, Any]:
        """Counters: ``requests`` (effect requests with a key), ``effects`` (executed 2xx) and
        ``effects_by_kind``, ``rejected`` (executed 4xx), ``replays``, ``mismatched_replays``
        (a key replayed for a different request), ``duplicates``, ``faults`` (503s injected),
        ``refunds_active``, ``emails``.
        """
        with self._lock:
            return self._stats_locked()

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able copy of everything: effects in execution order, refunds, emails, stats."""
        with self._lock:
            effects = [
                {
                    "seq": e.seq,
                    "key": e.key,
                    "kind": e.kind,
                    "request": e.request,
                    "status_code": e.reply.status_code,
                    "body": e.reply.body,
                    "duplicate": e.duplicate,
                }
                for e in self._effects.values()
            ]
            return copy.deepcopy(
                {
                    "effects": effects,
                    "refunds": list(self._refunds.values()),
                    "emails": self._emails,
                    "stats": self._stats_locked(),
                }
            )

    def _execute(
        self,
        kind: EffectKind,
        key: str,
        request: dict[str, Any],
        action: Callable[[], tuple[Reply, bool]],
    ) -> Reply:
        """Answer one effect request. Steps, all under the lock:

        1. count the request and draw a fault: ``"before"`` answers 503 now, nothing recorded;
        2. a known key answers its stored reply (a replay), whatever the request says now;
        3. otherwise run ``action`` (returning reply and whether it is a duplicate) and store
           its reply under the key, 2xx or 4xx alike;
        4. a fault ``"after"`` answers 503 instead of the reply stored in step 3 or replayed.
        """
        with self._lock:
            self._counts["requests"] += 1
            fault = self._draw_fault()
            if fault == "before":
                return self._fault(kind, key, executed=False)
            stored = self._effects.get(key)
            if stored is not None:
                self._counts["replays"] += 1
                if (stored.kind, stored.request) != (kind, request):
                    self._counts["mismatched_replays"] += 1
                    logger.warning("world: key %s replayed for a different request", key)
                reply = stored.reply
            else:
                reply, duplicate = action()
                effect = _Effect(len(self._effects) + 1, key, kind, request, reply, duplicate)
                self._effects[key] = effect
                self._record(effect)
            if fault == "after":
                return self._fault(kind, key, executed=True)
            return copy.deepcopy(reply)

    def _draw_fault(self) -> FaultMode | None:
        if self._fail_every == 0:
            return None
        self._since_faults_set += 1
        return self._fail_mode if self._since_faults_set % self._fail_every == 0 else None

    def _fault(self, kind: EffectKind, key: str, *, executed: bool) -> Reply:
        self._counts["faults"] += 1
        logger.info("world: injected 503 for %s key %s (executed: %s)", kind, key, executed)
        return _error(503, "injected_fault", f"fault injected (effect executed: {executed})")

    def _record(self, effect: _Effect) -> None:
        if effect.reply.status_code >= 400:
            self._counts["rejected"] += 1
            logger.debug("world: %s key %s rejected %s", effect.kind, effect.key, effect.reply)
            return
        self._by_kind[effect.kind] += 1
        if effect.duplicate:
            self._counts["duplicates"] += 1
            logger.warning("world: DUPLICATE %s under key %s", effect.kind, effect.key)
        else:
            logger.debug("world: %s executed under key %s", effect.kind, effect.key)

    def _refund(self, order_id: str, amount: float, run_id: str) -> tuple[Reply, bool]:
        order = lookup_order(order_id)
        if order is None:
            return _error(404, "order_not_found", f"no order {order_id!r}"), False
        if amount <= 0 or round(amount * 100) > round(order["amount"] * 100):
            message = f"refund amount {amount} is outside (0, {order['amount']}] for {order_id}"
            return _error(422, "invalid_amount", message), False
        duplicate = any(
            r["order_id"] == order_id and r["status"] == "issued" for r in self._refunds.values()
        )
        refund_id = f"ref-{len(self._refunds) + 1:06d}"
        refund = {
            "refund_id": refund_id,
            "order_id": order_id,
            "amount": round(amount, 2),
            "currency": order["currency"],
            "status": "issued",
            "run_id": run_id,
        }
        self._refunds[refund_id] = refund
        return Reply(201, dict(refund)), duplicate

    def _reverse(self, refund_id: str) -> tuple[Reply, bool]:
        refund = self._refunds.get(refund_id)
        if refund is None:
            return _error(404, "refund_not_found", f"no refund {refund_id!r}"), False
        duplicate = refund["status"] == "reversed"
        refund["status"] = "reversed"
        return Reply(200, dict(refund)), duplicate

    def _email(self, to: str, subject: str, body: str, run_id: str) -> tuple[Reply, bool]:
        if "@" not in to:
            return _error(422, "invalid_recipient", f"{to!r} is not an email address"), False
        duplicate = (run_id, subject) in self._email_subjects
        self._email_subjects.add((run_id, subject))
        email_id = f"eml-{len(self._emails) + 1:06d}"
        email = {"email_id": email_id, "to": to, "subject": subject, "body": body}
        email |= {"run_id": run_id, "status": "sent"}
        self._emails.append(email)
        return Reply(201, dict(email)), duplicate

    def _stats_locked(self) -> dict[str, Any]:
        return {
            "requests": self._counts["requests"],
            "effects": sum(self._by_kind.values()),
            "effects_by_kind": dict(self._by_kind),
            "rejected": self._counts["rejected"],
            "replays": self._counts["replays"],
            "mismatched_replays": self._counts["mismatched_replays"],
            "duplicates": self._counts["duplicates"],
            "faults": self._counts["faults"],
            "refunds_active": sum(r["status"] == "issued" for r in self._refunds.values()),
            "emails": len(self._emails),
        }


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
_MISSING_KEY = _error(
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
        return _respond(_error(422, "invalid_request", problems))

    @app.get("/orders/{order_id}")
    def get_order(order_id: str) -> JSONResponse:
        order = lookup_order(order_id)
        if order is None:
            return _respond(_error(404, "order_not_found", f"no order {order_id!r}"))
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
            return _respond(_error(404, "effect_not_found", f"no effect under key {key!r}"))
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
    """``python -m agents.demo.world``: serve the world in the foreground until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m agents.demo.world",
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

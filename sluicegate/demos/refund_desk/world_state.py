"""The world's state: orders, effects by idempotency key, replays, duplicates, faults.

Plain in-memory data behind one lock (uvicorn serves it from another thread). See
`sluicegate.demos.refund_desk.world` for the HTTP service around it and the rules it enforces.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "IDEMPOTENCY_HEADER",
    "EffectKind",
    "FaultMode",
    "Reply",
    "WorldState",
    "error_reply",
    "lookup_order",
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


def error_reply(status_code: int, code: str, message: str) -> Reply:
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
        return error_reply(503, "injected_fault", f"fault injected (effect executed: {executed})")

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
            return error_reply(404, "order_not_found", f"no order {order_id!r}"), False
        if amount <= 0 or round(amount * 100) > round(order["amount"] * 100):
            message = f"refund amount {amount} is outside (0, {order['amount']}] for {order_id}"
            return error_reply(422, "invalid_amount", message), False
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
            return error_reply(404, "refund_not_found", f"no refund {refund_id!r}"), False
        duplicate = refund["status"] == "reversed"
        refund["status"] = "reversed"
        return Reply(200, dict(refund)), duplicate

    def _email(self, to: str, subject: str, body: str, run_id: str) -> tuple[Reply, bool]:
        if "@" not in to:
            return error_reply(422, "invalid_recipient", f"{to!r} is not an email address"), False
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

"""What the refund desk's tools call the world with: an async HTTP client.

Every effect call sends ``Idempotency-Key: key``, so retrying it with the same key is safe. The
outcome of a call that raised `WorldUnavailableError` is unknown: retry with the same key, or
ask `WorldClient.find_effect`. Errors (tree in `sluicegate.demos.refund_desk.exceptions`):

* no answer, a timeout or a 5xx: `WorldUnavailableError` (retryable);
* a 4xx: `WorldRejectedError` (fatal) with the status and the world's error code and message.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import httpx

from sluicegate.demos.refund_desk.exceptions import WorldRejectedError, WorldUnavailableError

__all__ = ["WorldClient"]

logger = logging.getLogger(__name__)

_IDEMPOTENCY_HEADER = "Idempotency-Key"


class WorldClient:
    """Async client of the demo world at ``base_url`` (e.g. ``http://127.0.0.1:8480``)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, transport=transport)

    async def get_order(self, order_id: str) -> dict[str, Any]:
        """The order: ``{order_id, customer, email, amount, currency, status}``; not an effect."""
        return await self._call("get_order", "GET", f"/orders/{quote(order_id, safe='')}")

    async def issue_refund(
        self, order_id: str, amount: float, run_id: str, *, key: str
    ) -> dict[str, Any]:
        """Effect: refund ``amount`` of the order; returns ``{refund_id, amount, status, ...}``."""
        body = {"order_id": order_id, "amount": amount, "run_id": run_id}
        return await self._call("issue_refund", "POST", "/refunds", body=body, key=key)

    async def reverse_refund(self, refund_id: str, *, key: str) -> dict[str, Any]:
        """Effect: reverse a refund; returns it with ``status == "reversed"``."""
        path = f"/refunds/{quote(refund_id, safe='')}/reverse"
        return await self._call("reverse_refund", "POST", path, key=key)

    async def send_email(
        self, to: str, subject: str, body: str, run_id: str, *, key: str
    ) -> dict[str, Any]:
        """Effect: send an email; returns ``{email_id, to, subject, ..., status}``."""
        payload = {"to": to, "subject": subject, "body": body, "run_id": run_id}
        return await self._call("send_email", "POST", "/emails", body=payload, key=key)

    async def find_effect(self, key: str) -> dict[str, Any] | None:
        """What the call made with ``key`` answered, ``{status_code, body}``; ``None`` if no
        call with that key ever executed (so retrying it cannot make a duplicate).
        """
        try:
            return await self._call("find_effect", "GET", f"/effects/{quote(key, safe='')}")
        except WorldRejectedError as exc:
            if exc.status_code == 404:
                return None
            raise

    async def stats(self) -> dict[str, Any]:
        """The world's counters (effects, replays, duplicates, ...), see `WorldState.stats`."""
        return await self._call("stats", "GET", "/stats")

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _call(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        headers = {_IDEMPOTENCY_HEADER: key} if key is not None else None
        try:
            response = await self._http.request(method, path, json=body, headers=headers)
        except httpx.TransportError as exc:
            raise WorldUnavailableError(operation, f"{type(exc).__name__}: {exc}") from exc
        logger.debug("world %s %s -> %s", method, path, response.status_code)
        payload = _json_object(response)
        if response.status_code >= 500:
            reason = str(payload.get("message", response.reason_phrase))
            raise WorldUnavailableError(operation, reason, response.status_code)
        if response.status_code >= 400:
            error = str(payload.get("error", "rejected"))
            message = str(payload.get("message", payload.get("detail", response.reason_phrase)))
            raise WorldRejectedError(operation, response.status_code, error, message)
        if response.status_code >= 300 or not payload:
            reason = f"unexpected answer HTTP {response.status_code}: {response.text[:200]!r}"
            raise WorldUnavailableError(operation, reason, response.status_code)
        return payload


def _json_object(response: httpx.Response) -> dict[str, Any]:
    """The body as a JSON object, or ``{}`` if it is not one (a proxy's HTML error page)."""
    try:
        payload = response.json()
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}

"""The operator alert webhook: one JSON POST per alert, with its journal key as
``Idempotency-Key`` so that a receiver can drop the repeat of a POST whose answer was lost.

The runtime calls `post_alert` through the effect journal (`agents.journal.perform`, policy
``retry``): once an alert's ``done`` is journaled it is never posted again, and a POST cut off
by a crash is posted again with the same key.
"""

from __future__ import annotations

from typing import Any

import httpx

from sluicegate.agents.exceptions import AlertRefusedError, AlertUnavailableError

__all__ = ["IDEMPOTENCY_HEADER", "post_alert"]

IDEMPOTENCY_HEADER = "Idempotency-Key"
_BODY_SHOWN = 500


async def post_alert(
    url: str, key: str, alert: dict[str, Any], *, timeout_s: float = 10.0
) -> dict[str, Any]:
    """POST ``alert`` to ``url`` with ``Idempotency-Key: key``; the answer's status code.

    Raises:
        AlertUnavailableError: no answer, or 429 or 5xx (retried later with the same key).
        AlertRefusedError: another 4xx (recorded for good; the alert event stands).
    """
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            response = await http.post(url, json=alert, headers={IDEMPOTENCY_HEADER: key})
    except httpx.HTTPError as exc:
        raise AlertUnavailableError(url, repr(exc)) from exc
    status = response.status_code
    if status == 429 or status >= 500:
        raise AlertUnavailableError(url, f"HTTP {status}")
    if status >= 400:
        raise AlertRefusedError(url, status, response.text[:_BODY_SHOWN])
    return {"status_code": status}

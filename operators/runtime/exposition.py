"""Content negotiation of ``/metrics``, shared by the coordinator's API and the worker's server.

prometheus_client picks the format from the ``Accept`` header but fails on a version it cannot
parse (``application/openmetrics-text; version=banana`` raises a TypeError): a scrape must
never fail on its header, so such a request gets the Prometheus text format, which every
scraper reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder, generate_latest

__all__ = ["encode_metrics", "tolerant_accept"]

_Environ = dict[str, Any]
_WsgiApp = Callable[[_Environ, Callable[..., Any]], Iterable[bytes]]


def encode_metrics(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """``registry`` in the format ``accept`` asks for, and its content type; the Prometheus
    text format when the header asks for nothing this library can produce."""
    try:
        encoder, content_type = choose_encoder(accept or "")
        return encoder(registry), content_type
    except (TypeError, ValueError):
        return generate_latest(registry), CONTENT_TYPE_PLAIN_0_0_4


def tolerant_accept(app: _WsgiApp) -> _WsgiApp:
    """Wrap prometheus_client's WSGI ``app``: an ``Accept`` header it would fail on is dropped,
    so the answer is the Prometheus text format instead of a 500."""

    def wrapped(environ: _Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
        accept = environ.get("HTTP_ACCEPT")
        if accept:
            try:
                choose_encoder(accept)
            except (TypeError, ValueError):
                environ = {k: v for k, v in environ.items() if k != "HTTP_ACCEPT"}
        return app(environ, start_response)

    return wrapped

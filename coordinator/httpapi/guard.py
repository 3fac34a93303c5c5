"""Refusing requests a browser could be tricked into sending (cross-site request forgery).

A web page can make a browser POST to any address it can reach, the coordinator on
``127.0.0.1`` included, without a preflight when the body is ``text/plain`` or a form, or when
there is no body at all. Such a request always carries an ``Origin`` header. So, before any
route runs:

1. a request with an ``Origin`` header is refused (403 ``cross_origin``) unless the origin is
   one the app was given: the API is for programs, which send no ``Origin``, and it serves no
   CORS headers, so no other site may read its answers either;
2. a request that carries a body (a ``Content-Type``, a non-zero ``Content-Length`` or a
   ``Transfer-Encoding``) must say ``Content-Type: application/json`` (else 415
   ``unsupported_media_type``).

A pure ASGI middleware, so it also covers routes mounted after the app was made.
"""

from __future__ import annotations

from collections.abc import Collection

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BrowserGuard"]


class BrowserGuard:
    """ASGI middleware refusing foreign origins and bodies that are not JSON."""

    def __init__(self, app: ASGIApp, *, allowed_origins: Collection[str] = ()) -> None:
        self._app = app
        self._allowed = frozenset(origin.rstrip("/") for origin in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(dict(scope["headers"]))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self._app(scope, receive, send)

    def _refusal(self, headers: dict[bytes, bytes]) -> JSONResponse | None:
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1").rstrip("/") not in self._allowed:
            return _error(
                403,
                "cross_origin",
                "requests from web pages (with an Origin header) are refused",
                "Call the API from a program or the sluicegate CLI, not from a browser.",
            )
        content_type = headers.get(b"content-type")
        has_body = (
            content_type is not None
            or headers.get(b"content-length", b"0").strip() not in (b"", b"0")
            or b"transfer-encoding" in headers
        )
        if has_body and not _is_json(content_type):
            return _error(
                415,
                "unsupported_media_type",
                "a request body must be JSON",
                "Send the body with Content-Type: application/json, or send no body.",
            )
        return None


def _is_json(content_type: bytes | None) -> bool:
    if content_type is None:
        return False
    media_type = content_type.split(b";", 1)[0].strip().lower()
    return media_type == b"application/json"


def _error(status: int, error: str, message: str, what_to_do: str) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={"error": error, "message": message, "what_to_do": what_to_do},
    )

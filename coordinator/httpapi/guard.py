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

The web console (``console_prefix``, e.g. ``/console/``) is a web page of the coordinator
itself, so under that prefix only:

3. an ``Origin`` equal to the request's own origin (its scheme and ``Host``) passes as well:
   the console's forms post to the page's own origin. A page of any other origin (another
   port of the same host included) is still refused, before the console's session cookie and
   anti-forgery token are even looked at;
4. an HTML form's body (``application/x-www-form-urlencoded``) is accepted besides JSON.

A pure ASGI middleware, so it also covers routes mounted after the app was made.
"""

from __future__ import annotations

from collections.abc import Collection

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BrowserGuard"]


class BrowserGuard:
    """ASGI middleware refusing foreign origins and bodies that are not JSON."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_origins: Collection[str] = (),
        console_prefix: str | None = None,
    ) -> None:
        self._app = app
        self._allowed = frozenset(origin.rstrip("/") for origin in allowed_origins)
        self._console = console_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self._app(scope, receive, send)

    def _refusal(self, scope: Scope) -> JSONResponse | None:
        headers: dict[bytes, bytes] = dict(scope["headers"])
        path: str = scope.get("path", "")
        console = self._console is not None and (
            path.startswith(self._console) or path == self._console.rstrip("/")
        )
        allowed = self._allowed | ({_own_origin(scope, headers)} if console else set())
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1").rstrip("/") not in allowed:
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
        if has_body and not (_is_json(content_type) or (console and _is_form(content_type))):
            return _error(
                415,
                "unsupported_media_type",
                "a request body must be JSON",
                "Send the body with Content-Type: application/json, or send no body.",
            )
        return None


def _media_type(content_type: bytes | None) -> bytes:
    return b"" if content_type is None else content_type.split(b";", 1)[0].strip().lower()


def _is_json(content_type: bytes | None) -> bool:
    return _media_type(content_type) == b"application/json"


def _is_form(content_type: bytes | None) -> bool:
    return _media_type(content_type) == b"application/x-www-form-urlencoded"


def _own_origin(scope: Scope, headers: dict[bytes, bytes]) -> str:
    """The origin a page of this server has: the request's scheme and ``Host``. Without a
    ``Host`` nothing is the own origin (an empty string matches no ``Origin`` header)."""
    host = headers.get(b"host", b"").decode("latin-1").strip()
    if not host:
        return ""
    scheme = "https" if scope.get("scheme") == "https" else "http"
    default = {"http": ":80", "https": ":443"}[scheme]
    return f"{scheme}://{host.removesuffix(default)}"


def _error(status: int, error: str, message: str, what_to_do: str) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={"error": error, "message": message, "what_to_do": what_to_do},
    )

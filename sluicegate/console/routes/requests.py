"""How every route of the console answers: sessions, the checks of a state-changing request,
and the page frame.

A page (a GET) is a `Visit`: the request's session, signed in or (auth off) started here. A
state-changing request (a POST) is a `Submission` once it passed, in order:

1. the `BrowserGuard` (its ``Origin``, if any, is the console's own; the middleware);
2. the session cookie (HttpOnly, SameSite=Strict, Secure over TLS), else 401;
3. the session's anti-forgery token in its form, else 403;
4. the scope the route needs, held by the session's principal, else 403.

With the API's auth off (no token configured, loopback only) a session is started without a
sign-in, as ``unauthenticated``, and a request whose ``Host`` is not a loopback name is
refused, so a page of a rebound DNS name cannot reach the console either.

Every answer forbids scripts, frames and foreign forms (``Content-Security-Policy``) and
caching. What an action did is shown once, on the page it redirects to (`after`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from sluicegate.console import pages
from sluicegate.console.markup import Safe, frame
from sluicegate.coordinator.httpapi.auth import UNAUTHENTICATED, ApiTokens, Scope, is_loopback
from sluicegate.coordinator.httpapi.sessions import Session, Sessions

__all__ = ["COOKIE", "ConsoleRequests", "Submission", "Visit"]

logger = logging.getLogger(__name__)

COOKIE = "sluicegate_console"
_MAX_FORM_BYTES = 64 * 1024
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True, slots=True)
class Visit:
    """A page request's session, and the cookie to set when it was started here (auth off)."""

    session: Session
    cookie: str | None


@dataclass(frozen=True, slots=True)
class Submission:
    """A state-changing request that passed steps 1-4: its session and its form."""

    session: Session
    form: dict[str, str]


class ConsoleRequests:
    """The checks and answers every console route shares; see the module docstring."""

    def __init__(
        self,
        *,
        prefix: str,
        tokens: ApiTokens | None,
        sessions: Sessions,
        pages: Sequence[tuple[str, str]],
    ) -> None:
        self.prefix = prefix
        self.tokens = tokens
        self.sessions = sessions
        self._pages = list(pages)
        self._messages: dict[str, str] = {}  # anti-forgery token -> what its last action did

    def html(
        self,
        title: str,
        body: Safe,
        session: Session | None,
        active: str,
        status: int = 200,
        refresh_seconds: int | None = None,
    ) -> HTMLResponse:
        """A whole page in the console's frame, with the console's headers."""
        who = None if session is None or self.tokens is None else session.principal.name
        csrf = None if session is None else session.csrf_token
        content = frame(
            title, body, active=active, prefix=self.prefix, who=who, csrf=csrf,
            pages=self._pages, refresh_seconds=refresh_seconds,
        )  # fmt: skip
        return HTMLResponse(content, status_code=status, headers=_HEADERS)

    def refusal(
        self, status: int, title: str, message: str, session: Session | None
    ) -> HTMLResponse:
        """A page that says why the request was refused."""
        return self.html(title, pages.notice(message, error=True), session, "", status)

    def lacks(self, session: Session, scope: Scope) -> HTMLResponse | None:
        """The refusal when the session's principal lacks ``scope`` (step 4), else None."""
        if scope in session.principal.scopes:
            return None
        message = f"The token of {session.principal.name!r} lacks the scope {scope.value!r}."
        return self.refusal(403, "Not allowed", message, session)

    async def visit(self, request: Request) -> Visit | Response:
        """The session of a GET, or the answer instead of the page (refused, sign in)."""
        refused = self._host_refused(request)
        if refused is not None:
            return refused
        found = self.sessions.find(request.cookies.get(COOKIE))
        if found is not None:
            return Visit(found, None)
        if self.tokens is not None:
            return RedirectResponse(f"{self.prefix}sign-in", status_code=303)
        cookie, started = self.sessions.start(UNAUTHENTICATED)
        return Visit(started, cookie)

    def page(
        self,
        request: Request,
        visit: Visit,
        title: str,
        body: Safe,
        active: str,
        *,
        refresh_seconds: int | None = None,
    ) -> Response:
        """The page of ``visit``, setting its cookie if it was started here."""
        answer = self.html(title, body, visit.session, active, refresh_seconds=refresh_seconds)
        return self.with_cookie(answer, request, visit.cookie)

    async def submit(self, request: Request, scope: Scope) -> Submission | Response:
        """Steps 2-4 of the module docstring for a POST (1 is the middleware's); the answer
        instead when refused."""
        refused = self._host_refused(request)
        if refused is not None:
            return refused
        session = self.sessions.find(request.cookies.get(COOKIE))
        form = await self.form_of(request)
        if session is None:
            return self.refusal(401, "Signed out", "Sign in first.", None)
        if not self.sessions.check_form(session, form.get("csrf")):
            logger.warning("console form refused: no valid anti-forgery token")
            message = "This form did not come from your console session."
            return self.refusal(403, "Refused", message, session)
        lacking = self.lacks(session, scope)
        if lacking is not None:
            return lacking
        return Submission(session, form)

    def after(self, session: Session, path: str, message: str) -> Response:
        """Redirect to ``path`` (under the prefix), which shows ``message`` once."""
        self._messages[session.csrf_token] = message
        return RedirectResponse(f"{self.prefix}{path}", status_code=303)

    def message_of(self, session: Session) -> str | None:
        """What the session's last action did, once (None: nothing to say)."""
        return self._messages.pop(session.csrf_token, None)

    def notice_of(self, session: Session) -> Safe:
        """`message_of` as a notice on a page."""
        return pages.notice(self.message_of(session))

    def with_cookie(self, response: Response, request: Request, cookie: str | None) -> Response:
        """``response``, setting the session cookie ``cookie`` (None: none to set)."""
        if cookie is not None:
            response.set_cookie(
                COOKIE,
                cookie,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
                path=self.prefix,
            )
        return response

    @staticmethod
    async def form_of(request: Request) -> dict[str, str]:
        """The request's urlencoded form, first value per name; empty when too large."""
        body = await request.body()
        if len(body) > _MAX_FORM_BYTES:
            return {}
        parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        return {key: values[0] for key, values in parsed.items()}

    def _host_refused(self, request: Request) -> HTMLResponse | None:
        if self.tokens is None and not is_loopback(_host_name(request.headers.get("host") or "")):
            return self.refusal(
                403,
                "Refused",
                "With authentication off the console answers only to a loopback address "
                "(127.0.0.1, localhost). Configure API tokens to serve it on other names.",
                None,
            )
        return None


def _host_name(host: str) -> str:
    """The name of a ``Host`` header without its port: ``[::1]:8470`` -> ``[::1]``."""
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0]

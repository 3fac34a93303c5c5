"""The console's door: its home, the stylesheet, signing in with an API token (a session
cookie) and signing out."""

from __future__ import annotations

import logging
from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from sluicegate.console import pages
from sluicegate.console.routes.requests import COOKIE, ConsoleRequests
from sluicegate.coordinator.httpapi.auth import Scope

__all__ = ["sign_in_router"]

logger = logging.getLogger(__name__)


def sign_in_router(requests: ConsoleRequests) -> APIRouter:
    """``/``, ``console.css``, ``sign-in`` (GET, POST) and ``sign-out`` under the prefix."""
    router = APIRouter(include_in_schema=False)
    prefix, sessions = requests.prefix, requests.sessions
    stylesheet = files("sluicegate.console").joinpath("console.css").read_bytes()

    @router.get(prefix + "console.css")
    async def stylesheet_route() -> Response:
        return Response(stylesheet, media_type="text/css", headers={"Cache-Control": "max-age=300"})

    @router.get(prefix.rstrip("/"))
    @router.get(prefix)
    async def home() -> Response:
        return RedirectResponse(f"{prefix}job", status_code=303)

    @router.get(prefix + "sign-in")
    async def sign_in_form(request: Request) -> Response:
        if requests.tokens is None:
            return RedirectResponse(f"{prefix}job", status_code=303)
        return requests.html(
            "Sign in", pages.sign_in_body(error=None, prefix=prefix), None, "sign-in"
        )

    @router.post(prefix + "sign-in")
    async def sign_in(request: Request) -> Response:
        if requests.tokens is None:
            return RedirectResponse(f"{prefix}job", status_code=303)
        form = await requests.form_of(request)
        principal = requests.tokens.authenticate(form.get("token", "").strip())
        if principal is None:
            logger.warning("console sign-in refused: unknown token")
            body = pages.sign_in_body(
                error="That token is not one the coordinator accepts.", prefix=prefix
            )
            return requests.html("Sign in", body, None, "sign-in", 401)
        cookie, _ = sessions.start(principal)
        logger.info("console sign-in", extra={"principal": principal.name})
        response = RedirectResponse(f"{prefix}job", status_code=303)
        return requests.with_cookie(response, request, cookie)

    @router.post(prefix + "sign-out")
    async def sign_out(request: Request) -> Response:
        submitted = await requests.submit(request, Scope.READ)
        if isinstance(submitted, Response):
            return submitted
        sessions.end(request.cookies.get(COOKIE))
        response = RedirectResponse(f"{prefix}sign-in", status_code=303)
        response.delete_cookie(COOKIE, path=prefix)
        return response

    return router

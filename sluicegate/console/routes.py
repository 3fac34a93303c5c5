"""The console's routes: server-rendered pages under the API's ``/console/``, with sessions.

::

    GET  /console/                     -> the Job page (303)
    GET  /console/sign-in              the sign-in form      POST: token -> session cookie
    POST /console/sign-out             ends the session
    GET  /console/job                  the Job page (read)
    GET  /console/checkpoints          the Checkpoints page (read)
    GET  /console/checkpoints/{id}     a completed checkpoint, per subtask (read)
    POST /console/savepoints           create a savepoint (operate)
    GET  /console/savepoints/stop[?name]   what a stop-with-savepoint does, to confirm (operate)
    POST /console/savepoints/stop      stop the job with a savepoint, confirmed (operate)
    GET  /console/approvals[?watch=1]  the Approvals inbox (read; forms with approve; watched:
                                       it reloads every WATCH_SECONDS)
    POST /console/approvals/{agent}/{run}   approve or reject, with a reason (approve)
    GET  /console/runs[?agent&status&hours&meta&offset]   runs, filtered here, paged (read)
    GET  /console/runs/{agent}/{run}   a run's timeline (read; with operate, fork or roll back)
    GET  /console/runs/{agent}/{run}/act?action&step   what a fork or rollback does (operate)
    POST /console/runs/{agent}/{run}/fork|rollback     fork or roll back, confirmed (operate)
    GET  /console/console.css          the stylesheet

Who may do what is the API's tokens and scopes (`coordinator.httpapi.auth`), checked on every
request against the session's principal. A state-changing request must (1) pass the
`BrowserGuard` (its ``Origin``, if any, is the console's own), (2) carry the session cookie
(HttpOnly, SameSite=Strict, Secure over TLS) and (3) carry the session's anti-forgery token in
its form; then (4) the principal must hold the scope, else 403. With the API's auth off (no
token configured, loopback only) a session is started without a sign-in, as
``unauthenticated``, and a request whose ``Host`` is not a loopback name is refused, so a
page of a rebound DNS name cannot reach the console either.

Every answer forbids scripts, frames and foreign forms (``Content-Security-Policy``) and
caching. Decisions reuse `AgentDesk.decide`: the checks and the write of the API's routes.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from typing import Annotated, Protocol
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from sluicegate.agents.exceptions import (
    DecisionRefusedError,
    EventsUnavailableError,
    ForkRefusedError,
    HistoryError,
    UnknownRunError,
)
from sluicegate.agents.runs.state import RunStatus
from sluicegate.console import checkpoint_pages, pages, run_actions
from sluicegate.console.inbox import AgentDesk
from sluicegate.console.markup import Safe, frame, join
from sluicegate.console.run_filter import RunFilter
from sluicegate.coordinator.facts import CoordinatorFacts
from sluicegate.coordinator.httpapi.auth import UNAUTHENTICATED, ApiTokens, Scope, is_loopback
from sluicegate.coordinator.httpapi.savepoints import SavepointView
from sluicegate.coordinator.httpapi.sessions import Session, Sessions
from sluicegate.coordinator.httpapi.view import CoordinatorView
from sluicegate.operators.exceptions import SluicegateError
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.savepoints.exceptions import SavepointRefusedError
from sluicegate.operators.storage import NotFoundError
from sluicegate.operators.storage.manifest import CheckpointManifest

__all__ = ["COOKIE", "PREFIX", "WATCH_SECONDS", "ConsoleJob", "ManifestReader", "console_router"]

logger = logging.getLogger(__name__)

PREFIX = "/console/"
COOKIE = "sluicegate_console"
_MAX_FORM_BYTES = 64 * 1024
_PAGE_SIZE = 50
WATCH_SECONDS = 15
"""How often the inbox reloads itself when watched (``?watch=1``): polling, without a script."""
_SAVEPOINT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # as POST /savepoints
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class ManifestReader(Protocol):
    """Reads a committed checkpoint's manifest (`ManifestStore` does)."""

    async def load(self, checkpoint_id: int) -> CheckpointManifest:
        """Raises `NotFoundError` when there is none (never completed, or retention removed
        it)."""
        ...


@dataclass(frozen=True, slots=True)
class ConsoleJob:
    """What the console reads of the coordinator: the API's views, its facts, its graph and
    its checkpoints' manifests."""

    view: CoordinatorView
    savepoints: SavepointView
    facts: Callable[[], CoordinatorFacts]
    graph: JobGraph
    manifests: ManifestReader


def console_router(
    job: ConsoleJob,
    desk: AgentDesk | None,
    *,
    tokens: ApiTokens | None,
    sessions: Sessions | None = None,
    clock: Callable[[], float] = time.time,
) -> APIRouter:
    """The console over ``job`` and ``desk`` (None: a pipeline without agents), signing in
    with ``tokens`` (None: the API's auth is off); see the module docstring."""
    router = APIRouter(include_in_schema=False)
    sessions = sessions or Sessions()
    messages: dict[str, str] = {}  # anti-forgery token -> what the session's last action did
    pages_ = [("job", "Job"), ("checkpoints", "Checkpoints"), ("approvals", "Approvals")]
    if desk is not None:
        pages_.append(("runs", "Runs"))
    stylesheet = files("sluicegate.console").joinpath("console.css").read_bytes()

    def html(
        title: str,
        body: Safe,
        session: Session | None,
        active: str,
        status: int = 200,
        refresh_seconds: int | None = None,
    ) -> HTMLResponse:
        who = None if session is None or tokens is None else session.principal.name
        csrf = None if session is None else session.csrf_token
        content = frame(
            title, body, active=active, prefix=PREFIX, who=who, csrf=csrf, pages=pages_,
            refresh_seconds=refresh_seconds,
        )  # fmt: skip
        return HTMLResponse(content, status_code=status, headers=_HEADERS)

    def refusal(status: int, title: str, message: str, session: Session | None) -> HTMLResponse:
        return html(title, pages.notice(message, error=True), session, "", status)

    def session_of(request: Request) -> tuple[Session | None, str | None]:
        """The request's session, and a new cookie to set when auth is off and it had none."""
        cookie = request.cookies.get(COOKIE)
        found = sessions.find(cookie)
        if found is not None or tokens is not None:
            return found, None
        new_cookie, started = sessions.start(UNAUTHENTICATED)
        return started, new_cookie

    def with_cookie(response: Response, request: Request, cookie: str | None) -> Response:
        if cookie is not None:
            response.set_cookie(
                COOKIE,
                cookie,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
                path=PREFIX,
            )
        return response

    def host_refused(request: Request) -> HTMLResponse | None:
        if tokens is None and not is_loopback(_host_name(request.headers.get("host") or "")):
            return refusal(
                403,
                "Refused",
                "With authentication off the console answers only to a loopback address "
                "(127.0.0.1, localhost). Configure API tokens to serve it on other names.",
                None,
            )
        return None

    async def page_session(request: Request) -> tuple[Session | None, Response | None, str | None]:
        """The session of a GET, or the answer instead of the page (refused, sign in)."""
        refused = host_refused(request)
        if refused is not None:
            return None, refused, None
        session, cookie = session_of(request)
        if session is None:
            return None, RedirectResponse(f"{PREFIX}sign-in", status_code=303), None
        return session, None, cookie

    async def form_of(request: Request) -> dict[str, str]:
        body = await request.body()
        if len(body) > _MAX_FORM_BYTES:
            return {}
        parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        return {key: values[0] for key, values in parsed.items()}

    async def posted(
        request: Request, scope: Scope
    ) -> tuple[Session | None, dict[str, str], Response | None]:
        """Steps 2-4 of the module docstring for a POST; the answer instead when refused."""
        refused = host_refused(request)
        if refused is not None:
            return None, {}, refused
        session = sessions.find(request.cookies.get(COOKIE))
        form = await form_of(request)
        if session is None:
            return None, form, refusal(401, "Signed out", "Sign in first.", None)
        if not sessions.check_form(session, form.get("csrf")):
            logger.warning("console form refused: no valid anti-forgery token")
            return (
                session,
                form,
                refusal(
                    403, "Refused", "This form did not come from your console session.", session
                ),
            )
        if scope not in session.principal.scopes:
            return (
                session,
                form,
                refusal(
                    403,
                    "Not allowed",
                    f"The token of {session.principal.name!r} lacks the scope {scope.value!r}.",
                    session,
                ),
            )
        return session, form, None

    def after(session: Session, path: str, message: str) -> Response:
        messages[session.csrf_token] = message
        return RedirectResponse(f"{PREFIX}{path}", status_code=303)

    def message_of(session: Session) -> str | None:
        return messages.pop(session.csrf_token, None)

    @router.get(PREFIX + "console.css")
    async def stylesheet_route() -> Response:
        return Response(stylesheet, media_type="text/css", headers={"Cache-Control": "max-age=300"})

    @router.get(PREFIX.rstrip("/"))
    @router.get(PREFIX)
    async def home() -> Response:
        return RedirectResponse(f"{PREFIX}job", status_code=303)

    @router.get(PREFIX + "sign-in")
    async def sign_in_form(request: Request) -> Response:
        if tokens is None:
            return RedirectResponse(f"{PREFIX}job", status_code=303)
        return html("Sign in", pages.sign_in_body(error=None, prefix=PREFIX), None, "sign-in")

    @router.post(PREFIX + "sign-in")
    async def sign_in(request: Request) -> Response:
        if tokens is None:
            return RedirectResponse(f"{PREFIX}job", status_code=303)
        form = await form_of(request)
        principal = tokens.authenticate(form.get("token", "").strip())
        if principal is None:
            logger.warning("console sign-in refused: unknown token")
            body = pages.sign_in_body(
                error="That token is not one the coordinator accepts.", prefix=PREFIX
            )
            return html("Sign in", body, None, "sign-in", 401)
        cookie, _ = sessions.start(principal)
        logger.info("console sign-in", extra={"principal": principal.name})
        response = RedirectResponse(f"{PREFIX}job", status_code=303)
        return with_cookie(response, request, cookie)

    @router.post(PREFIX + "sign-out")
    async def sign_out(request: Request) -> Response:
        _, _, refused = await posted(request, Scope.READ)
        if refused is not None:
            return refused
        sessions.end(request.cookies.get(COOKIE))
        response = RedirectResponse(f"{PREFIX}sign-in", status_code=303)
        response.delete_cookie(COOKIE, path=PREFIX)
        return response

    @router.get(PREFIX + "job")
    async def job_page(request: Request) -> Response:
        session, instead, cookie = await page_session(request)
        if instead is not None:
            return instead
        view = job.view
        body = pages.job_body(
            job.graph, view.status(), view.workers(), view.subtasks(), job.facts()
        )
        return with_cookie(html("Job", body, session, "job"), request, cookie)

    @router.get(PREFIX + "checkpoints")
    async def checkpoints_page(request: Request) -> Response:
        session, instead, cookie = await page_session(request)
        if instead is not None or session is None:
            return instead or RedirectResponse(f"{PREFIX}sign-in", status_code=303)
        checkpoints = sorted(await job.view.checkpoints(), key=lambda c: -c.checkpoint_id)
        savepoints = await job.savepoints.savepoints()
        body = pages.checkpoints_body(
            job.view.status(),
            checkpoints,
            savepoints,
            job.facts(),
            can_operate=Scope.OPERATE in session.principal.scopes,
            csrf=session.csrf_token,
            prefix=PREFIX,
            message=message_of(session),
        )
        return with_cookie(html("Checkpoints", body, session, "checkpoints"), request, cookie)

    @router.post(PREFIX + "savepoints")
    async def create_savepoint(request: Request) -> Response:
        session, form, refused = await posted(request, Scope.OPERATE)
        if refused is not None or session is None:
            return refused or refusal(401, "Signed out", "Sign in first.", None)
        name = form.get("name", "").strip() or None
        try:
            created = await job.savepoints.create_savepoint(name, stop=False)
        except SavepointRefusedError as exc:
            return after(session, "checkpoints", f"Savepoint refused: {exc}")
        logger.info(
            "savepoint requested in the console",
            extra={"savepoint": created.name, "principal": session.principal.name},
        )
        return after(
            session, "checkpoints", f"Savepoint {created.name} requested ({created.status})."
        )

    @router.get(PREFIX + "checkpoints/{checkpoint_id}")
    async def checkpoint_page(request: Request, checkpoint_id: int) -> Response:
        session, instead, cookie = await page_session(request)
        if instead is not None or session is None:
            return instead or RedirectResponse(f"{PREFIX}sign-in", status_code=303)
        title = f"Checkpoint {checkpoint_id}"
        try:
            manifest = await job.manifests.load(checkpoint_id)
        except NotFoundError:
            message = (
                f"Checkpoint {checkpoint_id} has no manifest: it did not complete, or "
                "retention has removed it."
            )
            return refusal(404, title, message, session)
        body = checkpoint_pages.checkpoint_body(manifest)
        return with_cookie(html(title, body, session, "checkpoints"), request, cookie)

    def savepoint_name(raw: str | None) -> tuple[str | None, bool]:
        """The name a form asked for (None: the default), and whether it is a valid one."""
        name = (raw or "").strip() or None
        return name, name is None or _SAVEPOINT_NAME.fullmatch(name) is not None

    @router.get(PREFIX + "savepoints/stop")
    async def stop_confirmation(request: Request, name: str | None = None) -> Response:
        session, instead, cookie = await page_session(request)
        if instead is not None or session is None:
            return instead or RedirectResponse(f"{PREFIX}sign-in", status_code=303)
        title = "Stop the job with a savepoint"
        if Scope.OPERATE not in session.principal.scopes:
            message = f"The token of {session.principal.name!r} lacks the scope 'operate'."
            return refusal(403, "Not allowed", message, session)
        wanted, valid = savepoint_name(name)
        if not valid:
            message = "A savepoint's name is letters, digits, dot, dash and underscore."
            return refusal(400, title, message, session)
        body = checkpoint_pages.stop_confirmation_body(
            job.view.status().pipeline, wanted, csrf=session.csrf_token, prefix=PREFIX
        )
        return with_cookie(html(title, body, session, "checkpoints"), request, cookie)

    @router.post(PREFIX + "savepoints/stop")
    async def stop_with_savepoint(request: Request) -> Response:
        session, form, refused = await posted(request, Scope.OPERATE)
        if refused is not None or session is None:
            return refused or refusal(401, "Signed out", "Sign in first.", None)
        wanted, valid = savepoint_name(form.get("name"))
        if form.get("confirm") != "stop" or not valid:
            message = "Nothing was stopped: confirm on the page that says what will happen."
            return refusal(400, "Not confirmed", message, session)
        try:
            created = await job.savepoints.create_savepoint(wanted, stop=True)
        except SavepointRefusedError as exc:
            return after(session, "checkpoints", f"Stop with savepoint refused: {exc}")
        logger.info(
            "stop with savepoint requested in the console",
            extra={"savepoint": created.name, "principal": session.principal.name},
        )
        message = f"Stopping the job with savepoint {created.name} ({created.status})."
        return after(session, "checkpoints", message)

    @router.get(PREFIX + "approvals")
    async def approvals_page(request: Request, watch: bool = False) -> Response:
        session, instead, cookie = await page_session(request)
        if instead is not None or session is None:
            return instead or RedirectResponse(f"{PREFIX}sign-in", status_code=303)
        error = None
        try:
            waiting = [] if desk is None else await desk.waiting()
        except EventsUnavailableError as exc:
            waiting, error = [], f"{exc.message}. {exc.what_to_do}"
        body = pages.approvals_body(
            waiting,
            clock(),
            can_approve=Scope.APPROVE in session.principal.scopes,
            csrf=session.csrf_token,
            prefix=PREFIX,
            message=message_of(session),
            error=error,
            watch_seconds=WATCH_SECONDS if watch else None,
        )
        refresh = WATCH_SECONDS if watch else None
        page = html("Approvals", body, session, "approvals", refresh_seconds=refresh)
        return with_cookie(page, request, cookie)

    @router.post(PREFIX + "approvals/{agent}/{run_id}")
    async def decide(request: Request, agent: str, run_id: str) -> Response:
        session, form, refused = await posted(request, Scope.APPROVE)
        if refused is not None or session is None:
            return refused or refusal(401, "Signed out", "Sign in first.", None)
        verdict = form.get("decision")
        if desk is None or agent not in desk.agents or verdict not in ("approve", "reject"):
            return refusal(404, "Not found", "No such agent or decision.", session)
        approved = verdict == "approve"
        reason = form.get("reason", "").strip()[:2000] or None
        by = session.principal.name
        try:
            await desk.decide(
                agent, run_id, call_id=form.get("call_id", ""), approved=approved, by=by,
                reason=reason,
            )  # fmt: skip
        except DecisionRefusedError as exc:
            return after(session, "approvals", f"Not decided: {exc.message}")
        except EventsUnavailableError as exc:
            return after(session, "approvals", f"Not decided: {exc.message}")
        logger.info(
            "decision taken in the console",
            extra={"agent": agent, "run_id": run_id, "approved": approved, "principal": by},
        )
        done = "approved" if approved else "rejected"
        return after(session, "approvals", f"Run {run_id}: {done} by {by}.")

    @router.get(PREFIX + "runs")
    async def runs_page(
        request: Request,
        agent: str | None = None,
        status: str | None = None,
        hours: str | None = None,
        meta: Annotated[str | None, Query(max_length=500)] = None,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    ) -> Response:
        session, instead, cookie = await page_session(request)
        if instead is not None or session is None:
            return instead or RedirectResponse(f"{PREFIX}sign-in", status_code=303)
        if desk is None or not desk.agents:
            return refusal(404, "Runs", "This pipeline has no agents.", session)
        chosen = agent if agent in desk.agents else desk.agents[0]
        statuses = [s.value for s in RunStatus]
        where, problems = RunFilter.parse(
            status=status, hours=hours, meta=meta, statuses=frozenset(statuses)
        )
        try:
            page = await desk.runs(
                chosen, where=where, now=clock(), offset=offset, limit=_PAGE_SIZE
            )
        except EventsUnavailableError as exc:
            return refusal(503, "Runs", f"{exc.message}. {exc.what_to_do}", session)
        body = pages.runs_body(
            desk.agents, chosen, where, page, _PAGE_SIZE, prefix=PREFIX, statuses=statuses,
            problems=problems,
        )  # fmt: skip
        return with_cookie(html("Runs", body, session, "runs"), request, cookie)

    @router.get(PREFIX + "runs/{agent}/{run_id}")
    async def run_page(request: Request, agent: str, run_id: str) -> Response:
        session, instead, cookie = await page_session(request)
        if instead is not None or session is None:
            return instead or RedirectResponse(f"{PREFIX}sign-in", status_code=303)
        if desk is None or agent not in desk.agents:
            return refusal(404, "Run", "No such agent.", session)
        try:
            events = await desk.timeline(agent, run_id)
        except UnknownRunError as exc:
            return refusal(404, "Run", exc.message, session)
        except (HistoryError, EventsUnavailableError, SluicegateError) as exc:
            return refusal(503, "Run", str(exc), session)
        body = pages.run_body(agent, run_id, events)
        parts = [notice_of(session), body]
        if Scope.OPERATE in session.principal.scopes:
            steps = run_actions.steps_of(events)
            parts.append(run_actions.actions_form(agent, run_id, steps, prefix=PREFIX))
        page = html(f"Run {run_id}", join(parts), session, "runs")
        return with_cookie(page, request, cookie)

    def notice_of(session: Session) -> Safe:
        return pages.notice(message_of(session))

    @router.get(PREFIX + "runs/{agent}/{run_id}/act")
    async def run_action_confirmation(
        request: Request,
        agent: str,
        run_id: str,
        action: str = "",
        step: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    ) -> Response:
        session, instead, cookie = await page_session(request)
        if instead is not None or session is None:
            return instead or RedirectResponse(f"{PREFIX}sign-in", status_code=303)
        if Scope.OPERATE not in session.principal.scopes:
            message = f"The token of {session.principal.name!r} lacks the scope 'operate'."
            return refusal(403, "Not allowed", message, session)
        if desk is None or agent not in desk.agents or action not in run_actions.ACTIONS:
            return refusal(404, "Not found", "No such agent or action.", session)
        title = f"{'Fork' if action == 'fork' else 'Roll back'} run {run_id} from step {step}"
        body = run_actions.confirmation_body(
            agent, run_id, action, step, csrf=session.csrf_token, prefix=PREFIX
        )
        return with_cookie(html(title, body, session, "runs"), request, cookie)

    @router.post(PREFIX + "runs/{agent}/{run_id}/{action}")
    async def run_action(request: Request, agent: str, run_id: str, action: str) -> Response:
        session, form, refused = await posted(request, Scope.OPERATE)
        if refused is not None or session is None:
            return refused or refusal(401, "Signed out", "Sign in first.", None)
        if desk is None or agent not in desk.agents or action not in run_actions.ACTIONS:
            return refusal(404, "Not found", "No such agent or action.", session)
        raw_step = form.get("step", "")
        if form.get("confirm") != "yes" or not raw_step.isdigit() or int(raw_step) > 1_000_000:
            message = "Nothing was done: confirm on the page that says what will happen."
            return refusal(400, "Not confirmed", message, session)
        step, by = int(raw_step), session.principal.name
        back = f"runs/{agent}/{run_id}"  # the fork's own page exists once the agent starts it
        try:
            if action == "fork":
                fork = await desk.fork(agent, run_id, from_step=step, by=by)
                done = f"Fork {fork.run_id} of run {run_id} after step {step} requested by {by}."
            else:
                reason = form.get("reason", "").strip()[:2000] or None
                await desk.rollback(agent, run_id, to_step=step, by=by, reason=reason)
                done = f"Rollback of run {run_id} to step {step} requested by {by}."
        except (DecisionRefusedError, ForkRefusedError, HistoryError) as exc:
            return after(session, f"runs/{agent}/{run_id}", f"Nothing done: {exc.message}")
        except EventsUnavailableError as exc:
            return after(session, f"runs/{agent}/{run_id}", f"Nothing done: {exc.message}")
        except ValueError as exc:  # a run id the command model refuses
            return refusal(400, "Refused", str(exc), session)
        logger.info(
            "run %s requested in the console", action,
            extra={"agent": agent, "run_id": run_id, "step": step, "principal": by},
        )  # fmt: skip
        return after(session, back, done)

    return router


def _host_name(host: str) -> str:
    """The name of a ``Host`` header without its port: ``[::1]:8470`` -> ``[::1]``."""
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0]

"""The console's Approvals inbox: every call waiting for a person, and their decision,
recorded under the signed-in name (`AgentDesk.decide`: the checks and the write of the API's
routes)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sluicegate.agents.exceptions import DecisionRefusedError, EventsUnavailableError
from sluicegate.console import pages
from sluicegate.console.inbox import AgentDesk
from sluicegate.console.routes.requests import ConsoleRequests
from sluicegate.coordinator.httpapi.auth import Scope

__all__ = ["WATCH_SECONDS", "approvals_router"]

logger = logging.getLogger(__name__)

WATCH_SECONDS = 15
"""How often the inbox reloads itself when watched (``?watch=1``): polling, without a script."""


def approvals_router(
    requests: ConsoleRequests, desk: AgentDesk | None, *, clock: Callable[[], float]
) -> APIRouter:
    """``approvals[?watch=1]`` (read) and ``POST approvals/{agent}/{run}`` (approve) under the
    prefix; ``desk`` None: a pipeline without agents (an empty inbox)."""
    router = APIRouter(include_in_schema=False)
    prefix = requests.prefix

    @router.get(prefix + "approvals")
    async def approvals_page(request: Request, watch: bool = False) -> Response:
        visit = await requests.visit(request)
        if isinstance(visit, Response):
            return visit
        session = visit.session
        error = None
        try:
            waiting = [] if desk is None else await desk.waiting()
        except EventsUnavailableError as exc:
            waiting, error = [], f"{exc.message}. {exc.what_to_do}"
        refresh = WATCH_SECONDS if watch else None
        body = pages.approvals_body(
            waiting,
            clock(),
            can_approve=Scope.APPROVE in session.principal.scopes,
            csrf=session.csrf_token,
            prefix=prefix,
            message=requests.message_of(session),
            error=error,
            watch_seconds=refresh,
        )
        return requests.page(
            request, visit, "Approvals", body, "approvals", refresh_seconds=refresh
        )

    @router.post(prefix + "approvals/{agent}/{run_id}")
    async def decide(request: Request, agent: str, run_id: str) -> Response:
        submitted = await requests.submit(request, Scope.APPROVE)
        if isinstance(submitted, Response):
            return submitted
        session, form = submitted.session, submitted.form
        verdict = form.get("decision")
        if desk is None or agent not in desk.agents or verdict not in ("approve", "reject"):
            return requests.refusal(404, "Not found", "No such agent or decision.", session)
        approved = verdict == "approve"
        reason = form.get("reason", "").strip()[:2000] or None
        by = session.principal.name
        try:
            await desk.decide(
                agent, run_id, call_id=form.get("call_id", ""), approved=approved, by=by,
                reason=reason,
            )  # fmt: skip
        except (DecisionRefusedError, EventsUnavailableError) as exc:
            return requests.after(session, "approvals", f"Not decided: {exc.message}")
        logger.info(
            "decision taken in the console",
            extra={"agent": agent, "run_id": run_id, "approved": approved, "principal": by},
        )
        done = "approved" if approved else "rejected"
        return requests.after(session, "approvals", f"Run {run_id}: {done} by {by}.")

    return router

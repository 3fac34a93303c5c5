"""The console's Runs pages: the runs of an agent, filtered and paged, a run's timeline, and
fork or rollback from a step behind a confirmation (`run_actions`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from sluicegate.agents.exceptions import (
    DecisionRefusedError,
    EventsUnavailableError,
    ForkRefusedError,
    HistoryError,
    UnknownRunError,
)
from sluicegate.agents.runs.state import RunStatus
from sluicegate.console import pages, run_actions
from sluicegate.console.inbox import AgentDesk
from sluicegate.console.markup import join
from sluicegate.console.routes.requests import ConsoleRequests
from sluicegate.console.run_filter import RunFilter
from sluicegate.coordinator.httpapi.auth import Scope
from sluicegate.operators.exceptions import SluicegateError

__all__ = ["PAGE_SIZE", "runs_router"]

logger = logging.getLogger(__name__)

PAGE_SIZE = 50
"""Runs per page of the Runs page."""


def runs_router(
    requests: ConsoleRequests, desk: AgentDesk | None, *, clock: Callable[[], float]
) -> APIRouter:
    """``runs``, ``runs/{agent}/{run}`` (read), ``runs/{agent}/{run}/act`` and ``POST
    runs/{agent}/{run}/fork|rollback`` (operate) under the prefix; ``desk`` None: a
    pipeline without agents (every page says so)."""
    router = APIRouter(include_in_schema=False)
    prefix = requests.prefix

    @router.get(prefix + "runs")
    async def runs_page(
        request: Request,
        agent: str | None = None,
        status: str | None = None,
        hours: str | None = None,
        meta: Annotated[str | None, Query(max_length=500)] = None,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    ) -> Response:
        visit = await requests.visit(request)
        if isinstance(visit, Response):
            return visit
        session = visit.session
        if desk is None or not desk.agents:
            return requests.refusal(404, "Runs", "This pipeline has no agents.", session)
        chosen = agent if agent in desk.agents else desk.agents[0]
        statuses = [s.value for s in RunStatus]
        where, problems = RunFilter.parse(
            status=status, hours=hours, meta=meta, statuses=frozenset(statuses)
        )
        try:
            page = await desk.runs(chosen, where=where, now=clock(), offset=offset, limit=PAGE_SIZE)
        except EventsUnavailableError as exc:
            return requests.refusal(503, "Runs", f"{exc.message}. {exc.what_to_do}", session)
        body = pages.runs_body(
            desk.agents, chosen, where, page, PAGE_SIZE, prefix=prefix, statuses=statuses,
            problems=problems,
        )  # fmt: skip
        return requests.page(request, visit, "Runs", body, "runs")

    @router.get(prefix + "runs/{agent}/{run_id}")
    async def run_page(request: Request, agent: str, run_id: str) -> Response:
        visit = await requests.visit(request)
        if isinstance(visit, Response):
            return visit
        session = visit.session
        if desk is None or agent not in desk.agents:
            return requests.refusal(404, "Run", "No such agent.", session)
        try:
            events = await desk.timeline(agent, run_id)
        except UnknownRunError as exc:
            return requests.refusal(404, "Run", exc.message, session)
        except (HistoryError, EventsUnavailableError, SluicegateError) as exc:
            return requests.refusal(503, "Run", str(exc), session)
        parts = [requests.notice_of(session), pages.run_body(agent, run_id, events)]
        if Scope.OPERATE in session.principal.scopes:
            steps = run_actions.steps_of(events)
            parts.append(run_actions.actions_form(agent, run_id, steps, prefix=prefix))
        return requests.page(request, visit, f"Run {run_id}", join(parts), "runs")

    @router.get(prefix + "runs/{agent}/{run_id}/act")
    async def run_action_confirmation(
        request: Request,
        agent: str,
        run_id: str,
        action: str = "",
        step: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    ) -> Response:
        visit = await requests.visit(request)
        if isinstance(visit, Response):
            return visit
        session = visit.session
        lacking = requests.lacks(session, Scope.OPERATE)
        if lacking is not None:
            return lacking
        if desk is None or agent not in desk.agents or action not in run_actions.ACTIONS:
            return requests.refusal(404, "Not found", "No such agent or action.", session)
        title = f"{'Fork' if action == 'fork' else 'Roll back'} run {run_id} from step {step}"
        body = run_actions.confirmation_body(
            agent, run_id, action, step, csrf=session.csrf_token, prefix=prefix
        )
        return requests.page(request, visit, title, body, "runs")

    @router.post(prefix + "runs/{agent}/{run_id}/{action}")
    async def run_action(request: Request, agent: str, run_id: str, action: str) -> Response:
        submitted = await requests.submit(request, Scope.OPERATE)
        if isinstance(submitted, Response):
            return submitted
        session, form = submitted.session, submitted.form
        if desk is None or agent not in desk.agents or action not in run_actions.ACTIONS:
            return requests.refusal(404, "Not found", "No such agent or action.", session)
        asked = run_actions.ActionForm.parse(action, form)
        if isinstance(asked, str):
            return requests.refusal(400, "Not done", asked, session)
        step, by = asked.step, session.principal.name
        back = f"runs/{agent}/{run_id}"  # the fork's own page exists once the agent starts it
        try:
            if action == "fork":
                fork = await desk.fork(
                    agent, run_id, from_step=step, by=by, patch=asked.patch,
                    recorded_only=asked.recorded_only,
                )  # fmt: skip
                how = "".join(
                    [f" ({fork.note})" if fork.note else "",
                     ", on recorded results only" if fork.recorded_only else ""]
                )  # fmt: skip
                done = (
                    f"Fork {fork.run_id} of run {run_id} after step {step}{how} requested by {by}."
                )
            else:
                await desk.rollback(
                    agent, run_id, to_step=step, by=by, reason=asked.reason, force=asked.force
                )
                forced = " (forced: not checked)" if asked.force else ""
                done = f"Rollback of run {run_id} to step {step}{forced} requested by {by}."
        except (DecisionRefusedError, ForkRefusedError, HistoryError) as exc:
            return requests.after(session, back, f"Nothing done: {exc.message}")
        except EventsUnavailableError as exc:
            return requests.after(session, back, f"Nothing done: {exc.message}")
        except ValueError as exc:  # a run id the command model refuses
            return requests.refusal(400, "Refused", str(exc), session)
        logger.info(
            "run %s requested in the console", action,
            extra={"agent": agent, "run_id": run_id, "step": step, "principal": by},
        )  # fmt: skip
        return requests.after(session, back, done)

    return router

"""The console's routes: server-rendered pages under the API's ``/console/``, with sessions.

::

    GET  /console/                     -> the Job page (303)                     sign_in
    GET  /console/sign-in              the sign-in form      POST: token -> session cookie
    POST /console/sign-out             ends the session
    GET  /console/console.css          the stylesheet
    GET  /console/job                  the Job page (read)                        job
    GET  /console/checkpoints          the Checkpoints page (read)                checkpoints
    GET  /console/checkpoints/{id}     a completed checkpoint, per subtask (read)
    POST /console/savepoints           create a savepoint (operate)
    GET  /console/savepoints/stop[?name]   what a stop-with-savepoint does, to confirm (operate)
    POST /console/savepoints/stop      stop the job with a savepoint, confirmed (operate)
    GET  /console/approvals[?watch=1]  the Approvals inbox (read; forms with      approvals
                                       approve; watched: it reloads every WATCH_SECONDS)
    POST /console/approvals/{agent}/{run}   approve or reject, with a reason (approve)
    GET  /console/runs[?agent&status&hours&meta&offset]   runs, filtered     runs
                                       here, paged (read)
    GET  /console/runs/{agent}/{run}   a run's timeline (read; with operate, fork or roll back)
    GET  /console/runs/{agent}/{run}/act?action&step   what a fork or rollback does (operate)
    POST /console/runs/{agent}/{run}/fork|rollback     fork or roll back, confirmed (operate)

One module per page (the right column); what they share, the session and the checks of a
state-changing request, is `requests.ConsoleRequests`. Who may do what is the API's tokens and
scopes (`coordinator.httpapi.auth`), checked on every request against the session's
principal.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import APIRouter

from sluicegate.console.inbox import AgentDesk
from sluicegate.console.job import ConsoleJob, ManifestReader
from sluicegate.console.routes.approvals import WATCH_SECONDS, approvals_router
from sluicegate.console.routes.checkpoints import checkpoints_router
from sluicegate.console.routes.job import job_router
from sluicegate.console.routes.requests import COOKIE, ConsoleRequests
from sluicegate.console.routes.runs import runs_router
from sluicegate.console.routes.sign_in import sign_in_router
from sluicegate.coordinator.httpapi.auth import ApiTokens
from sluicegate.coordinator.httpapi.sessions import Sessions

__all__ = ["COOKIE", "PREFIX", "WATCH_SECONDS", "ConsoleJob", "ManifestReader", "console_router"]

PREFIX = "/console/"


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
    pages = [("job", "Job"), ("checkpoints", "Checkpoints"), ("approvals", "Approvals")]
    if desk is not None:
        pages.append(("runs", "Runs"))
    requests = ConsoleRequests(
        prefix=PREFIX, tokens=tokens, sessions=sessions or Sessions(), pages=pages
    )
    router = APIRouter(include_in_schema=False)
    router.include_router(sign_in_router(requests))
    router.include_router(job_router(requests, job))
    router.include_router(checkpoints_router(requests, job))
    router.include_router(approvals_router(requests, desk, clock=clock))
    router.include_router(runs_router(requests, desk, clock=clock))
    return router

"""The console's Checkpoints page: the history, one checkpoint per subtask, and savepoints
(create, and stop-with-savepoint behind a confirmation)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sluicegate.console import checkpoint_pages, pages
from sluicegate.console.job import ConsoleJob
from sluicegate.console.routes.requests import ConsoleRequests
from sluicegate.coordinator.httpapi.auth import Scope
from sluicegate.coordinator.httpapi.sessions import Session
from sluicegate.operators.savepoints.exceptions import SavepointRefusedError
from sluicegate.operators.savepoints.manifest import is_savepoint_name
from sluicegate.operators.storage import NotFoundError

__all__ = ["checkpoints_router"]

logger = logging.getLogger(__name__)


def checkpoints_router(requests: ConsoleRequests, job: ConsoleJob) -> APIRouter:
    """``checkpoints``, ``checkpoints/{id}`` (read), ``POST savepoints`` and
    ``savepoints/stop`` (GET: the confirmation, POST: confirmed; operate) under the prefix."""
    router = APIRouter(include_in_schema=False)
    prefix = requests.prefix

    @router.get(prefix + "checkpoints")
    async def checkpoints_page(request: Request) -> Response:
        visit = await requests.visit(request)
        if isinstance(visit, Response):
            return visit
        session = visit.session
        checkpoints = sorted(await job.view.checkpoints(), key=lambda c: -c.checkpoint_id)
        savepoints = await job.savepoints.savepoints()
        body = pages.checkpoints_body(
            job.view.status(),
            checkpoints,
            savepoints,
            job.facts(),
            can_operate=Scope.OPERATE in session.principal.scopes,
            csrf=session.csrf_token,
            prefix=prefix,
            message=requests.message_of(session),
        )
        return requests.page(request, visit, "Checkpoints", body, "checkpoints")

    async def request_savepoint(session: Session, name: str | None, *, stop: bool) -> Response:
        """Ask the coordinator for a savepoint (and a stop), and say what happened."""
        what = "stop with savepoint" if stop else "savepoint"
        try:
            created = await job.savepoints.create_savepoint(name, stop=stop)
        except SavepointRefusedError as exc:
            return requests.after(session, "checkpoints", f"{what.capitalize()} refused: {exc}")
        logger.info(
            "%s requested in the console",
            what,
            extra={"savepoint": created.name, "principal": session.principal.name},
        )
        if stop:
            message = f"Stopping the job with savepoint {created.name} ({created.status})."
        else:
            message = f"Savepoint {created.name} requested ({created.status})."
        return requests.after(session, "checkpoints", message)

    @router.post(prefix + "savepoints")
    async def create_savepoint(request: Request) -> Response:
        submitted = await requests.submit(request, Scope.OPERATE)
        if isinstance(submitted, Response):
            return submitted
        session = submitted.session
        name = submitted.form.get("name", "").strip() or None
        return await request_savepoint(session, name, stop=False)

    @router.get(prefix + "checkpoints/{checkpoint_id}")
    async def checkpoint_page(request: Request, checkpoint_id: int) -> Response:
        visit = await requests.visit(request)
        if isinstance(visit, Response):
            return visit
        title = f"Checkpoint {checkpoint_id}"
        try:
            manifest = await job.manifests.load(checkpoint_id)
        except NotFoundError:
            message = (
                f"Checkpoint {checkpoint_id} has no manifest: it did not complete, or "
                "retention has removed it."
            )
            return requests.refusal(404, title, message, visit.session)
        body = checkpoint_pages.checkpoint_body(manifest)
        return requests.page(request, visit, title, body, "checkpoints")

    @router.get(prefix + "savepoints/stop")
    async def stop_confirmation(request: Request, name: str | None = None) -> Response:
        visit = await requests.visit(request)
        if isinstance(visit, Response):
            return visit
        session = visit.session
        title = "Stop the job with a savepoint"
        lacking = requests.lacks(session, Scope.OPERATE)
        if lacking is not None:
            return lacking
        wanted, valid = _savepoint_name(name)
        if not valid:
            message = "A savepoint's name is letters, digits, dot, dash and underscore."
            return requests.refusal(400, title, message, session)
        body = checkpoint_pages.stop_confirmation_body(
            job.view.status().pipeline, wanted, csrf=session.csrf_token, prefix=prefix
        )
        return requests.page(request, visit, title, body, "checkpoints")

    @router.post(prefix + "savepoints/stop")
    async def stop_with_savepoint(request: Request) -> Response:
        submitted = await requests.submit(request, Scope.OPERATE)
        if isinstance(submitted, Response):
            return submitted
        session, form = submitted.session, submitted.form
        wanted, valid = _savepoint_name(form.get("name"))
        if form.get("confirm") != "stop" or not valid:
            message = "Nothing was stopped: confirm on the page that says what will happen."
            return requests.refusal(400, "Not confirmed", message, session)
        return await request_savepoint(session, wanted, stop=True)

    return router


def _savepoint_name(raw: str | None) -> tuple[str | None, bool]:
    """The name a form asked for (None: the default), and whether it is a valid one (as
    ``POST /savepoints`` checks it)."""
    name = (raw or "").strip() or None
    return name, name is None or is_savepoint_name(name)

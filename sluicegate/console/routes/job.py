"""The console's Job page: the pipeline graph, where each subtask runs, worker health, the
counts the subtasks report, and incidents."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sluicegate.console import pages
from sluicegate.console.job import ConsoleJob
from sluicegate.console.routes.requests import ConsoleRequests

__all__ = ["job_router"]


def job_router(requests: ConsoleRequests, job: ConsoleJob) -> APIRouter:
    """``GET job`` under the prefix (read)."""
    router = APIRouter(include_in_schema=False)

    @router.get(requests.prefix + "job")
    async def job_page(request: Request) -> Response:
        visit = await requests.visit(request)
        if isinstance(visit, Response):
            return visit
        view = job.view
        body = pages.job_body(
            job.graph, view.status(), view.workers(), view.subtasks(), job.facts()
        )
        return requests.page(request, visit, "Job", body, "job")

    return router

"""HTTP route for a person's rollback of a run: undo the effects after a step.

Mounted by the coordinator's HTTP API (CLI wiring) for every agent of the pipeline::

    POST /agents/{agent}/runs/{run_id}/rollback   {"to_step": 2, "reason": "wrong order"}

Who asks is never taken from the body: the ``operator`` dependency the application passes (the
coordinator's bearer-token check with the ``operate`` scope) names them, and that name is the
command's ``by``. The route asks the agent's `RunDirectory` whether the run exists and is not
being rolled back already, then writes (`agents.client.request_rollback`, as the CLI and the
console do) a `RollbackRun` to the agent's approvals topic and
answers 202: the run applies it when it reads it (a command it cannot apply, such as a step
beyond the run's last, is dead-lettered with the reason). Errors are JSON ``{error, message,
what_to_do}``: 404 unknown agent or run, 409 a rollback under way, 503 the events topic
cannot be read. ``"force": true`` skips the check.
"""

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from sluicegate.agents.client import request_rollback
from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.exceptions import EventsUnavailableError, RollingBackError, UnknownRunError
from sluicegate.agents.messages import RollbackRun
from sluicegate.agents.routes.approvals import error_response
from sluicegate.agents.runs.directory import RunDirectory
from sluicegate.operators.kafka import KafkaLike

__all__ = ["RollbackAccepted", "RollbackBody", "rollback_router"]


class RollbackBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to_step: int = Field(ge=0, le=1_000_000, description="undo the effects of later steps")
    reason: str | None = Field(default=None, max_length=2000)
    force: bool = Field(default=False, description="write the command without checking the run")


class RollbackAccepted(BaseModel):
    agent: str
    run_id: str
    to_step: int
    by: str
    topic: str


def rollback_router(
    bootstrap: KafkaLike,
    agents: Mapping[str, AgentTopics],
    *,
    operator: Callable[..., Awaitable[str]],
) -> APIRouter:
    """The rollback route for ``agents``; ``operator`` is a FastAPI dependency answering who
    makes the request (the command's ``by``), refusing it by raising when they may not."""
    router = APIRouter(tags=["agents"])
    directories = {
        name: RunDirectory(bootstrap, name, topics.events) for name, topics in agents.items()
    }
    errors: dict[int | str, dict[str, object]] = {
        401: {"model": dict[str, str], "description": "no bearer token, or an unknown one"},
        403: {"model": dict[str, str], "description": "the token lacks the operate scope"},
        404: {"model": dict[str, str], "description": "no such agent, or no such run"},
        409: {"model": dict[str, str], "description": "the run is being rolled back already"},
        503: {"model": dict[str, str], "description": "the events topic cannot be read"},
    }

    @router.post(
        "/agents/{agent}/runs/{run_id}/rollback",
        status_code=202,
        response_model=RollbackAccepted,
        responses=errors,
        summary="Undo the effects of a run's steps after a step",
    )
    async def rollback(
        agent: str,
        run_id: str,
        body: RollbackBody,
        by: Annotated[str, Depends(operator)],
    ) -> RollbackAccepted | JSONResponse:
        topics = agents.get(agent)
        if topics is None:
            return error_response(
                404, "not_found", f"no agent {agent!r} in this pipeline",
                f"use one of {sorted(agents)}",
            )  # fmt: skip
        try:
            command = RollbackRun(run_id=run_id, to_step=body.to_step, by=by, reason=body.reason)
        except ValueError as exc:
            return error_response(422, "invalid_request", str(exc), "check the run id")
        try:
            await request_rollback(directories[agent], topics.approvals, command, force=body.force)
        except UnknownRunError as exc:
            return error_response(404, "unknown_run", exc.message, exc.what_to_do)
        except RollingBackError as exc:
            return error_response(409, "rolling_back", exc.message, exc.what_to_do)
        except EventsUnavailableError as exc:
            return error_response(503, "events_unavailable", exc.message, exc.what_to_do)
        return RollbackAccepted(
            agent=agent, run_id=run_id, to_step=body.to_step, by=by, topic=topics.approvals
        )

    return router

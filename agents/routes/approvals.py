"""HTTP routes for a person's decisions: approve or reject the call a run waits on.

Mounted by the coordinator's HTTP API (CLI wiring) for every agent of the pipeline::

    POST /agents/{agent}/runs/{run_id}/approve   {}
    POST /agents/{agent}/runs/{run_id}/reject    {"reason": "wrong amount"}

Who decides is never taken from the body: the ``decider`` dependency the application passes
(the coordinator's bearer-token check with the ``approve`` scope) names them, and that name is
the decision's ``by``.

Each first asks the agent's `RunDirectory` (its events topic, ``read_committed``) whether the
run exists and waits for approval, and refuses with a JSON error ``{error, message,
what_to_do}``: 404 for an unknown run (or agent), 409 for a run that is not waiting (or waits
on another call than ``call_id``), 503 when the events topic cannot be read. Otherwise it
writes an `ApprovalDecision` to the agent's approvals topic and answers 202: the run applies it
when it reads it. ``"force": true`` skips the check (for a run whose events outlived the
topic's retention); a decision the run cannot take is then dead-lettered or ignored by it.
"""

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from sluicegate.agents.client import send_decision
from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.exceptions import (
    DecisionRefusedError,
    EventsUnavailableError,
    RunNotWaitingError,
    UnknownRunError,
)
from sluicegate.agents.messages import ApprovalDecision
from sluicegate.agents.runs.directory import RunDirectory
from sluicegate.operators.kafka import KafkaLike

__all__ = ["DecisionAccepted", "DecisionBody", "approvals_router", "error_response"]


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=2000)
    call_id: str = Field(default="", description="the call decided on; empty: the pending one")
    force: bool = Field(
        default=False, description="write the decision without checking the run's status"
    )


class DecisionAccepted(BaseModel):
    agent: str
    run_id: str
    approved: bool
    topic: str


def approvals_router(
    bootstrap: KafkaLike,
    agents: Mapping[str, AgentTopics],
    *,
    decider: Callable[..., Awaitable[str]],
) -> APIRouter:
    """Routes writing decisions for ``agents`` to their approvals topics at ``bootstrap``.

    ``decider`` is a FastAPI dependency answering who makes the request (the decision's
    ``by``), refusing the request by raising when it may not decide.
    """
    router = APIRouter(tags=["agents"])
    directories = {
        name: RunDirectory(bootstrap, name, topics.events) for name, topics in agents.items()
    }
    errors: dict[int | str, dict[str, object]] = {
        401: {"model": dict[str, str], "description": "no bearer token, or an unknown one"},
        403: {"model": dict[str, str], "description": "the token lacks the approve scope"},
        404: {"model": dict[str, str], "description": "no such agent, or no such run"},
        409: {"model": dict[str, str], "description": "the run does not wait for approval"},
        503: {"model": dict[str, str], "description": "the events topic cannot be read"},
    }

    async def decide(
        agent: str, run_id: str, body: DecisionBody | None, approved: bool, by: str
    ) -> DecisionAccepted | JSONResponse:
        topics = agents.get(agent)
        if topics is None:
            return error_response(
                404, "not_found", f"no agent {agent!r} in this pipeline",
                f"use one of {sorted(agents)}",
            )  # fmt: skip
        body = body or DecisionBody()
        if not body.force:
            try:
                await directories[agent].check_decision(run_id, body.call_id)
            except DecisionRefusedError as exc:
                return _refused(exc)
            except EventsUnavailableError as exc:
                return error_response(503, "events_unavailable", exc.message, exc.what_to_do)
        decision = ApprovalDecision(
            run_id=run_id, approved=approved, call_id=body.call_id, by=by,
            reason=body.reason,
        )  # fmt: skip
        await send_decision(bootstrap, topics.approvals, decision)
        return DecisionAccepted(
            agent=agent, run_id=run_id, approved=approved, topic=topics.approvals
        )

    @router.post(
        "/agents/{agent}/runs/{run_id}/approve",
        status_code=202,
        response_model=DecisionAccepted,
        responses=errors,
        summary="Approve the call a run waits on",
    )
    async def approve(
        agent: str,
        run_id: str,
        by: Annotated[str, Depends(decider)],
        body: DecisionBody | None = None,
    ) -> DecisionAccepted | JSONResponse:
        return await decide(agent, run_id, body, True, by)

    @router.post(
        "/agents/{agent}/runs/{run_id}/reject",
        status_code=202,
        response_model=DecisionAccepted,
        responses=errors,
        summary="Reject the call a run waits on",
    )
    async def reject(
        agent: str,
        run_id: str,
        by: Annotated[str, Depends(decider)],
        body: DecisionBody | None = None,
    ) -> DecisionAccepted | JSONResponse:
        return await decide(agent, run_id, body, False, by)

    return router


def _refused(exc: DecisionRefusedError) -> JSONResponse:
    if isinstance(exc, UnknownRunError):
        return error_response(404, "unknown_run", exc.message, exc.what_to_do)
    assert isinstance(exc, RunNotWaitingError)
    return error_response(409, "not_waiting", exc.message, exc.what_to_do)


def error_response(status: int, error: str, message: str, what_to_do: str) -> JSONResponse:
    """The JSON error every agent route answers with: ``{error, message, what_to_do}``."""
    return JSONResponse(
        status_code=status,
        content={"error": error, "message": message, "what_to_do": what_to_do},
    )

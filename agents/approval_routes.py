"""HTTP routes for a person's decisions: approve or reject the call a run waits on.

Mounted by the coordinator's HTTP API (CLI wiring) for every agent of the pipeline::

    POST /agents/{agent}/runs/{run_id}/approve   {"by": "ann"}
    POST /agents/{agent}/runs/{run_id}/reject    {"by": "ann", "reason": "wrong amount"}

Each writes an `ApprovalDecision` to the agent's approvals topic and answers 202: the run
applies it when it reads it (a decision for a run that waits on nothing is ignored).
"""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from agents.agent import AgentTopics
from agents.client import send_decision
from agents.messages import ApprovalDecision

__all__ = ["DecisionAccepted", "DecisionBody", "approvals_router"]


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    by: str = Field(default="api", min_length=1, max_length=200, description="who decides")
    reason: str | None = Field(default=None, max_length=2000)
    call_id: str = Field(default="", description="the call decided on; empty: the pending one")


class DecisionAccepted(BaseModel):
    agent: str
    run_id: str
    approved: bool
    topic: str


def approvals_router(bootstrap: str, agents: Mapping[str, AgentTopics]) -> APIRouter:
    """Routes writing decisions for ``agents`` to their approvals topics at ``bootstrap``."""
    router = APIRouter(tags=["agents"])
    not_found = {"model": dict[str, str], "description": "no such agent"}

    async def decide(
        agent: str, run_id: str, body: DecisionBody, approved: bool
    ) -> DecisionAccepted | JSONResponse:
        topics = agents.get(agent)
        if topics is None:
            return JSONResponse(
                status_code=404,
                content={
                    "error": "not_found",
                    "message": f"no agent {agent!r} in this pipeline",
                    "what_to_do": f"use one of {sorted(agents)}",
                },
            )
        decision = ApprovalDecision(
            run_id=run_id, approved=approved, call_id=body.call_id, by=body.by,
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
        responses={404: not_found},
        summary="Approve the call a run waits on",
    )
    async def approve(
        agent: str, run_id: str, body: DecisionBody | None = None
    ) -> DecisionAccepted | JSONResponse:
        return await decide(agent, run_id, body or DecisionBody(), True)

    @router.post(
        "/agents/{agent}/runs/{run_id}/reject",
        status_code=202,
        response_model=DecisionAccepted,
        responses={404: not_found},
        summary="Reject the call a run waits on",
    )
    async def reject(
        agent: str, run_id: str, body: DecisionBody | None = None
    ) -> DecisionAccepted | JSONResponse:
        return await decide(agent, run_id, body or DecisionBody(), False)

    return router

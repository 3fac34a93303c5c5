"""HTTP routes for runs: list them, show one, read its history, fork it.

Mounted by the coordinator's HTTP API (CLI wiring) for every agent of the pipeline::

    GET  /agents/{agent}/runs[?status=S&limit=N]   the runs, most recently updated first (read)
    GET  /agents/{agent}/runs/{run_id}             the run's state, replayed from its events (read)
    GET  /agents/{agent}/runs/{run_id}/history     every event of the run (read)
    POST /agents/{agent}/runs/{run_id}/fork        a new run from its state after a step (operate)

Everything is read from the agent's events topic ``read_committed`` (`agents.history.events`); a
run's state is rebuilt by `agents.history.replay`, calling no model and no tool. A fork is written
as a `ForkRun` to the agent's approvals topic (`agents.client.request_fork`) and answered 202: the
agent starts it when it reads it. Who forks is the bearer token's name, never the body's.

Refusals are JSON ``{error, message, what_to_do}``: 404 no such agent or run, 409 a history that
does not replay or a step the run never settled at, 503 the events topic cannot be read.
"""

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from sluicegate.agents.client import request_fork
from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.exceptions import (
    EventsUnavailableError,
    ForkRefusedError,
    HistoryError,
    UnknownRunError,
)
from sluicegate.agents.fork.patch import ForkPatch
from sluicegate.agents.history.events import RunHistory
from sluicegate.agents.history.replay import replay
from sluicegate.agents.routes.approvals import error_response
from sluicegate.agents.runs.state import RunState, RunStatus
from sluicegate.operators.kafka import KafkaLike

__all__ = ["ForkAccepted", "ForkBody", "RunListItem", "runs_router"]


class RunListItem(BaseModel):
    run_id: str
    status: str
    step: int
    events: int
    started_at: float | None
    updated_at: float | None
    goal: str | None
    forked_from: dict[str, Any] | None
    cost_usd: float


class ForkBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    from_step: int = Field(ge=0, le=100_000, description="fork after this step")
    patch: ForkPatch | None = Field(default=None, description="the one change")
    recorded_only: bool = Field(
        default=False, description="execute no tool with an effect (recorded results only)"
    )
    run_id: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$",
        description="the fork's run id (default: <run>.fork-<random>)",
    )  # fmt: skip


class ForkAccepted(BaseModel):
    agent: str
    run_id: str
    parent_run_id: str
    from_step: int
    recorded_only: bool
    topic: str


def runs_router(
    bootstrap: KafkaLike,
    agents: Mapping[str, AgentTopics],
    *,
    reader: Callable[..., Awaitable[Any]],
    operator: Callable[..., Awaitable[str]],
) -> APIRouter:
    """Routes over the runs of ``agents``. ``reader`` is a FastAPI dependency refusing a
    request without the read scope; ``operator`` answers who forks (the operate scope)."""
    router = APIRouter(tags=["agents"])
    histories = {
        name: RunHistory(bootstrap, name, topics.events) for name, topics in agents.items()
    }
    errors: dict[int | str, dict[str, Any]] = {
        400: {"model": dict[str, str], "description": "a body that does not parse"},
        401: {"model": dict[str, str], "description": "no bearer token, or an unknown one"},
        403: {"model": dict[str, str], "description": "the token lacks the scope"},
        404: {"model": dict[str, str], "description": "no such agent, or no such run"},
        409: {
            "model": dict[str, str],
            "description": "the history does not replay, or the "
            "run cannot be forked from that step",
        },
        503: {"model": dict[str, str], "description": "the events topic cannot be read"},
    }
    read = [Depends(reader)]

    def history_of(agent: str) -> RunHistory | JSONResponse:
        history = histories.get(agent)
        if history is None:
            return error_response(404, "not_found", f"no agent {agent!r} in this pipeline",
                          f"use one of {sorted(agents)}")  # fmt: skip
        return history

    @router.get("/agents/{agent}/runs", dependencies=read, response_model=list[RunListItem],
                responses=errors, summary="An agent's runs, newest first")  # fmt: skip
    async def list_runs(
        agent: str,
        status: RunStatus | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    ) -> list[RunListItem] | JSONResponse:
        history = history_of(agent)
        if isinstance(history, JSONResponse):
            return history
        try:
            runs = await history.runs(limit=100_000)
        except EventsUnavailableError as exc:
            return error_response(503, "events_unavailable", exc.message, exc.what_to_do)
        chosen = [r for r in runs if status is None or r.status == status.value][:limit]
        return [RunListItem.model_validate(r.to_json()) for r in chosen]

    async def events_of(agent: str, run_id: str) -> list[dict[str, Any]] | JSONResponse:
        history = history_of(agent)
        if isinstance(history, JSONResponse):
            return history
        try:
            return await history.events(run_id)
        except UnknownRunError as exc:
            return error_response(404, "unknown_run", exc.message, exc.what_to_do)
        except HistoryError as exc:
            return error_response(409, "history_unreplayable", exc.message, exc.what_to_do)
        except EventsUnavailableError as exc:
            return error_response(503, "events_unavailable", exc.message, exc.what_to_do)

    @router.get("/agents/{agent}/runs/{run_id}", dependencies=read, response_model=RunState,
                responses=errors, summary="A run's state, replayed from its events")  # fmt: skip
    async def show_run(agent: str, run_id: str) -> RunState | JSONResponse:
        events = await events_of(agent, run_id)
        if isinstance(events, JSONResponse):
            return events
        try:
            return replay(events)[-1].state
        except HistoryError as exc:
            return error_response(409, "history_unreplayable", exc.message, exc.what_to_do)

    @router.get("/agents/{agent}/runs/{run_id}/history", dependencies=read,
                response_model=list[dict[str, Any]], responses=errors,
                summary="Every event of a run, in order")  # fmt: skip
    async def run_history(agent: str, run_id: str) -> list[dict[str, Any]] | JSONResponse:
        return await events_of(agent, run_id)

    @router.post("/agents/{agent}/runs/{run_id}/fork", status_code=202,
                 response_model=ForkAccepted, responses=errors,
                 summary="Start a new run from a run's state after a step")  # fmt: skip
    async def fork_run(
        agent: str, run_id: str, body: ForkBody, by: Annotated[str, Depends(operator)]
    ) -> ForkAccepted | JSONResponse:
        history = history_of(agent)
        if isinstance(history, JSONResponse):
            return history
        approvals = agents[agent].approvals
        try:
            fork = await request_fork(
                history, approvals, run_id, body.from_step, patch=body.patch,
                recorded_only=body.recorded_only, run_id=body.run_id, by=by,
            )  # fmt: skip
        except UnknownRunError as exc:
            return error_response(404, "unknown_run", exc.message, exc.what_to_do)
        except (HistoryError, ForkRefusedError) as exc:
            return error_response(409, "fork_refused", exc.message, exc.what_to_do)
        except EventsUnavailableError as exc:
            return error_response(503, "events_unavailable", exc.message, exc.what_to_do)
        return ForkAccepted(
            agent=agent, run_id=fork.run_id, parent_run_id=run_id, from_step=body.from_step,
            recorded_only=body.recorded_only, topic=approvals,
        )  # fmt: skip

    return router

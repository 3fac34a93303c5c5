"""The coordinator's whole HTTP API: the core routes, savepoints, the agents' routes and the
web console, over one `Coordinator` (what ``sluicegate coordinator`` serves)."""

from __future__ import annotations

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from sluicegate.agents.agent import agents_in
from sluicegate.agents.routes.approvals import approvals_router
from sluicegate.agents.routes.rollback import rollback_router
from sluicegate.agents.routes.runs import runs_router
from sluicegate.console import PREFIX, AgentDesk, ConsoleJob, console_router
from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.auth import ApiTokens, Scope, identity, requirement
from sluicegate.coordinator.httpapi.savepoints import savepoints_router
from sluicegate.coordinator.savepoints.view import CoordinatorSavepoints
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.storage.manifest import ManifestStore

__all__ = ["coordinator_app"]


def coordinator_app(
    service: Coordinator, registry: CollectorRegistry, tokens: ApiTokens | None
) -> FastAPI:
    """The API of ``service``; ``tokens`` None: no authentication (loopback only)."""
    status, savepoints = CoordinatorStatus(service), CoordinatorSavepoints(service)
    app = create_app(status, registry, tokens=tokens, console_prefix=PREFIX)
    app.include_router(savepoints_router(savepoints, tokens=tokens))
    agents = agents_in(service.graph)
    if agents:  # POST /agents/{agent}/runs/{run_id}/approve|reject|rollback, history, forks
        decider = identity(tokens, Scope.APPROVE)
        operator = identity(tokens, Scope.OPERATE)
        app.include_router(approvals_router(service.kafka, agents, decider=decider))
        app.include_router(
            runs_router(
                service.kafka, agents, reader=requirement(tokens, Scope.READ), operator=operator
            )
        )
        app.include_router(rollback_router(service.kafka, agents, operator=operator))
    manifests = ManifestStore(service.storage)
    job = ConsoleJob(status, savepoints, service.facts, service.graph, manifests)
    desk = AgentDesk(service.kafka, agents) if agents else None
    app.include_router(console_router(job, desk, tokens=tokens))
    return app

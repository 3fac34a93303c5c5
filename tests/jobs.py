"""A job of one worker and one coordinator with its HTTP API (savepoint routes included), all in
the test's event loop: what the savepoint tests start, stop and start again with new code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.savepoints import savepoints_router
from sluicegate.coordinator.httpapi.server import serve
from sluicegate.coordinator.savepoints.view import CoordinatorSavepoints
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.coordinator.status import CoordinatorStatus
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.runtime.subtask import SubtaskSettings
from sluicegate.operators.runtime.worker import Worker
from sluicegate.operators.runtime.worker_settings import WorkerSettings
from sluicegate.operators.storage import Storage


@dataclass
class Job:
    coordinator: Coordinator
    task: asyncio.Task[None]
    url: str


@asynccontextmanager
async def running(
    graph: JobGraph,
    storage: Storage,
    bootstrap: str,
    work_dir: Path,
    subtask_settings: SubtaskSettings | None = None,
    **options: object,
) -> AsyncIterator[Job]:
    """A worker, a coordinator and its HTTP API (with the savepoint routes) in this loop."""
    settings = CoordinatorSettings(interval_seconds=0.5, heartbeat_timeout_seconds=5, **options)  # type: ignore[arg-type]
    worker_settings = WorkerSettings(
        worker_id="w1", slots=6, state_dir=work_dir, heartbeat_seconds=0.3
    )
    worker = Worker(graph, worker_settings, bootstrap=bootstrap, storage=storage,
                    subtask_settings=subtask_settings)  # fmt: skip
    coordinator = Coordinator(graph, bootstrap=bootstrap, storage=storage, settings=settings)
    app = create_app(CoordinatorStatus(coordinator), CollectorRegistry())
    app.include_router(savepoints_router(CoordinatorSavepoints(coordinator)))
    api = await serve(app, "127.0.0.1", 0)
    worker_task = asyncio.create_task(worker.run())
    task = asyncio.create_task(coordinator.run())
    try:
        yield Job(coordinator, task, api.url)
    finally:
        if not task.done():
            coordinator.request_stop(final_checkpoint=False)
            await asyncio.wait({task}, timeout=30)
        for t in (task, worker_task):
            t.cancel()
        await asyncio.gather(task, worker_task, return_exceptions=True)
        await api.stop()

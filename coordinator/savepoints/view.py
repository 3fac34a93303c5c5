"""The savepoints of a running `Coordinator` as its HTTP API sees them (`SavepointView`)."""

from __future__ import annotations

from sluicegate.coordinator.httpapi.savepoint_models import SavepointInfo
from sluicegate.coordinator.savepoints.requests import SavepointRequest
from sluicegate.coordinator.service import Coordinator
from sluicegate.operators.savepoints.exceptions import SavepointNotFoundError, SavepointRefusedError
from sluicegate.operators.savepoints.store import SavepointStore, StoredSavepoint

__all__ = ["CoordinatorSavepoints", "request_info", "stored_info"]


def stored_info(stored: StoredSavepoint) -> SavepointInfo:
    m = stored.manifest
    if m is None:
        return SavepointInfo(name=stored.name, status="incomplete", error=stored.problem)
    return SavepointInfo(
        name=m.name,
        status="stored",
        pipeline=m.pipeline,
        checkpoint_id=m.from_checkpoint,
        created_at=m.created_at,
        size_bytes=m.size_bytes,
        rows=m.rows,
        state_versions={uid: s.state_schema_version for uid, s in m.operators.items()},
    )


def request_info(request: SavepointRequest) -> SavepointInfo:
    return SavepointInfo(
        name=request.name,
        status=request.phase.value,
        stop=request.stop,
        checkpoint_id=request.checkpoint_id,
        created_at=request.requested_at,
        size_bytes=request.progress.bytes,
        rows=request.progress.rows,
        partitions_done=request.progress.partitions_done,
        partitions_total=request.progress.partitions_total,
        error=request.error,
    )


class CoordinatorSavepoints:
    """Reads and drives a `Coordinator`'s savepoints; runs on the coordinator's event loop."""

    def __init__(self, coordinator: Coordinator) -> None:
        self._c = coordinator
        self._store = SavepointStore(coordinator.storage)

    async def savepoints(self) -> list[SavepointInfo]:
        stored = [stored_info(s) for s in await self._store.list()]
        names = {s.name for s in stored if s.status == "stored"}
        return stored + [
            request_info(r)
            for r in self._c.facts().savepoint_requests
            if not (r.name in names and r.done and not r.error)
        ]

    async def savepoint(self, name: str) -> SavepointInfo:
        for request in reversed(self._c.facts().savepoint_requests):
            if request.name == name and not (request.done and not request.error):
                return request_info(request)
        for stored in await self._store.list():
            if stored.name == name:
                return stored_info(stored)
        raise SavepointNotFoundError(name)

    async def create_savepoint(self, name: str | None, *, stop: bool) -> SavepointInfo:
        return request_info(await self._c.request_savepoint(name, stop=stop))

    async def trigger_full_checkpoint(self) -> int:
        checkpoint_id = await self._c.trigger_checkpoint(full=True)
        if checkpoint_id is None:
            raise SavepointRefusedError(
                "a checkpoint is in flight, or the job is not running",
                "Try again in a moment; GET /checkpoints shows the checkpoint in flight",
            )
        return checkpoint_id

    async def delete_savepoint(self, name: str) -> int:
        if any(r.name == name and not r.done for r in self._c.facts().savepoint_requests):
            raise SavepointRefusedError(
                f"savepoint {name} is being written", "Wait until it is done, then delete it"
            )
        return await self._store.delete(name)

"""The coordinator's savepoints: the requests of this process, and the tasks writing them.

`SavepointDriver` is what `Coordinator` holds; the coordinator tells it what happened to
checkpoints (triggered, completed, aborted, abandoned by a recovery, the job stopped) and asks
it which checkpoint to trigger for a request and which checkpoints retention must keep. The
decisions are `coordinator.savepoints.requests`; this adds the writing tasks.
"""

from __future__ import annotations

import asyncio
import logging
import time

from sluicegate.coordinator.savepoints.requests import SavepointPhase, SavepointRequest
from sluicegate.coordinator.savepoints.writing import default_name, write_from_checkpoint
from sluicegate.operators.savepoints.exceptions import SavepointError, SavepointRefusedError
from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.storage import InvalidPathError, Storage, StorageError
from sluicegate.operators.storage.layout import savepoint_prefix
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

__all__ = ["SavepointDriver"]

logger = logging.getLogger(__name__)

_KEPT = 10


class SavepointDriver:
    """Savepoint requests of one coordinator process; see the module docstring."""

    def __init__(self, storage: Storage, pipeline: str) -> None:
        self._storage = storage
        self._pipeline = pipeline
        self.requests: list[SavepointRequest] = []
        """The latest requests, oldest first."""
        self._writing: set[asyncio.Task[None]] = set()
        self.outcomes: dict[str, int] = {"completed": 0, "failed": 0}
        """Requests of this process by how they ended (the metrics' counter)."""
        self.last_written: tuple[float, int] | None = None
        """Seconds from request to written, and size in bytes, of the latest savepoint."""
        self._counted: set[int] = set()

    async def request(
        self, name: str | None, *, stop: bool, refusal: str | None
    ) -> SavepointRequest:
        """A new request; ``refusal``: why the job cannot take one now (None: it can).
        Raises `SavepointRefusedError` saying why not."""
        self._count()
        name = name or default_name(self._pipeline)
        try:
            savepoint_prefix(name)
        except InvalidPathError as exc:
            raise SavepointRefusedError(
                str(exc), "Choose a name of letters, digits, . _ -"
            ) from exc
        if under_way := [r.name for r in self.requests if not r.done]:
            raise SavepointRefusedError(
                f"savepoint {under_way[0]} is under way", "Wait until it is done, then ask again"
            )
        if refusal is not None:
            raise SavepointRefusedError(
                refusal, "Start the job first: a started coordinator resumes from its last "
                "checkpoint",
            )  # fmt: skip
        if await self._storage.exists(SavepointStore.manifest_path(name)):
            raise SavepointRefusedError(
                f"a savepoint named {name!r} exists already",
                "Choose another name, or delete it first (`sluicegate savepoint delete`)",
            )
        request = SavepointRequest(name, stop, time.time())
        self.requests = [*self.requests[-(_KEPT - 1) :], request]
        logger.info("pipeline %s: savepoint %s requested (stop: %s)", self._pipeline, name, stop)
        return request

    def wants_checkpoint(self) -> SavepointRequest | None:
        """A request waiting for a checkpoint to be triggered for it."""
        return next(
            (r for r in self.requests if r.phase is SavepointPhase.WAITING and not r.stop), None
        )

    def pinned(self) -> tuple[int, ...]:
        """Checkpoints being written as savepoints: retention keeps them."""
        return tuple(n for r in self.requests if (n := r.pinned) is not None)

    def on_completed(self, manifest: CheckpointManifest) -> None:
        """Checkpoint ``manifest`` completed: start writing the requests waiting for it."""
        for request in self.requests:
            if request.checkpoint_completed(manifest.checkpoint_id):
                task = asyncio.create_task(self._write(request, manifest))
                self._writing.add(task)
                task.add_done_callback(self._writing.discard)

    def on_aborted(self, checkpoint_id: int, reason: str) -> None:
        for request in self.requests:
            request.checkpoint_aborted(checkpoint_id, reason, time.time())
        self._count()

    def on_recovery(self) -> None:
        for request in self.requests:
            request.checkpoint_abandoned()

    async def on_stopped(self, manifests: ManifestStore, final: int | None) -> None:
        """Stop-with-savepoint: every subtask stopped, sinks published. Let the writes under
        way finish, then write a stop's savepoint from the final checkpoint (the newest
        completed one, when it aborted)."""
        if self._writing:
            await asyncio.wait(set(self._writing))
        for request in self.requests:
            if not request.stop or request.done:
                continue
            try:
                manifest = await (
                    manifests.load(final) if final is not None else manifests.latest()
                )
            except StorageError as exc:
                request.failed(f"checkpoint storage failed: {exc}", time.time())
                continue
            checkpoint = manifest.checkpoint_id if manifest is not None else None
            if request.stopped(checkpoint, time.time()) and manifest is not None:
                await self._write(request, manifest)
        self._count()

    def cancel(self) -> None:
        for task in self._writing:
            task.cancel()

    def _count(self) -> None:
        for request in self.requests:
            if request.done and id(request) not in self._counted:
                self._counted.add(id(request))
                self.outcomes[request.phase.value] += 1

    async def _write(self, request: SavepointRequest, manifest: CheckpointManifest) -> None:
        try:
            written = await write_from_checkpoint(self._storage, manifest, request)
        except (SavepointError, StorageError) as exc:
            logger.error("savepoint %s failed: %s", request.name, exc)
            request.failed(str(exc), time.time())
        except Exception as exc:  # a failed savepoint never ends the job
            logger.exception("savepoint %s failed", request.name)
            request.failed(f"{type(exc).__name__}: {exc}", time.time())
        else:
            request.written(time.time())
            self.last_written = (time.time() - request.requested_at, written.size_bytes)
            logger.info(
                "savepoint %s written from checkpoint %s", request.name, manifest.checkpoint_id
            )
        self._count()

"""The coordinator's savepoints: the requests of this process, and the tasks writing them.

`SavepointDriver` is what `Coordinator` holds; the coordinator tells it what happened to
checkpoints (triggered, completed, aborted, abandoned by a recovery, the job stopped) and asks
it which checkpoint to trigger for a request and which checkpoints retention must keep. The
decisions are the sans-IO `coordinator.savepoints.phase.Savepointing`; this performs the
`WriteSavepoint` actions it answers, as tasks beside the job, and the storage reads they need.
"""

from __future__ import annotations

import asyncio
import logging
import time

from sluicegate.coordinator.savepoints.phase import Savepointing, WriteSavepoint
from sluicegate.coordinator.savepoints.requests import SavepointRequest
from sluicegate.coordinator.savepoints.writing import default_name, write_from_checkpoint
from sluicegate.operators.savepoints.exceptions import SavepointError, SavepointRefusedError
from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.storage import InvalidPathError, Storage, StorageError
from sluicegate.operators.storage.layout import savepoint_prefix
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

__all__ = ["SavepointDriver"]

logger = logging.getLogger(__name__)


class SavepointDriver:
    """Savepoint requests of one coordinator process; see the module docstring."""

    def __init__(self, storage: Storage, pipeline: str) -> None:
        self._storage = storage
        self._pipeline = pipeline
        self._phase = Savepointing()
        self._writing: set[asyncio.Task[None]] = set()

    @property
    def requests(self) -> tuple[SavepointRequest, ...]:
        """The latest requests, oldest first."""
        return tuple(self._phase.requests)

    @property
    def outcomes(self) -> dict[str, int]:
        """Requests of this process by how they ended (the metrics' counter)."""
        return dict(self._phase.outcomes)

    @property
    def last_written(self) -> tuple[float, int] | None:
        """Seconds from request to written, and size in bytes, of the latest savepoint."""
        return self._phase.last_written

    async def request(
        self, name: str | None, *, stop: bool, refusal: str | None
    ) -> SavepointRequest:
        """A new request; ``refusal``: why the job cannot take one now (None: it can).
        Raises `SavepointRefusedError` saying why not."""
        name = name or default_name(self._pipeline)
        try:
            savepoint_prefix(name)
        except InvalidPathError as exc:
            raise SavepointRefusedError(
                str(exc), "Choose a name of letters, digits, . _ -"
            ) from exc
        self._phase.refuse(refusal)
        if await self._storage.exists(SavepointStore.manifest_path(name)):
            raise SavepointRefusedError(
                f"a savepoint named {name!r} exists already",
                "Choose another name, or delete it first (`sluicegate savepoint delete`)",
            )
        request = self._phase.request(name, stop=stop, at=time.time())
        logger.info("pipeline %s: savepoint %s requested (stop: %s)", self._pipeline, name, stop)
        return request

    def wants_checkpoint(self) -> bool:
        """A request waits for a checkpoint to be triggered for it."""
        return self._phase.waiting() is not None

    def triggered(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` was triggered for the waiting request."""
        self._phase.triggered(checkpoint_id)

    def pinned(self) -> tuple[int, ...]:
        """Checkpoints being written as savepoints: retention keeps them."""
        return self._phase.pinned()

    def on_completed(self, manifest: CheckpointManifest) -> None:
        """Checkpoint ``manifest`` completed: start writing the requests waiting for it."""
        for write in self._phase.on_completed(manifest):
            task = asyncio.create_task(self._write(write))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)

    def on_aborted(self, checkpoint_id: int, reason: str) -> None:
        self._phase.on_aborted(checkpoint_id, reason, time.time())

    def on_recovery(self) -> None:
        self._phase.on_recovery()

    async def on_stopped(self, manifests: ManifestStore, final: int | None) -> None:
        """Stop-with-savepoint: every subtask stopped, sinks published. Let the writes under
        way finish, then write a stop's savepoint from the final checkpoint (the newest
        completed one, when it aborted)."""
        if self._writing:
            await asyncio.wait(set(self._writing))
        for request in self._phase.stop_requests():
            try:
                manifest = await (
                    manifests.load(final) if final is not None else manifests.latest()
                )
            except StorageError as exc:
                self._phase.failed(request, f"checkpoint storage failed: {exc}", time.time())
                continue
            for write in self._phase.on_stopped(request, manifest, time.time()):
                await self._write(write)

    def cancel(self) -> None:
        for task in self._writing:
            task.cancel()

    async def _write(self, write: WriteSavepoint) -> None:
        request, manifest = write.request, write.manifest
        try:
            written = await write_from_checkpoint(self._storage, manifest, request)
        except (SavepointError, StorageError) as exc:
            logger.error("savepoint %s failed: %s", request.name, exc)
            self._phase.failed(request, str(exc), time.time())
        except Exception as exc:  # a failed savepoint never ends the job
            logger.exception("savepoint %s failed", request.name)
            self._phase.failed(request, f"{type(exc).__name__}: {exc}", time.time())
        else:
            self._phase.written(request, written.size_bytes, time.time())
            logger.info(
                "savepoint %s written from checkpoint %s", request.name, manifest.checkpoint_id
            )

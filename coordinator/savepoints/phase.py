"""The savepointing phase of a coordinator, sans-IO: its requests and what to write when.

`Savepointing` holds the latest requests of one coordinator process (each a
`coordinator.savepoints.requests.SavepointRequest`) and is told what happened to checkpoints;
it answers `WriteSavepoint` when a savepoint can be written, which the driver
(`coordinator.savepoints.driver.SavepointDriver`) performs beside the job. The decisions::

    observed                                   answer, or change
    -----------------------------------------  ------------------------------------------
    request(name, stop)                         a new request, or SavepointRefusedError
                                                (bad name, one under way, job not running)
    waiting()                                   the request a checkpoint is to be
                                                triggered for (not a stop's), if any
    triggered(n)                                that request waits for checkpoint n
    on_completed(manifest of n)                 WriteSavepoint for each request of n
    on_aborted(n, reason)                       the requests of n fail
    on_recovery()                               the requests of the abandoned checkpoint
                                                wait for another one
    stop_requests()                             a stop's requests, to write once the job
                                                stopped (after the writes under way)
    on_stopped(request, final manifest)         WriteSavepoint, or the request fails
    written(request, size) / failed(request)    the request completes / fails

Retention keeps the checkpoints being written (`pinned`); every request that ends is counted
once in `outcomes` (the metrics' counter).
"""

from __future__ import annotations

from dataclasses import dataclass

from sluicegate.coordinator.savepoints.requests import SavepointPhase, SavepointRequest
from sluicegate.operators.savepoints.exceptions import SavepointRefusedError
from sluicegate.operators.storage.manifest import CheckpointManifest

__all__ = ["Savepointing", "WriteSavepoint"]

_KEPT = 10


@dataclass(frozen=True, slots=True)
class WriteSavepoint:
    """Write ``request``'s savepoint from the checkpoint of ``manifest``."""

    request: SavepointRequest
    manifest: CheckpointManifest


class Savepointing:
    """The savepoint requests of one coordinator process; see the module docstring."""

    def __init__(self) -> None:
        self.requests: list[SavepointRequest] = []
        """The latest requests, oldest first."""
        self.outcomes: dict[str, int] = {"completed": 0, "failed": 0}
        """Requests of this process by how they ended."""
        self.last_written: tuple[float, int] | None = None
        """Seconds from request to written, and size in bytes, of the latest savepoint."""
        self._counted: set[int] = set()

    def refuse(self, refusal: str | None) -> None:
        """Raise `SavepointRefusedError` if a new request cannot be taken now: one is under
        way, or ``refusal`` says why the job cannot take one (None: it can)."""
        self._count()
        if under_way := [r.name for r in self.requests if not r.done]:
            raise SavepointRefusedError(
                f"savepoint {under_way[0]} is under way", "Wait until it is done, then ask again"
            )
        if refusal is not None:
            raise SavepointRefusedError(
                refusal, "Start the job first: a started coordinator resumes from its last "
                "checkpoint",
            )  # fmt: skip

    def request(self, name: str, *, stop: bool, at: float) -> SavepointRequest:
        """A new request, asked for at ``at`` (Unix time); `refuse` said it may be taken."""
        request = SavepointRequest(name, stop, at)
        self.requests = [*self.requests[-(_KEPT - 1) :], request]
        return request

    def waiting(self) -> SavepointRequest | None:
        """A request waiting for a checkpoint to be triggered for it."""
        return next(
            (r for r in self.requests if r.phase is SavepointPhase.WAITING and not r.stop), None
        )

    def triggered(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` was triggered for the waiting request."""
        if (request := self.waiting()) is not None:
            request.triggered(checkpoint_id)

    def pinned(self) -> tuple[int, ...]:
        """Checkpoints being written as savepoints: retention keeps them."""
        return tuple(n for r in self.requests if (n := r.pinned) is not None)

    def on_completed(self, manifest: CheckpointManifest) -> list[WriteSavepoint]:
        """Checkpoint ``manifest`` completed: write the requests waiting for it."""
        return [
            WriteSavepoint(request, manifest)
            for request in self.requests
            if request.checkpoint_completed(manifest.checkpoint_id)
        ]

    def on_aborted(self, checkpoint_id: int, reason: str, at: float) -> None:
        for request in self.requests:
            request.checkpoint_aborted(checkpoint_id, reason, at)
        self._count()

    def on_recovery(self) -> None:
        for request in self.requests:
            request.checkpoint_abandoned()

    def stop_requests(self) -> list[SavepointRequest]:
        """The stop's requests to write now that every subtask stopped."""
        return [r for r in self.requests if r.stop and not r.done]

    def on_stopped(
        self, request: SavepointRequest, manifest: CheckpointManifest | None, at: float
    ) -> list[WriteSavepoint]:
        """The job stopped; ``manifest``: its final checkpoint, or the newest completed one
        (None: there is none, and the request fails)."""
        checkpoint = manifest.checkpoint_id if manifest is not None else None
        if request.stopped(checkpoint, at) and manifest is not None:
            return [WriteSavepoint(request, manifest)]
        self._count()
        return []

    def written(self, request: SavepointRequest, size_bytes: int, at: float) -> None:
        request.written(at)
        self.last_written = (at - request.requested_at, size_bytes)
        self._count()

    def failed(self, request: SavepointRequest, reason: str, at: float) -> None:
        request.failed(reason, at)
        self._count()

    def _count(self) -> None:
        for request in self.requests:
            if request.done and id(request) not in self._counted:
                self._counted.add(id(request))
                self.outcomes[request.phase.value] += 1

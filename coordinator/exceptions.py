"""Errors of the coordinator, under the tree drawn in ``operators.exceptions``::

    SluicegateError
    ├── RetryableError
    │   ├── CoordinatorUnreachableError  the API did not answer (httpapi.client)
    │   └── CheckpointRefusedError       no checkpoint can start now (httpapi.view)
    ├── CoordinatorApiError              the API answered with an error (httpapi.client)
    ├── ApiAuthError                     a request without a valid token (httpapi.auth)
    └── FatalError
        ├── FencedError                  a newer coordinator of the pipeline took over
        ├── IllegalTransitionError       the job state table refused an event (a bug)
        ├── JobFailedError               a subtask of a `LocalJob` failed
        └── UnreadableManifestError      retention found a manifest it cannot read: it stops

(The HTTP API's errors live in ``coordinator.httpapi``, beside the client and server that
raise them.) Savepoint refusals are ``operators.savepoints.exceptions.SavepointError``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sluicegate.operators.exceptions import FatalError

__all__ = ["FencedError", "IllegalTransitionError", "JobFailedError", "UnreadableManifestError"]


class FencedError(FatalError):
    """A request to a fenced coordinator: ``what_to_do`` says where to ask instead."""

    def __init__(self, epoch: int, fenced_by: int) -> None:
        self.message = (
            f"this coordinator (epoch {epoch}) is fenced by coordinator epoch {fenced_by}"
        )
        self.what_to_do = (
            "Ask the newer coordinator of the pipeline; stop this process (one coordinator per "
            "pipeline)"
        )
        super().__init__(f"{self.message}. {self.what_to_do}")


class IllegalTransitionError(FatalError):
    """``event`` is not allowed in ``state``: the caller's sequencing is wrong."""

    def __init__(self, state: str, event: str, allowed: Iterable[str]) -> None:
        listed = ", ".join(sorted(allowed)) or "none: the state is terminal"
        super().__init__(f"event {event} is not allowed in job state {state} (allowed: {listed})")
        self.state = state
        self.event = event


class JobFailedError(FatalError):
    """A subtask of the job failed; ``subtask`` names it."""

    def __init__(self, subtask: str, reason: str) -> None:
        super().__init__(f"subtask {subtask} failed: {reason}")
        self.subtask, self.reason = subtask, reason


class UnreadableManifestError(FatalError):
    """The committed manifest of ``checkpoint_id`` cannot be read, so what it references is
    unknown; retention and the audit refuse to delete anything rather than guess."""

    def __init__(self, checkpoint_id: int, reason: str) -> None:
        super().__init__(
            f"the manifest of checkpoint {checkpoint_id} cannot be read ({reason}); "
            "retention and the orphan audit stop rather than delete files it may reference"
        )
        self.checkpoint_id = checkpoint_id
        self.reason = reason

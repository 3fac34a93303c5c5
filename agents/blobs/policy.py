"""`BlobPolicy`: when an agent stores payloads by reference, for how long, about whom, for whom."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import JsonValue

if TYPE_CHECKING:
    from sluicegate.operators.storage import Storage

__all__ = ["DEFAULT_THRESHOLD_BYTES", "BlobPolicy", "scope_by_tenant", "subject_from_metadata"]

DEFAULT_THRESHOLD_BYTES = 64 * 1024

SubjectOf = Callable[[Mapping[str, JsonValue]], str | None]
ScopeOf = Callable[[str, Mapping[str, JsonValue]], str]


def subject_from_metadata(metadata: Mapping[str, JsonValue]) -> str | None:
    """The default subject: the task metadata's ``subject`` if it is a non-empty string (else
    None, which means the run id)."""
    subject = metadata.get("subject")
    return subject if isinstance(subject, str) and subject else None


def scope_by_tenant(agent: str, metadata: Mapping[str, JsonValue]) -> str:
    """The default scope: the agent's name, and ``/<tenant>`` when the task metadata names a
    ``tenant`` (a non-empty string)."""
    tenant = metadata.get("tenant")
    return f"{agent}/{tenant}" if isinstance(tenant, str) and tenant else agent


@dataclass(frozen=True, slots=True, kw_only=True)
class BlobPolicy:
    """Payloads larger than ``threshold_bytes`` (a tool's result as JSON text, a model
    message's content, in UTF-8) go to the blob store once; the run holds a handle.

    ``subject_of`` and ``scope_of`` read the task's metadata, which does not change during a
    run, so every handle of a run has the same subject and scope.
    """

    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    ttl_s: float | None = None
    """How long a payload stays readable after it was written; None: until erased."""
    subject_of: SubjectOf = subject_from_metadata
    """Whom a run's payloads are about (erasure deletes by subject); None: the run id."""
    scope_of: ScopeOf = scope_by_tenant
    """Who may read a run's payloads back, from the agent's name and the task's metadata."""
    storage: Storage | None = None
    """Where the payloads go; None: the job's checkpoint storage (`OpenContext.storage`)."""

    def __post_init__(self) -> None:
        if isinstance(self.threshold_bytes, bool) or self.threshold_bytes < 1:
            raise ValueError(f"threshold_bytes must be >= 1, got {self.threshold_bytes!r}")
        if self.ttl_s is not None and not (math.isfinite(self.ttl_s) and self.ttl_s > 0):
            raise ValueError(f"ttl_s must be a positive number of seconds, got {self.ttl_s!r}")

    def subject(self, run_id: str, metadata: Mapping[str, JsonValue]) -> str:
        return self.subject_of(metadata) or run_id

    def scope(self, agent: str, metadata: Mapping[str, JsonValue]) -> str:
        return self.scope_of(agent, metadata)

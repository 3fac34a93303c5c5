"""`CheckpointTracing`: the OpenTelemetry spans of a coordinator's checkpoints
(``docs/tracing.md``).

One trace per checkpoint, emitted when it ends (the times come from the manifest, so no span
stays open across the coordinator's loop)::

    sluicegate.checkpoint            from the trigger to the manifest's commit, or to the abort
    └── sluicegate.checkpoint.commit the manifest's create-if-absent write to storage

Its trace id and span id are derived from (pipeline, checkpoint id, attempt)
(`operators.tracing.checkpoint_ids`): the subtasks derive the same, and emit their part of the
checkpoint (`operators.runtime.snapshot_tracing`) as children of this span, with no trace
context in the trigger or the barriers.

A completed checkpoint's span carries its id, attempt, subtask count, sizes, and per phase the
slowest subtask's seconds (alignment, sync, async upload: what the acks report); an aborted
one has status error and the abort's reason. With tracing off (`operators.tracing.tracer` is
None) every method returns at once.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.context import Context as TraceContext
from opentelemetry.trace import Span, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from sluicegate.coordinator.checkpoint_stats import slowest_phases
from sluicegate.operators.storage.manifest import CheckpointManifest
from sluicegate.operators.tracing import checkpoint_ids, fixed_ids

__all__ = ["CheckpointTracing"]

_NS = 1_000_000_000


class CheckpointTracing:
    """The spans of one pipeline's checkpoints; ``tracer`` None: none."""

    def __init__(self, tracer: Tracer | None, *, pipeline: str) -> None:
        self._tracer, self._pipeline = tracer, pipeline

    def committed(self, manifest: CheckpointManifest, started: float, ended: float) -> None:
        """Checkpoint ``manifest`` completed: its manifest was written from ``started`` to
        ``ended`` (unix times)."""
        if self._tracer is None:
            return
        attributes: dict[str, AttributeValue] = {
            "sluicegate.pipeline": self._pipeline,
            "sluicegate.checkpoint.id": manifest.checkpoint_id,
            "sluicegate.attempt": manifest.attempt,
            "sluicegate.checkpoint.subtasks": len(manifest.subtasks),
            "sluicegate.checkpoint.full_bytes": manifest.full_bytes,
            "sluicegate.checkpoint.uploaded_bytes": manifest.uploaded_bytes,
        }
        for phase, seconds in slowest_phases(manifest).items():
            attributes[f"sluicegate.checkpoint.{phase}_seconds"] = seconds
        triggered = manifest.triggered_at if manifest.triggered_at is not None else started
        span = self._root(self._tracer, manifest.checkpoint_id, manifest.attempt, attributes,
                          _ns(triggered))  # fmt: skip
        commit = self._tracer.start_span(
            "sluicegate.checkpoint.commit",
            context=trace.set_span_in_context(span),
            attributes={"sluicegate.checkpoint.id": manifest.checkpoint_id},
            start_time=_ns(started),
        )
        commit.end(end_time=_ns(ended))
        span.end(end_time=_ns(ended))

    def aborted(
        self, checkpoint_id: int, attempt: int, reason: str, triggered: float | None, now: float
    ) -> None:
        """Checkpoint ``checkpoint_id`` was aborted at ``now`` for ``reason``."""
        if self._tracer is None:
            return
        attributes: dict[str, AttributeValue] = {
            "sluicegate.pipeline": self._pipeline,
            "sluicegate.checkpoint.id": checkpoint_id,
            "sluicegate.attempt": attempt,
            "sluicegate.checkpoint.abort_reason": reason,
        }
        start = _ns(triggered if triggered is not None else now)
        span = self._root(self._tracer, checkpoint_id, attempt, attributes, start)
        span.set_status(Status(StatusCode.ERROR, reason))
        span.end(end_time=_ns(now))

    def _root(
        self,
        tracer: Tracer,
        checkpoint_id: int,
        attempt: int,
        attributes: dict[str, AttributeValue],
        start: int,
    ) -> Span:
        """The checkpoint's span, a root with the checkpoint's derived ids."""
        with fixed_ids(*checkpoint_ids(self._pipeline, checkpoint_id, attempt)):
            return tracer.start_span(
                "sluicegate.checkpoint", context=TraceContext(), attributes=attributes,
                start_time=start,
            )  # fmt: skip


def _ns(seconds: float) -> int:
    return int(seconds * _NS)

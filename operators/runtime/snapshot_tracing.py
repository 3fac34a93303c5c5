"""`SnapshotTracing`: the OpenTelemetry spans of a subtask's part of a checkpoint
(``docs/tracing.md``).

Emitted when the part ends (the ack is sent, or the upload failed and the checkpoint was
declined), from the `SnapshotMarks` the subtask took on its way, so no span stays open across
the subtask's loop::

    sluicegate.checkpoint                    the coordinator's (a remote parent here)
    └── sluicegate.checkpoint.subtask        from the first barrier to the ack sent
        ├── sluicegate.checkpoint.alignment  from the first barrier to the last one
        ├── sluicegate.checkpoint.sync       the state capture and the barrier forwarded
        ├── sluicegate.checkpoint.upload     the outputs flushed, the state uploaded
        └── sluicegate.checkpoint.ack        the ack written to the control topic

The parent is the coordinator's checkpoint span, named by the ids both sides derive from
(pipeline, checkpoint id, attempt) (`operators.tracing.checkpoint_ids`): the trigger and the
barriers carry no trace context. Between the alignment and the sync, the subtask finishes the
calls in flight and tells its operator and sinks (`operators.protocol.snapshot`, step 1).

With tracing off (``tracer`` None) `acked` and `declined` return at once; the marks are a few
`time.perf_counter` readings per checkpoint.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)
from opentelemetry.util.types import AttributeValue

from sluicegate.operators.protocol.messages import CheckpointAck, CheckpointDecline
from sluicegate.operators.tracing import checkpoint_ids

__all__ = ["SnapshotMarks", "SnapshotTracing"]

_NS = 1_000_000_000
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotMarks:
    """`time.perf_counter` readings of one checkpoint of a subtask, in the order taken; the
    upload's are None until it got there."""

    aligning: float
    """The first barrier (the alignment's start; ``aligned`` if a single barrier aligned it)."""
    aligned: float
    """The last barrier: the synchronous phase starts."""
    capturing: float
    """The state capture starts (the calls in flight are finished)."""
    synced: float
    """The barrier is forwarded: the synchronous phase ends."""
    uploading: float | None = None
    """The asynchronous phase starts (the outputs' flush)."""
    uploaded: float | None = None
    """The state is in storage (or its upload failed)."""

    @property
    def alignment_seconds(self) -> float:
        return max(self.aligned - self.aligning, 0.0)

    @property
    def sync_seconds(self) -> float:
        return self.synced - self.capturing


class SnapshotTracing:
    """The spans of one subtask's checkpoints; ``tracer`` None: none."""

    def __init__(self, tracer: Tracer | None, *, pipeline: str) -> None:
        self._tracer, self._pipeline = tracer, pipeline

    def acked(self, ack: CheckpointAck, marks: SnapshotMarks, now: float) -> None:
        """The subtask sent ``ack`` at ``now`` (`time.perf_counter`)."""
        if self._tracer is not None:
            self._emit(self._tracer, ack, marks, now)

    def declined(self, decline: CheckpointDecline, marks: SnapshotMarks, now: float) -> None:
        """The subtask's upload failed: it sent ``decline`` at ``now``; status error."""
        if self._tracer is not None:
            self._emit(self._tracer, decline, marks, now)

    def _emit(
        self,
        tracer: Tracer,
        sent: CheckpointAck | CheckpointDecline,
        marks: SnapshotMarks,
        now: float,
    ) -> None:
        offset = time.time() - time.perf_counter()  # the marks as unix times

        def ns(mark: float) -> int:
            return int((mark + offset) * _NS)

        subtask, checkpoint_id = sent.subtask, sent.checkpoint_id
        trace_id, span_id = checkpoint_ids(self._pipeline, checkpoint_id, sent.attempt)
        root = SpanContext(trace_id, span_id, is_remote=True, trace_flags=_SAMPLED)
        attributes: dict[str, AttributeValue] = {
            "sluicegate.pipeline": self._pipeline,
            "sluicegate.subtask": subtask,
            "sluicegate.checkpoint.id": checkpoint_id,
            "sluicegate.attempt": sent.attempt,
            "sluicegate.checkpoint.alignment_seconds": marks.alignment_seconds,
            "sluicegate.checkpoint.sync_seconds": marks.sync_seconds,
        }
        error = None
        if isinstance(sent, CheckpointAck):
            attributes["sluicegate.checkpoint.full_bytes"] = sent.full_size_bytes
            attributes["sluicegate.checkpoint.uploaded_bytes"] = sent.incremental_size_bytes
            attributes["sluicegate.checkpoint.partitions"] = len(sent.positions)
        else:
            error = sent.reason
        parent = trace.set_span_in_context(NonRecordingSpan(root))
        part = tracer.start_span(
            "sluicegate.checkpoint.subtask", context=parent, attributes=attributes,
            start_time=ns(marks.aligning),
        )  # fmt: skip
        inside = trace.set_span_in_context(part)
        phases = [
            ("alignment", marks.aligning, marks.aligned),
            ("sync", marks.capturing, marks.synced),
        ]
        if marks.uploading is not None and marks.uploaded is not None:
            phases.append(("upload", marks.uploading, marks.uploaded))
            if error is None:
                phases.append(("ack", marks.uploaded, now))
        names: dict[str, AttributeValue] = {
            "sluicegate.subtask": subtask,
            "sluicegate.checkpoint.id": checkpoint_id,
        }
        for phase, start, end in phases:
            span = tracer.start_span(
                f"sluicegate.checkpoint.{phase}", context=inside, attributes=names,
                start_time=ns(start),
            )  # fmt: skip
            if error is not None and phase == "upload":
                span.set_status(Status(StatusCode.ERROR, error))
            span.end(end_time=ns(end))
        if error is not None:
            part.set_status(Status(StatusCode.ERROR, error))
        part.end(end_time=ns(now))

"""The spans of checkpoints (`coordinator.tracing`), read from the SDK's in-memory exporter."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from sluicegate.coordinator.tracing import CheckpointTracing
from sluicegate.operators import tracing
from tests.unit.coordinator.test_checkpoint_stats import manifest


def test_a_completed_checkpoint_spans_trigger_to_commit_with_its_phases(
    spans: InMemorySpanExporter,
) -> None:
    traced = CheckpointTracing(tracing.tracer("t"), pipeline="p")
    done = manifest(7, phases={"a#0": (0.5, 0.1, 2.0), "a#1": (1.5, 0.2, 1.0)})
    done = done.model_copy(update={"triggered_at": 100.0})
    traced.committed(done, started=103.0, ended=103.25)
    commit, checkpoint = spans.get_finished_spans()
    assert (checkpoint.name, commit.name) == (
        "sluicegate.checkpoint",
        "sluicegate.checkpoint.commit",
    )
    assert commit.parent is not None
    assert commit.parent.span_id == checkpoint.context.span_id
    assert (checkpoint.start_time, checkpoint.end_time) == (100 * 10**9, 103_250_000_000)
    assert (commit.start_time, commit.end_time) == (103 * 10**9, 103_250_000_000)
    attributes = dict(checkpoint.attributes or {})
    assert attributes["sluicegate.checkpoint.id"] == 7
    assert attributes["sluicegate.checkpoint.subtasks"] == 2
    assert attributes["sluicegate.checkpoint.alignment_seconds"] == 1.5
    assert attributes["sluicegate.checkpoint.async_seconds"] == 2.0
    assert attributes["sluicegate.checkpoint.full_bytes"] == 1000


def test_an_aborted_checkpoint_is_an_error_span_with_its_reason(
    spans: InMemorySpanExporter,
) -> None:
    traced = CheckpointTracing(tracing.tracer("t"), pipeline="p")
    traced.aborted(8, 1, "timeout", triggered=10.0, now=70.0)
    (aborted,) = spans.get_finished_spans()
    assert aborted.status.status_code is StatusCode.ERROR
    assert dict(aborted.attributes or {})["sluicegate.checkpoint.abort_reason"] == "timeout"
    assert (aborted.start_time, aborted.end_time) == (10 * 10**9, 70 * 10**9)
    trace_id, span_id = tracing.checkpoint_ids("p", 8, 1)  # what the subtasks derive too
    assert (aborted.context.trace_id, aborted.context.span_id) == (trace_id, span_id)


def test_without_tracing_nothing_is_emitted() -> None:
    assert tracing.tracer("t") is None
    traced = CheckpointTracing(tracing.tracer("t"), pipeline="p")
    traced.committed(manifest(1), started=1.0, ended=2.0)
    traced.aborted(2, 1, "declined", triggered=None, now=3.0)  # nothing to fail on

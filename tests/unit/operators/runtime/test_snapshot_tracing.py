"""The spans of a subtask's part of a checkpoint (`operators.runtime.snapshot_tracing`), read
from the SDK's in-memory exporter: children of the coordinator's checkpoint span, by ids both
sides derive, with no trace context on the wire."""

from __future__ import annotations

import time

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from sluicegate.coordinator.tracing import CheckpointTracing
from sluicegate.operators import tracing
from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.protocol.messages import CheckpointAck, CheckpointDecline
from sluicegate.operators.runtime.snapshot_tracing import SnapshotMarks, SnapshotTracing
from sluicegate.operators.tracing import checkpoint_ids
from tests.helpers import fake_state_handle
from tests.unit.coordinator.test_checkpoint_stats import manifest

NS = 1_000_000_000


def marks(base: float) -> SnapshotMarks:
    """Alignment 0.5 s, quiesce 0.1 s, sync 0.2 s, upload 1 s (from its flush)."""
    return SnapshotMarks(
        aligning=base, aligned=base + 0.5, capturing=base + 0.6, synced=base + 0.8,
        uploading=base + 0.8, uploaded=base + 1.8,
    )  # fmt: skip


def by_name(spans: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    finished = spans.get_finished_spans()
    named = {s.name: s for s in finished}
    assert len(named) == len(finished)
    return named


def test_a_subtask_part_lands_under_the_coordinators_checkpoint_span(
    spans: InMemorySpanExporter,
) -> None:
    traced = SnapshotTracing(tracing.tracer("t"), pipeline="p")
    base = time.perf_counter()
    ack = CheckpointAck(
        "a#0", 7, 1, {TopicPartition("in", 0): 5}, fake_state_handle("k", 7),
        alignment_seconds=0.5, sync_seconds=0.2, async_seconds=1.0,
    )  # fmt: skip
    traced.acked(ack, marks(base), now=base + 1.9)
    CheckpointTracing(tracing.tracer("t"), pipeline="p").committed(
        manifest(7), started=time.time(), ended=time.time()
    )  # the manifest's attempt is 1, like the ack's
    named = by_name(spans)
    checkpoint = named["sluicegate.checkpoint"]
    trace_id, root_id = checkpoint_ids("p", 7, 1)
    assert (checkpoint.context.trace_id, checkpoint.context.span_id) == (trace_id, root_id)
    assert checkpoint.parent is None
    part = named["sluicegate.checkpoint.subtask"]
    assert part.parent is not None
    assert part.parent.span_id == root_id
    assert {s.context.trace_id for s in named.values()} == {trace_id}
    phases = ["alignment", "sync", "upload", "ack"]
    for phase in phases:
        span = named[f"sluicegate.checkpoint.{phase}"]
        assert span.parent is not None
        assert span.parent.span_id == part.context.span_id
        assert dict(span.attributes or {})["sluicegate.subtask"] == "a#0"
    seconds = {
        p: (named[f"sluicegate.checkpoint.{p}"].end_time or 0)
        - (named[f"sluicegate.checkpoint.{p}"].start_time or 0)
        for p in phases
    }
    expected = {"alignment": 0.5, "sync": 0.2, "upload": 1.0, "ack": 0.1}
    assert seconds == pytest.approx({p: s * NS for p, s in expected.items()}, abs=1e4)
    assert ((part.end_time or 0) - (part.start_time or 0)) == pytest.approx(1.9 * NS, abs=1e4)
    attributes = dict(part.attributes or {})
    assert attributes["sluicegate.checkpoint.id"] == 7
    assert attributes["sluicegate.attempt"] == 1
    assert attributes["sluicegate.checkpoint.alignment_seconds"] == pytest.approx(0.5)
    assert attributes["sluicegate.checkpoint.partitions"] == 1
    start = (part.start_time or 0) / NS  # the marks as unix times: about now
    assert abs(start - time.time()) < 60


def test_a_failed_upload_is_an_error_part_with_no_ack(spans: InMemorySpanExporter) -> None:
    traced = SnapshotTracing(tracing.tracer("t"), pipeline="p")
    base = time.perf_counter()
    decline = CheckpointDecline("a#1", 8, 2, "upload failed: storage down")
    traced.declined(decline, marks(base), now=base + 1.9)
    named = by_name(spans)
    assert set(named) == {
        "sluicegate.checkpoint.subtask",
        "sluicegate.checkpoint.alignment",
        "sluicegate.checkpoint.sync",
        "sluicegate.checkpoint.upload",
    }
    part = named["sluicegate.checkpoint.subtask"]
    assert part.status.status_code is StatusCode.ERROR
    assert part.status.description == "upload failed: storage down"
    assert named["sluicegate.checkpoint.upload"].status.status_code is StatusCode.ERROR
    trace_id, root_id = checkpoint_ids("p", 8, 2)
    assert part.context.trace_id == trace_id
    assert part.parent is not None
    assert part.parent.span_id == root_id


def test_the_checkpoint_ids_differ_by_pipeline_checkpoint_and_attempt() -> None:
    ids = {checkpoint_ids(p, n, a) for p in ("p", "q") for n in (1, 2) for a in (1, 2)}
    assert len(ids) == 8
    assert checkpoint_ids("p", 1, 1) == checkpoint_ids("p", 1, 1)


def test_without_tracing_nothing_is_emitted() -> None:
    assert tracing.tracer("t") is None
    traced = SnapshotTracing(tracing.tracer("t"), pipeline="p")
    traced.declined(CheckpointDecline("a#0", 1, 1, "x"), marks(0.0), now=2.0)  # returns at once

"""A subtask's checkpoint once its barriers are aligned, sans-IO: the steps of the synchronous
phase in DESIGN.md's order, as values.

The subtask (`operators.runtime.running`) performs them on Kafka and RocksDB; the protocol
model test performs the very same sequence on its simulated log. One order, two performers:

1. `Quiesce`: finish the calls in flight, tell the operator and its sinks (``on_snapshot``),
   and wait for the previous checkpoint's upload (at most one at a time);
2. `Capture`: take the local state checkpoint (the state as of the barrier);
3. `ForwardBarrier`: write barrier ``n`` into every output partition; what the subtask writes
   from now on is of interval ``n+1``;
4. `Upload`: start the asynchronous phase: flush the outputs (every record of interval ≤ n in
   Kafka before the ack), upload what storage lacks, ack with the state handle and ``R_p``.

The caller then processes the records the alignment buffered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluicegate.operators.protocol.alignment import Aligned
from sluicegate.operators.protocol.channels import TopicPartition

__all__ = ["Capture", "ForwardBarrier", "Quiesce", "SnapshotStep", "Upload", "snapshot_steps"]


@dataclass(frozen=True, slots=True)
class Quiesce:
    """Finish the calls in flight, tell the operator and sinks, wait for the last upload."""

    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class Capture:
    """Take the local state checkpoint ``checkpoint_id``."""

    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class ForwardBarrier:
    """Barrier ``checkpoint_id`` into every output partition; the next interval begins."""

    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class Upload:
    """Start the asynchronous phase of ``checkpoint_id``, acking ``positions`` (``R_p``)."""

    checkpoint_id: int
    positions: Mapping[TopicPartition, int]


SnapshotStep = Quiesce | Capture | ForwardBarrier | Upload


def snapshot_steps(aligned: Aligned) -> tuple[SnapshotStep, ...]:
    """The synchronous phase of the checkpoint ``aligned`` completes, in order."""
    n = aligned.checkpoint_id
    return (Quiesce(n), Capture(n), ForwardBarrier(n), Upload(n, dict(aligned.positions)))

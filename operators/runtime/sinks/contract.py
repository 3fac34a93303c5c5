"""The contract between a subtask and its sinks: one `Sink` type per delivery guarantee.

A sink is a topic the outside world reads. The subtask holds a `Sink` for every sink topic its
operator writes (topics with the same guarantee share one: every exactly-once topic of a
subtask is published in one transaction under one transactional id) and drives each through
the lifecycle below without knowing which guarantee it gives. Topics between operators are
not sinks: the subtask writes their records and barrier markers itself.

Lifecycle, in the order the subtask drives it (steps of `operators.runtime.subtask`):

1. ``open(restored)``, once, after the state is open (restored from checkpoint ``restored``,
   or empty when it is None) and before the operator opens. The sink takes up where
   ``restored`` left it: the exactly-once sink fences older producers of this sink subtask,
   refuses to start empty when outputs were already published, and publishes what
   ``restored`` holds but was not published yet.
2. ``write(record, interval)`` for every record the operator emits to one of the sink's topics,
   in emit order; ``interval`` is the checkpoint the record belongs to. When it returns, the
   record is either in state (so in the snapshot of ``interval``) or handed to the subtask's
   producer, which the subtask flushes before it acks checkpoint ``interval``.
3. ``on_snapshot(n)`` in the synchronous phase of checkpoint ``n``: every call in flight has
   returned, the local RocksDB checkpoint is taken next and no ``write`` runs in between.
   Whatever the sink needs to recover the outputs of intervals ≤ n must be in state when it
   returns.
4. ``on_completed(n)`` when the coordinator says checkpoint ``n`` completed, before the
   operator hears of it. ``n`` grows from call to call but may skip ids (an aborted checkpoint
   never completes): it covers every interval ≤ n. The sink may now make the outputs of those
   intervals visible, now or in the background; a failure fails the subtask (raised here or
   by ``poll``), and the next attempt's ``open`` publishes them instead.
5. ``poll()`` on every turn of the subtask's loop (between calls, never during a snapshot's
   synchronous phase): settle background work, touching state if it must; raise its failure.
6. ``close()``, once, when the subtask stops, fails or is cancelled, also when ``open`` failed
   or never ran.

There is no abort hook: the outputs of an aborted checkpoint ``n`` keep interval ``n`` and
become visible with the next completed checkpoint, which holds them. After a failure the next
attempt restores checkpoint ``m`` and replays the inputs after it: outputs of intervals > m
were never published by an exactly-once sink (they are dropped with the state) and are
written again; an at-least-once sink sends them again with the same ids.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple

from sluicegate.operators.contract import Record

__all__ = ["Sink", "SinkRecord"]


class SinkRecord(NamedTuple):
    """One record the operator emitted to a sink topic, with the partition already chosen (a
    named tuple: one is built per output record)."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes
    source: Record | None
    """The input record whose processing emitted it; None for a wake-up."""
    emit_index: int
    """Its position among the records that call emitted (to any topic)."""


class Sink(ABC):
    """Where one subtask's records for some sink topics go; lifecycle in the module docstring.

    Instances are compared by identity: the subtask drives a sink shared by several topics
    once per step.
    """

    @abstractmethod
    async def open(self, restored: int | None) -> None:
        """Take up where checkpoint ``restored`` (None: no checkpoint, empty state) left off."""

    @abstractmethod
    def write(self, record: SinkRecord, interval: int) -> None:
        """Accept ``record``, which belongs to interval ``interval``; no I/O (it runs on the
        per-record path: a sink that sends queues, the subtask ships)."""

    @abstractmethod
    def on_snapshot(self, checkpoint_id: int) -> None:
        """Put in state what recovering the outputs of intervals ≤ ``checkpoint_id`` needs."""

    @abstractmethod
    async def on_completed(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is durable: the outputs of intervals ≤ it may show."""

    @abstractmethod
    def poll(self) -> None:
        """Settle what runs in the background; raise its failure."""

    @abstractmethod
    async def close(self) -> None:
        """Release what the sink holds; it is not used again."""

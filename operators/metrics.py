"""Every metric the engine exports; one `SubtaskMetrics` per registry.

Several subtasks of one worker share a `SubtaskMetrics`; each binds its labels once with
`SubtaskMetrics.bind` and reports through the `SubtaskInstruments` it gets back. Every value is
process-local: a worker that restarts starts its counters from zero (Prometheus' ``rate`` and
``increase`` handle the reset).

=============================================  =========  ===================================
name                                           type       labels
=============================================  =========  ===================================
``sluicegate_records_in_total``                counter    pipeline, operator, subtask
``sluicegate_records_out_total``               counter    pipeline, operator, subtask
``sluicegate_dead_letters_total``              counter    pipeline, operator, subtask
``sluicegate_state_materialized_bytes_total``  counter    pipeline, operator, subtask
``sluicegate_barrier_buffered_records``        gauge      pipeline, operator, subtask
``sluicegate_consumer_lag_records``            gauge      pipeline, operator, subtask, topic,
                                                          partition
``sluicegate_restore_duration_seconds``        histogram  pipeline, operator
``sluicegate_subtask_checkpoint_seconds``      histogram  pipeline, operator, phase
=============================================  =========  ===================================

``operator`` is the operator's uid, ``subtask`` is ``uid#index``, ``phase`` is one of
`CHECKPOINT_PHASES`. The gauges of a subtask are removed when it closes, so a worker does not
keep reporting the lag of a subtask that moved to another worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Set
from typing import Any, Protocol
from weakref import WeakKeyDictionary

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

__all__ = [
    "CHECKPOINT_PHASES",
    "CHECKPOINT_SECONDS_BUCKETS",
    "LAG_EVERY_SECONDS",
    "RESTORE_SECONDS_BUCKETS",
    "FetchedPositions",
    "LagSource",
    "SubtaskInstruments",
    "SubtaskMetrics",
]

CHECKPOINT_PHASES = ("alignment", "sync", "async")
"""The parts of a checkpoint a subtask times: barrier alignment, the synchronous snapshot
(local RocksDB checkpoint and barriers out) and the asynchronous upload."""

CHECKPOINT_SECONDS_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
"""Buckets of every checkpoint duration histogram, the coordinator's too."""

RESTORE_SECONDS_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

LAG_EVERY_SECONDS = 1.0
"""Least time between two consumer-lag updates of one subtask."""

_POSITION_WAIT_SECONDS = 0.05
"""How long a lag update waits for a position being reset (normally it is known at once):
never long, as the subtask's loop waits meanwhile."""

_LABELS = ("pipeline", "operator", "subtask")
_lock = threading.Lock()
_by_registry: WeakKeyDictionary[CollectorRegistry, SubtaskMetrics] = WeakKeyDictionary()


class LagSource(Protocol):
    """What consumer lag is read from: the part of ``AIOKafkaConsumer`` it needs."""

    def assignment(self) -> Set[Any]:
        """The assigned partitions (objects with ``topic`` and ``partition``)."""

    def highwater(self, partition: Any) -> int | None:
        """The high watermark of the last fetch response, None before one arrived."""

    async def position(self, partition: Any) -> int:
        """The offset of the next record the subtask will be given."""


class FetchedPositions:
    """A `LagSource` over a consumer whose positions come from the records it handed out,
    never from awaiting the consumer: reading ``consumer.position`` between a fetch and its
    processing stalled the fetch loop under load."""

    def __init__(self, consumer: LagSource) -> None:
        self._consumer = consumer
        self._positions: dict[tuple[str, int], int] = {}

    def seen(self, topic: str, partition: int, next_offset: int) -> None:
        """Records of ``topic[partition]`` up to ``next_offset - 1`` were fetched."""
        self._positions[(topic, partition)] = next_offset

    def assignment(self) -> Set[Any]:
        return self._consumer.assignment()

    def highwater(self, partition: Any) -> int | None:
        return self._consumer.highwater(partition)

    async def position(self, partition: Any) -> int:
        known = self._positions.get((str(partition.topic), int(partition.partition)))
        if known is None:
            raise TimeoutError  # nothing fetched from it yet: skipped, as a reset one is
        return known


class SubtaskMetrics:
    """The engine's metrics of one registry (several subtasks of one worker share it)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.records_in = Counter(
            "sluicegate_records_in_total",
            "Records read from the subtask's input partitions (barriers and markers included)",
            _LABELS,
            registry=registry,
        )
        self.records_out = Counter(
            "sluicegate_records_out_total",
            "Records the subtask emitted to its output topics",
            _LABELS,
            registry=registry,
        )
        self.dead_letters = Counter(
            "sluicegate_dead_letters_total",
            "Records the subtask sent to the pipeline's dead-letter topic",
            _LABELS,
            registry=registry,
        )
        self.barrier_buffered = Gauge(
            "sluicegate_barrier_buffered_records",
            "Records buffered during barrier alignment now",
            _LABELS,
            registry=registry,
        )
        self.consumer_lag = Gauge(
            "sluicegate_consumer_lag_records",
            "High watermark minus the subtask's position, per input partition",
            [*_LABELS, "topic", "partition"],
            registry=registry,
        )
        self.restore_duration = Histogram(
            "sluicegate_restore_duration_seconds",
            "From subtask start to its first fetch, state restored or opened empty",
            ["pipeline", "operator"],
            buckets=RESTORE_SECONDS_BUCKETS,
            registry=registry,
        )
        self.materialized_bytes = Counter(
            "sluicegate_state_materialized_bytes_total",
            "Bytes the state changelog's materializations uploaded, beside the checkpoints'",
            _LABELS,
            registry=registry,
        )
        self.checkpoint_seconds = Histogram(
            "sluicegate_subtask_checkpoint_seconds",
            "Per subtask ack: seconds of each checkpoint phase (alignment, sync, async)",
            ["pipeline", "operator", "phase"],
            buckets=CHECKPOINT_SECONDS_BUCKETS,
            registry=registry,
        )

    @classmethod
    def of(cls, registry: CollectorRegistry | None = None) -> SubtaskMetrics:
        """The metrics of ``registry`` (default: the global one), declared on first use."""
        registry = registry if registry is not None else REGISTRY
        with _lock:
            metrics = _by_registry.get(registry)
            if metrics is None:
                metrics = _by_registry[registry] = cls(registry)
            return metrics

    def bind(
        self,
        pipeline: str,
        operator: str,
        subtask: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> SubtaskInstruments:
        """The instruments of one subtask (``subtask`` is ``uid#index``)."""
        return SubtaskInstruments(self, pipeline, operator, subtask, clock=clock)


class SubtaskInstruments:
    """One subtask's view of `SubtaskMetrics`, its labels bound.

    The subtask calls, in order: `start` when it starts; `on_fetch` after every fetch (the
    first one ends the restore; lag is read at most every `LAG_EVERY_SECONDS`); the counters
    as records pass; `on_ack` per checkpoint ack; `close` when it stops.
    """

    def __init__(
        self,
        metrics: SubtaskMetrics,
        pipeline: str,
        operator: str,
        subtask: str,
        *,
        clock: Callable[[], float],
    ) -> None:
        self._metrics = metrics
        self._labels = (pipeline, operator, subtask)
        self._clock = clock
        self.records_in = metrics.records_in.labels(*self._labels)
        self.records_out = metrics.records_out.labels(*self._labels)
        self.dead_letters = metrics.dead_letters.labels(*self._labels)
        self.materialized_bytes = metrics.materialized_bytes.labels(*self._labels)
        self._buffered = metrics.barrier_buffered.labels(*self._labels)
        self._restore = metrics.restore_duration.labels(pipeline, operator)
        self._phases = {
            phase: metrics.checkpoint_seconds.labels(pipeline, operator, phase)
            for phase in CHECKPOINT_PHASES
        }
        self._started: float | None = None
        self._lag_at: float | None = None
        self._lags: dict[tuple[str, str], int] = {}

    @property
    def lag_records(self) -> int | None:
        """The subtask's consumer lag summed over its partitions, as last read (None: not
        read yet); what ``sluicegate_consumer_lag_records`` shows per partition."""
        return sum(self._lags.values()) if self._lags else None

    def start(self) -> None:
        """The subtask starts (before its state is opened)."""
        self._started = self._clock()
        self._lag_at = None

    async def on_fetch(self, consumer: LagSource, buffered: int) -> None:
        """A fetch returned; ``buffered`` records wait in the alignment buffer.

        The first fetch after `start` observes the restore duration. Consumer lag is read for
        every assigned partition whose high watermark and position are known, at most every
        `LAG_EVERY_SECONDS`.
        """
        now = self._clock()
        if self._started is not None:
            self._restore.observe(max(now - self._started, 0.0))
            self._started = None
        self._buffered.set(buffered)
        if self._lag_at is not None and now - self._lag_at < LAG_EVERY_SECONDS:
            return
        self._lag_at = now
        for tp in consumer.assignment():
            highwater = consumer.highwater(tp)
            if highwater is None:
                continue  # no fetch response for it yet
            try:
                # Not wait_for: on 3.11 it swallows a cancel that lands as the wait ends.
                async with asyncio.timeout(_POSITION_WAIT_SECONDS):
                    position = await consumer.position(tp)
            except TimeoutError:
                continue  # being reset (seek, out of range): next time
            key = (str(tp.topic), str(tp.partition))
            lag = max(highwater - position, 0)
            self._metrics.consumer_lag.labels(*self._labels, *key).set(lag)
            self._lags[key] = lag

    def on_ack(self, alignment_seconds: float, sync_seconds: float, async_seconds: float) -> None:
        """The subtask acked a checkpoint that took these seconds per phase."""
        for phase, seconds in zip(
            CHECKPOINT_PHASES, (alignment_seconds, sync_seconds, async_seconds), strict=True
        ):
            self._phases[phase].observe(max(seconds, 0.0))

    def close(self) -> None:
        """The subtask stopped: remove its gauges (the counters keep their totals)."""
        # A label set may be gone already (never set, or removed by an earlier instance of
        # the same subtask in this process): closing must not fail for it.
        with contextlib.suppress(KeyError):
            for key in self._lags:
                self._metrics.consumer_lag.remove(*self._labels, *key)
        self._lags.clear()
        with contextlib.suppress(KeyError):
            self._metrics.barrier_buffered.remove(*self._labels)

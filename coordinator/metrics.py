"""The coordinator's Prometheus metrics, read from the running coordinator at scrape time.

Register `CoordinatorCollector` in the registry the HTTP API serves
(``registry.register(CoordinatorCollector(coordinator))``); each test brings its own registry.
Every sample carries the ``pipeline`` label. The engine's metrics (records, lag, restores, the
subtasks' checkpoint phases) are declared in `operators.metrics` and served by each worker.

*Durable* values are derived from checkpoint storage, so a restarted coordinator reports them
unchanged; *process-local* ones start again from zero (counters: Prometheus' ``rate`` and
``increase`` handle the reset).

==========================================================  =========  ============  =============
name                                                        type       extra label   kept
==========================================================  =========  ============  =============
``sluicegate_checkpoints_completed_total``                  counter                  process-local
``sluicegate_checkpoints_aborted_total``                    counter    reason        process-local
``sluicegate_checkpoint_duration_seconds``                  histogram                process-local
``sluicegate_checkpoint_phase_seconds``                     histogram  phase         process-local
``sluicegate_checkpoint_size_bytes``                        gauge      kind          durable
``sluicegate_last_completed_checkpoint_id``                 gauge                    durable
``sluicegate_last_completed_checkpoint_timestamp_seconds``  gauge                    durable
``sluicegate_checkpoint_lag_seconds``                       gauge                    durable
``sluicegate_checkpoint_interval_seconds``                  gauge                    configuration
``sluicegate_restarts_total``                               counter                  durable
``sluicegate_restore_fallbacks_total``                      counter                  process-local
``sluicegate_attempt``                                      gauge                    durable
``sluicegate_workers_alive``                                gauge                    process-local
``sluicegate_savepoints_total``                             counter    outcome       process-local
``sluicegate_savepoint_last_seconds``                       gauge                    process-local
``sluicegate_savepoint_last_size_bytes``                    gauge                    process-local
``sluicegate_coordinator_fenced``                           gauge                    process-local
==========================================================  =========  ============  =============

* ``aborted_total{reason}``: declined, timeout, failed, superseded (`checkpoint_stats`); every
  reason is exported, zero included.
* ``duration_seconds``: from trigger to manifest commit. ``phase_seconds{phase}`` (alignment,
  sync, async): per completed checkpoint, the slowest subtask's seconds of the phase.
* ``size_bytes{kind}``: of the newest completed checkpoint; ``full`` is the whole state,
  ``incremental`` what that checkpoint uploaded. It and the three ``last_completed``/``lag``
  gauges come from the newest manifest in storage until this process completes one; all four
  are absent while no checkpoint ever completed.
* ``restarts_total``: global recoveries since the pipeline first started, a coordinator
  restart included: ``attempt - 1``, as every attempt is taken durably and never reused.
* ``interval_seconds``: the configured checkpoint interval (alert when the lag exceeds about
  three of them).
* ``savepoints_total{outcome}``: savepoint requests of this process that ended, ``completed``
  or ``failed`` (both exported, zero included). ``savepoint_last_seconds`` (from request to
  written) and ``savepoint_last_size_bytes``: of the latest savepoint written; absent before.
* ``coordinator_fenced``: 1 once a newer coordinator of the pipeline fenced this one
  (`coordinator.fencing`), else 0. A fenced coordinator exports nothing else: its other
  series would be stale (its checkpoint lag would only grow), and alerts take the ``max``
  over every coordinator scraped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from math import inf

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from sluicegate.coordinator.checkpoint_stats import HistogramCounts
from sluicegate.coordinator.facts import FactsSource

__all__ = ["CoordinatorCollector"]


class CoordinatorCollector(Collector):
    """Checkpoint and recovery metrics of one coordinator, labelled by pipeline."""

    def __init__(self, coordinator: FactsSource) -> None:
        self._c = coordinator

    def collect(self) -> Iterator[Metric]:
        facts = self._c.facts()
        stats = facts.checkpoints
        pipeline = facts.pipeline
        fenced = GaugeMetricFamily(
            "sluicegate_coordinator_fenced",
            "1 once a newer coordinator of the pipeline fenced this one (it exports nothing else "
            "then), else 0.",
            labels=["pipeline"],
        )
        fenced.add_metric([pipeline], 1 if facts.fenced else 0)
        yield fenced
        if facts.fenced:
            return

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc, labels=["pipeline"])
            family.add_metric([pipeline], value)
            return family

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=["pipeline"])
            family.add_metric([pipeline], value)
            return family

        yield counter(
            "sluicegate_checkpoints_completed",
            "Checkpoints completed by this coordinator process.",
            stats.completed,
        )
        aborted = CounterMetricFamily(
            "sluicegate_checkpoints_aborted",
            "Checkpoints aborted by this coordinator process, by reason "
            "(declined, timeout, failed, superseded).",
            labels=["pipeline", "reason"],
        )
        for reason, count in stats.aborted.items():
            aborted.add_metric([pipeline, reason.value], count)
        yield aborted
        duration = HistogramMetricFamily(
            "sluicegate_checkpoint_duration_seconds",
            "Seconds from trigger to completion of the checkpoints completed by this process.",
            labels=["pipeline"],
        )
        _add_histogram(duration, [pipeline], stats.duration)
        yield duration
        phases = HistogramMetricFamily(
            "sluicegate_checkpoint_phase_seconds",
            "Per completed checkpoint, the slowest subtask's seconds of each phase "
            "(alignment, sync, async).",
            labels=["pipeline", "phase"],
        )
        for phase, counts in stats.phases.items():
            _add_histogram(phases, [pipeline, phase], counts)
        yield phases
        yield gauge(
            "sluicegate_checkpoint_interval_seconds",
            "The configured checkpoint interval.",
            stats.interval_seconds,
        )
        yield counter(
            "sluicegate_restarts",
            "Global recoveries since the pipeline first started (coordinator restarts included).",
            facts.restarts,
        )
        yield counter(
            "sluicegate_restore_fallbacks",
            "Restores that fell back to an older checkpoint because a file or the manifest of a "
            "newer one was corrupt or missing.",
            facts.restore_fallbacks,
        )
        yield gauge("sluicegate_attempt", "The current attempt.", facts.attempt)
        yield gauge(
            "sluicegate_workers_alive",
            "Workers whose heartbeats arrive in time.",
            len(facts.alive()),
        )
        outcomes = CounterMetricFamily(
            "sluicegate_savepoints",
            "Savepoint requests of this process that ended, by outcome (completed, failed).",
            labels=["pipeline", "outcome"],
        )
        for outcome, count in facts.savepoint_outcomes.items():
            outcomes.add_metric([pipeline, outcome], count)
        yield outcomes
        if (last := facts.last_savepoint) is not None:
            yield gauge(
                "sluicegate_savepoint_last_seconds",
                "Seconds from request to written of the latest savepoint.",
                last[0],
            )
            yield gauge(
                "sluicegate_savepoint_last_size_bytes",
                "Size in bytes of the latest savepoint written.",
                last[1],
            )
        if stats.last_completed_id is not None and stats.last_completed_at is not None:
            yield from _last_completed(stats.last_completed_id, stats.last_completed_at, pipeline)
        if stats.last_full_bytes is not None and stats.last_incremental_bytes is not None:
            sizes = GaugeMetricFamily(
                "sluicegate_checkpoint_size_bytes",
                "Size of the newest completed checkpoint: full state, and what it uploaded.",
                labels=["pipeline", "kind"],
            )
            sizes.add_metric([pipeline, "full"], stats.last_full_bytes)
            sizes.add_metric([pipeline, "incremental"], stats.last_incremental_bytes)
            yield sizes


def _last_completed(checkpoint_id: int, completed_at: float, pipeline: str) -> Iterator[Metric]:
    values = (
        ("sluicegate_last_completed_checkpoint_id", "Id of the newest completed checkpoint.",
         checkpoint_id),
        ("sluicegate_last_completed_checkpoint_timestamp_seconds",
         "Unix time the newest checkpoint completed.", completed_at),
        ("sluicegate_checkpoint_lag_seconds", "Seconds since the newest checkpoint completed.",
         max(time.time() - completed_at, 0.0)),
    )  # fmt: skip
    for name, doc, value in values:
        family = GaugeMetricFamily(name, doc, labels=["pipeline"])
        family.add_metric([pipeline], value)
        yield family


def _add_histogram(family: HistogramMetricFamily, labels: list[str], h: HistogramCounts) -> None:
    buckets = [("+Inf" if bound == inf else repr(bound), float(n)) for bound, n in h.cumulative()]
    family.add_metric(labels, buckets, h.total)

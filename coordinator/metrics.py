"""The coordinator's Prometheus metrics, read from the running coordinator at scrape time.

Every name carries its unit. Register `CoordinatorCollector` in the registry the HTTP API
serves (``registry.register(CoordinatorCollector(coordinator))``); each test brings its own
registry. The observability issue extends this list (durations as histograms, sizes, lag per
partition); the names here are stable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from coordinator.service import Coordinator

__all__ = ["CoordinatorCollector"]


class CoordinatorCollector(Collector):
    """Checkpoint and recovery metrics of one coordinator, labelled by pipeline."""

    def __init__(self, coordinator: Coordinator) -> None:
        self._c = coordinator

    def collect(self) -> Iterator[Metric]:
        c = self._c
        labels = ["pipeline"]
        values = [c.graph.name]

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc, labels=labels)
            family.add_metric(values, value)
            return family

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=labels)
            family.add_metric(values, value)
            return family

        yield counter(
            "sluicegate_checkpoints_completed",
            "Checkpoints completed by this coordinator process.",
            len(c.completed),
        )
        yield counter(
            "sluicegate_checkpoints_aborted",
            "Checkpoints aborted (declined, timed out, failed) recently.",
            len(c.aborts),
        )
        yield counter("sluicegate_restarts", "Global recoveries.", c.restarts)
        yield counter(
            "sluicegate_restore_fallbacks",
            "Restores that fell back to an older checkpoint because a file was corrupt.",
            c.restore_fallbacks,
        )
        yield gauge("sluicegate_attempt", "The current attempt.", c.attempt)
        if c.completed and c.last_completed_at is not None:
            yield gauge(
                "sluicegate_last_completed_checkpoint_id",
                "Id of the newest completed checkpoint.",
                c.completed[-1],
            )
            yield gauge(
                "sluicegate_last_completed_checkpoint_timestamp_seconds",
                "Unix time the newest checkpoint completed.",
                c.last_completed_at,
            )
            yield gauge(
                "sluicegate_checkpoint_lag_seconds",
                "Seconds since the newest checkpoint completed.",
                time.time() - c.last_completed_at,
            )

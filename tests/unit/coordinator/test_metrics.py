"""CoordinatorCollector over a coordinator that is not running (no broker): every metric of
the module docstring, with its labels, parsed back from the exposition format."""

from __future__ import annotations

import dataclasses
import time
import uuid

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sluicegate.coordinator.checkpoint_stats import CheckpointStats
from sluicegate.coordinator.checkpoints.tracker import AbortCause
from sluicegate.coordinator.facts import CoordinatorFacts, WorkerFacts, checkpoint_facts
from sluicegate.coordinator.metrics import CoordinatorCollector
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.protocol.messages import Heartbeat
from sluicegate.operators.storage import open_storage
from sluicegate.testing import word_count
from tests.unit.coordinator.test_checkpoint_stats import manifest


class Known:
    """Facts a coordinator had at some moment, as `CoordinatorCollector` reads them."""

    def __init__(self, facts: CoordinatorFacts) -> None:
        self._facts = facts

    def facts(self, now: float | None = None) -> CoordinatorFacts:
        return self._facts


@pytest.fixture
def coordinator() -> Coordinator:
    return Coordinator(
        word_count(uuid.uuid4().hex[:8]),
        bootstrap="127.0.0.1:1",  # never contacted: the coordinator does not run
        storage=open_storage("memory://"),
        settings=CoordinatorSettings(interval_seconds=2.5),
    )


@pytest.fixture
def registry(coordinator: Coordinator) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(CoordinatorCollector(coordinator))
    return registry


def samples(registry: CollectorRegistry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample, parsed back from the text the HTTP API serves."""
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_fresh_coordinator_exports_zeros_and_no_last_checkpoint(
    coordinator: Coordinator, registry: CollectorRegistry
) -> None:
    p = coordinator.graph.name
    value = registry.get_sample_value
    assert value("sluicegate_checkpoints_completed_total", {"pipeline": p}) == 0
    for reason in ("declined", "timeout", "failed", "superseded"):
        labels = {"pipeline": p, "reason": reason}
        assert value("sluicegate_checkpoints_aborted_total", labels) == 0
    assert value("sluicegate_checkpoint_duration_seconds_count", {"pipeline": p}) == 0
    assert value("sluicegate_checkpoint_interval_seconds", {"pipeline": p}) == 2.5
    assert value("sluicegate_restarts_total", {"pipeline": p}) == 0
    assert value("sluicegate_workers_alive", {"pipeline": p}) == 0
    assert value("sluicegate_checkpoint_lag_seconds", {"pipeline": p}) is None
    assert value("sluicegate_checkpoint_size_bytes", {"pipeline": p, "kind": "full"}) is None


def test_checkpoints_aborts_restarts_and_workers_appear_with_their_labels(
    coordinator: Coordinator,
) -> None:
    p = coordinator.graph.name
    stats = CheckpointStats()
    stats.on_triggered(4, now=50.0)
    stats.on_completed(
        manifest(4, phases={"a#0": (0.2, 0.01, 3.0)}, full=900, uploaded=90, completed_at=1e9),
        now=50.4,
    )
    stats.on_aborted(AbortCause.TIMED_OUT)
    now = time.monotonic()
    facts = dataclasses.replace(
        coordinator.facts(now),
        attempt=3,
        restarts=2,  # two recoveries since the first attempt
        workers=(WorkerFacts("w1", True, now, Heartbeat("w1", "i", 2, 3, ())),),
        checkpoints=checkpoint_facts(stats, in_flight=None, recent_aborts=(), interval_seconds=2.5),
    )
    registry = CollectorRegistry()
    registry.register(CoordinatorCollector(Known(facts)))

    got = samples(registry)

    def at(name: str, **labels: str) -> float:
        return got[(name, frozenset({"pipeline": p, **labels}.items()))]

    assert at("sluicegate_checkpoints_completed_total") == 1
    assert at("sluicegate_checkpoints_aborted_total", reason="timeout") == 1
    assert at("sluicegate_checkpoint_duration_seconds_bucket", le="0.25") == 0
    assert at("sluicegate_checkpoint_duration_seconds_bucket", le="0.5") == 1
    assert at("sluicegate_checkpoint_duration_seconds_bucket", le="+Inf") == 1
    assert at("sluicegate_checkpoint_duration_seconds_sum") == pytest.approx(0.4)
    assert at("sluicegate_checkpoint_phase_seconds_bucket", phase="alignment", le="0.25") == 1
    assert at("sluicegate_checkpoint_phase_seconds_bucket", phase="async", le="2.5") == 0
    assert at("sluicegate_checkpoint_phase_seconds_count", phase="sync") == 1
    assert at("sluicegate_checkpoint_size_bytes", kind="full") == 900
    assert at("sluicegate_checkpoint_size_bytes", kind="incremental") == 90
    assert at("sluicegate_last_completed_checkpoint_id") == 4
    assert at("sluicegate_last_completed_checkpoint_timestamp_seconds") == 1e9
    assert at("sluicegate_checkpoint_lag_seconds") == pytest.approx(time.time() - 1e9, abs=60)
    assert at("sluicegate_restarts_total") == 2
    assert at("sluicegate_attempt") == 3
    assert at("sluicegate_workers_alive") == 1

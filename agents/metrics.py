"""Every metric the agents package exports; one `AgentMetrics` per registry.

Labels: ``pipeline``, ``operator`` (the agent's uid) and, where it applies, ``subtask``.

`AgentMetrics.start` creates every series of a subtask at 0 when its operator opens, for every
value of the labels known up front (run statuses, token kinds, effect kinds and outcomes,
journal statuses): a counter that only appeared once incremented vanished after a restart, and
``rate``/``increase`` missed its first increment.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from sluicegate.agents.journal.entries import EffectKind
from sluicegate.agents.runs.state import RunStatus

__all__ = [
    "BLOB_KINDS",
    "BLOB_RESOLUTIONS",
    "COMPENSATION_OUTCOMES",
    "EFFECT_OUTCOMES",
    "JOURNAL_STATUSES",
    "TOKEN_KINDS",
    "AgentMetrics",
    "StepCounters",
]

TOKEN_KINDS = ("prompt", "completion")
EFFECT_OUTCOMES = ("executed", "replayed", "unknown")
JOURNAL_STATUSES = ("issued", "done")
BLOB_KINDS = ("json", "text")
BLOB_RESOLUTIONS = ("resolved", "out_of_scope", "expired", "erased", "corrupt")
"""Outcomes of reading a handle back (`agents.blobs.references`)."""
COMPENSATION_OUTCOMES = ("compensated", "failed", "skipped")
MEMORY_ACTIONS = ("read", "written", "removed", "erased")
"""What happened to memory entries (`agents.memory`): given to a model call, written,
removed by a rollback, erased with their key."""

_LABELS = ("pipeline", "operator", "subtask")
_lock = threading.Lock()
_by_registry: WeakKeyDictionary[CollectorRegistry, AgentMetrics] = WeakKeyDictionary()


class AgentMetrics:
    """The agent metrics of one registry (several subtasks of one worker share it)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.runs = Gauge(
            "sluicegate_agent_runs",
            "Runs held in state, by status",
            [*_LABELS, "status"],
            registry=registry,
        )
        self.runs_finished = Counter(
            "sluicegate_agent_runs_finished_total",
            "Runs that reached a final status",
            [*_LABELS, "status"],
            registry=registry,
        )
        self.steps = Counter(
            "sluicegate_agent_steps_total", "Model steps taken", _LABELS, registry=registry
        )
        self.tokens = Counter(
            "sluicegate_agent_model_tokens_total",
            "Model tokens used, by kind (prompt, completion)",
            [*_LABELS, "kind"],
            registry=registry,
        )
        self.cost = Counter(
            "sluicegate_agent_model_cost_usd_total",
            "Model cost in US dollars",
            _LABELS,
            registry=registry,
        )
        self.effects = Counter(
            "sluicegate_agent_effects_total",
            "Effects settled through the journal, by kind and outcome "
            "(executed, replayed, unknown)",
            [*_LABELS, "kind", "outcome"],
            registry=registry,
        )
        self.outcome_unknown = Counter(
            "sluicegate_agent_outcome_unknown_total",
            "Effects whose outcome could not be settled: the run failed closed (alert)",
            _LABELS,
            registry=registry,
        )
        self.journal_entries = Gauge(
            "sluicegate_agent_journal_entries",
            "Journal keys held in the local index, by status (issued, done)",
            [*_LABELS, "status"],
            registry=registry,
        )
        self.approvals_waiting = Gauge(
            "sluicegate_agent_approvals_waiting",
            "Runs waiting for a person's approval",
            _LABELS,
            registry=registry,
        )
        self.oldest_approval_wait = Gauge(
            "sluicegate_agent_oldest_approval_wait_seconds",
            "Age of the oldest pending approval request",
            _LABELS,
            registry=registry,
        )

        self.blobs_written = Counter(
            "sluicegate_agent_blobs_written_total",
            "Payloads written to the blob store, by kind (json: a tool result, text: a model "
            "message); a retry finding its payload stored already writes none",
            [*_LABELS, "kind"],
            registry=registry,
        )
        self.blob_bytes_written = Counter(
            "sluicegate_agent_blob_bytes_written_total",
            "Bytes of payloads written to the blob store",
            _LABELS,
            registry=registry,
        )
        self.blob_resolutions = Counter(
            "sluicegate_agent_blob_resolutions_total",
            "Handles read back for a model call, by outcome (resolved, out_of_scope, expired, "
            "erased, corrupt)",
            [*_LABELS, "outcome"],
            registry=registry,
        )
        self.compensations = Counter(
            "sluicegate_agent_compensations_total",
            "Effects a rollback settled, by outcome (compensated, failed, skipped)",
            [*_LABELS, "outcome"],
            registry=registry,
        )
        self.compensation_alerts = Counter(
            "sluicegate_agent_compensation_alerts_total",
            "Effects a rollback cannot undo by itself: a person must act (alert)",
            _LABELS,
            registry=registry,
        )
        self.memory_entries = Counter(
            "sluicegate_agent_memory_entries_total",
            "Memory entries by action: read (given to a model call), written, removed (by a "
            "rollback), erased (with their key)",
            [*_LABELS, "action"],
            registry=registry,
        )
        self.compensations_waiting = Gauge(
            "sluicegate_agent_compensations_waiting",
            "Runs whose rollback waits for a person about an effect it cannot undo (alert)",
            _LABELS,
            registry=registry,
        )

    def start(self, pipeline: str, operator: str, subtask: str) -> None:
        """Create every series of ``subtask`` at 0 (counters) or their current value (gauges)."""
        labels = (pipeline, operator, subtask)
        for status in RunStatus:
            self.runs.labels(*labels, status.value)
            if status.finished:
                self.runs_finished.labels(*labels, status.value)
        for kind in TOKEN_KINDS:
            self.tokens.labels(*labels, kind)
        for effect in EffectKind:
            for outcome in EFFECT_OUTCOMES:
                self.effects.labels(*labels, effect.value, outcome)
        for journal_status in JOURNAL_STATUSES:
            self.journal_entries.labels(*labels, journal_status)
        for blob_kind in BLOB_KINDS:
            self.blobs_written.labels(*labels, blob_kind)
        for resolution in BLOB_RESOLUTIONS:
            self.blob_resolutions.labels(*labels, resolution)
        for outcome in COMPENSATION_OUTCOMES:
            self.compensations.labels(*labels, outcome)
        for action in MEMORY_ACTIONS:
            self.memory_entries.labels(*labels, action)
        for metric in (
            self.blob_bytes_written,
            self.steps,
            self.cost,
            self.outcome_unknown,
            self.approvals_waiting,
            self.oldest_approval_wait,
            self.compensation_alerts,
            self.compensations_waiting,
        ):
            metric.labels(*labels)

    def step_counters(self, pipeline: str, operator: str, subtask: str) -> StepCounters:
        """The counters every step of the subtask increments, bound to its labels once."""
        labels = (pipeline, operator, subtask)
        return StepCounters(
            steps=self.steps.labels(*labels),
            prompt_tokens=self.tokens.labels(*labels, "prompt"),
            completion_tokens=self.tokens.labels(*labels, "completion"),
            cost=self.cost.labels(*labels),
            effects={
                (kind, outcome): self.effects.labels(*labels, kind.value, outcome)
                for kind in EffectKind
                for outcome in EFFECT_OUTCOMES
            },
        )

    @classmethod
    def of(cls, registry: CollectorRegistry | None = None) -> AgentMetrics:
        registry = registry or REGISTRY
        with _lock:
            metrics = _by_registry.get(registry)
            if metrics is None:
                metrics = _by_registry[registry] = cls(registry)
            return metrics


@dataclass(frozen=True, slots=True)
class StepCounters:
    """`AgentMetrics` children of one subtask that each step increments (`step_counters`)."""

    steps: Counter
    prompt_tokens: Counter
    completion_tokens: Counter
    cost: Counter
    effects: dict[tuple[EffectKind, str], Counter]
    """By (effect kind, outcome: one of `EFFECT_OUTCOMES`)."""

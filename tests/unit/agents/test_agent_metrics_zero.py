"""Agent counters exist from the moment the operator opens: every series of the labels known up
front (run statuses, token kinds, effect kinds and outcomes, journal statuses) is exported at
0, in a fresh registry, before anything happened (they vanished after a restart until
incremented, and ``increase`` missed the first increment)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sluicegate.agents.journal import EffectKind
from sluicegate.agents.metrics import (
    BLOB_KINDS,
    BLOB_RESOLUTIONS,
    COMPENSATION_OUTCOMES,
    EFFECT_OUTCOMES,
    JOURNAL_STATUSES,
    MEMORY_ACTIONS,
    TOKEN_KINDS,
)
from sluicegate.agents.runs.state import RunStatus
from tests.unit.agents.test_agent_operator import LABELS, Desk


def exported(registry: CollectorRegistry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.name.endswith("_created")
    }


def key(name: str, **extra: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset({**LABELS, **extra}.items())


async def test_agent_counters_are_zero_after_open_in_a_fresh_registry() -> None:
    desk = Desk(["done"])
    assert desk.registry is not None
    await desk.open()

    samples = exported(desk.registry)

    wanted = [
        key("sluicegate_agent_steps_total"),
        key("sluicegate_agent_model_cost_usd_total"),
        key("sluicegate_agent_outcome_unknown_total"),
        key("sluicegate_agent_approvals_waiting"),
        key("sluicegate_agent_oldest_approval_wait_seconds"),
        key("sluicegate_agent_blob_bytes_written_total"),
        *(key("sluicegate_agent_blobs_written_total", kind=k) for k in BLOB_KINDS),
        *(key("sluicegate_agent_blob_resolutions_total", outcome=o) for o in BLOB_RESOLUTIONS),
        key("sluicegate_agent_compensation_alerts_total"),
        key("sluicegate_agent_compensations_waiting"),
        *(key("sluicegate_agent_compensations_total", outcome=o) for o in COMPENSATION_OUTCOMES),
        *(key("sluicegate_agent_memory_entries_total", action=a) for a in MEMORY_ACTIONS),
        *(key("sluicegate_agent_model_tokens_total", kind=k) for k in TOKEN_KINDS),
        *(
            key("sluicegate_agent_effects_total", kind=kind.value, outcome=outcome)
            for kind in EffectKind
            for outcome in EFFECT_OUTCOMES
        ),
        *(key("sluicegate_agent_journal_entries", status=s) for s in JOURNAL_STATUSES),
        *(key("sluicegate_agent_runs", status=s.value) for s in RunStatus),
        *(
            key("sluicegate_agent_runs_finished_total", status=s.value)
            for s in RunStatus
            if s.finished
        ),
    ]
    missing = [w for w in wanted if w not in samples]
    assert missing == []
    assert all(samples[w] == 0 for w in wanted), {w: samples[w] for w in wanted if samples[w]}

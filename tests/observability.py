"""What the observability tests share: the closed list of exported metrics, and the PromQL of
the alert rules and the Grafana dashboard in ``deploy/``.

`EXPORTED_METRICS` is the one list of series names sluicegate exports (histograms by their
``_bucket``/``_sum``/``_count`` series). A dashboard or rule naming anything else fails
tests/unit/test_observability_config.py; tests/e2e/test_prometheus.py proves, against a real
Prometheus scraping a real pipeline, that the dashboard's queries find these series.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "AGENT_METRICS",
    "COORDINATOR_METRICS",
    "DASHBOARD",
    "EXPORTED_METRICS",
    "PROMETHEUS_METRICS",
    "RULES",
    "RULE_TESTS",
    "WORKER_METRICS",
    "DashboardTarget",
    "dashboard_targets",
    "load_dashboard",
    "load_rules",
    "metric_names",
]

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
RULES = sorted((PROMETHEUS_DIR / "rules").glob("*.yml"))
RULE_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "sluicegate.json"


def _histogram(name: str) -> set[str]:
    return {f"{name}_bucket", f"{name}_sum", f"{name}_count"}


# The coordinator's /metrics (label `pipeline`).
COORDINATOR_METRICS = frozenset(
    {
        "sluicegate_checkpoints_completed_total",
        "sluicegate_checkpoints_aborted_total",  # reason: declined|timeout|failed|superseded
        "sluicegate_restarts_total",
        "sluicegate_restore_fallbacks_total",
        "sluicegate_attempt",
        "sluicegate_last_completed_checkpoint_id",
        "sluicegate_last_completed_checkpoint_timestamp_seconds",
        "sluicegate_checkpoint_lag_seconds",
        *_histogram("sluicegate_checkpoint_duration_seconds"),
        *_histogram("sluicegate_checkpoint_phase_seconds"),  # phase: alignment|sync|async
        "sluicegate_checkpoint_size_bytes",  # kind: incremental|full
        "sluicegate_checkpoint_interval_seconds",
        "sluicegate_workers_alive",
        "sluicegate_savepoints_total",  # outcome: completed|failed
        "sluicegate_savepoint_last_seconds",
        "sluicegate_savepoint_last_size_bytes",
        "sluicegate_coordinator_fenced",
    }
)
# A worker's /metrics (labels `pipeline`, `operator`, `subtask`), agents' metrics aside.
_WORKER = {
    "sluicegate_records_in_total",
    "sluicegate_records_out_total",
    "sluicegate_dead_letters_total",
    "sluicegate_state_materialized_bytes_total",
    "sluicegate_barrier_buffered_records",
    "sluicegate_consumer_lag_records",  # topic, partition
    *_histogram("sluicegate_restore_duration_seconds"),
    *_histogram("sluicegate_subtask_checkpoint_seconds"),  # phase
}
# agents/metrics.py, served by the workers that host agents.
AGENT_METRICS = frozenset(
    {
        "sluicegate_agent_runs",
        "sluicegate_agent_runs_finished_total",
        "sluicegate_agent_steps_total",
        "sluicegate_agent_model_tokens_total",
        "sluicegate_agent_model_cost_usd_total",
        "sluicegate_agent_effects_total",
        "sluicegate_agent_outcome_unknown_total",
        "sluicegate_agent_journal_entries",
        "sluicegate_agent_approvals_waiting",
        "sluicegate_agent_oldest_approval_wait_seconds",
        "sluicegate_agent_blobs_written_total",
        "sluicegate_agent_blob_bytes_written_total",
        "sluicegate_agent_blob_resolutions_total",
        "sluicegate_agent_compensations_total",
        "sluicegate_agent_compensation_alerts_total",
        "sluicegate_agent_compensations_waiting",
        "sluicegate_agent_memory_entries_total",
    }
)
# Everything a worker serves: labels `pipeline` and `operator` at least.
WORKER_METRICS = frozenset(_WORKER | AGENT_METRICS)
EXPORTED_METRICS = COORDINATOR_METRICS | WORKER_METRICS
# Series Prometheus writes itself for every target.
PROMETHEUS_METRICS = frozenset({"up"})

_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
    | {"and", "or", "unless", "inf", "nan"}
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
# Durations (5m, 1h30m), then hex and decimal numbers (0.99, 1e3).
_NUMBER = re.compile(
    r"(?<![\w:])(?:(?:\d+(?:ms|[smhdwy]))+|0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)"
)
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not functions, labels or keywords).

    Enough for the expressions in deploy/: strings, label matchers, ranges and label lists are
    removed first; an identifier followed by ``(`` is a function or aggregation.
    """
    text = _STRING.sub('""', expr)
    text = _BRACES.sub(" ", text)
    text = _LABEL_LIST.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        word = match.group(0)
        if word.lower() in _KEYWORDS or text[match.end() :].lstrip().startswith("("):
            continue
        names.add(word)
    return names


def load_rules(path: Path) -> list[dict[str, Any]]:
    """Every rule of a Prometheus rule file, in order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [rule for group in data["groups"] for rule in group["rules"]]


def load_dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


@dataclass(frozen=True, slots=True)
class DashboardTarget:
    """One query of one panel."""

    panel: str
    ref_id: str
    expr: str

    def resolved(self, variables: dict[str, str]) -> str:
        """The expression with Grafana variables (``$name`` or ``${name}``) replaced."""
        expr = self.expr
        for name in sorted(variables, key=len, reverse=True):
            expr = expr.replace("${" + name + "}", variables[name])
            expr = expr.replace("$" + name, variables[name])
        return expr


def dashboard_targets(dashboard: dict[str, Any]) -> Iterator[DashboardTarget]:
    """Every query target of every panel, rows' nested panels included."""
    for panel in _panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            yield DashboardTarget(panel["title"], target["refId"], target["expr"])


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))

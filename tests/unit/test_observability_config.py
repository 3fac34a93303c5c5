"""The Prometheus and Grafana files in deploy/: valid, their alerts tested, their queries naming
only metrics sluicegate exports.

* Prometheus's own ``promtool`` checks the compose config (with the rules it loads) and the
  rule files, and runs deploy/prometheus/tests/, where each alert fires on a synthetic unhealthy
  series and stays quiet on a healthy one. ``.ci/install-prometheus`` installs promtool;
  without it these tests skip on a developer's machine and fail under CI (``CI`` set).
* The dashboard is loaded into grafana-foundation-sdk's model of a Grafana dashboard (generated
  from Grafana's schema) and written back: a field the schema does not know is dropped, so the
  round trip must lose nothing, and panels, targets and expressions must come back as given.
* Every PromQL expression names only metrics in `tests.observability.EXPORTED_METRICS`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import prometheus
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel, RowPanel
from prometheus_client import CollectorRegistry

from sluicegate.agents.metrics import AgentMetrics
from tests.observability import (
    AGENT_METRICS,
    COORDINATOR_METRICS,
    DASHBOARD,
    EXPORTED_METRICS,
    PROMETHEUS_DIR,
    PROMETHEUS_METRICS,
    ROOT,
    RULE_TESTS,
    RULES,
    dashboard_targets,
    load_dashboard,
    load_rules,
    metric_names,
)

DOCS = ROOT / "docs" / "observability.md"
# Alerts whose unit tests the observability issue asks for by name.
REQUIRED_ALERT_TESTS = {"SluicegateCheckpointLagHigh", "SluicegateCheckpointsAborted"}


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        message = "promtool not found: run .ci/install-prometheus"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must check the Prometheus files)", pytrace=False)
        pytest.skip(message)
    return found


def _run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [_promtool(), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def _alerts() -> Iterator[dict[str, Any]]:
    for path in RULES:
        yield from (rule for rule in load_rules(path) if "alert" in rule)


# -- Prometheus -----------------------------------------------------------------------------


def test_compose_prometheus_config_and_the_rules_it_loads_are_valid(tmp_path: Path) -> None:
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text(encoding="utf-8"))
    # Mounted at /etc/prometheus/rules in compose; point the copy at the repository's files.
    assert config["rule_files"] == ["/etc/prometheus/rules/*.yml"]
    config["rule_files"] = [str(PROMETHEUS_DIR / "rules" / "*.yml")]
    copy = tmp_path / "prometheus.yml"
    copy.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = _run_promtool("check", "config", str(copy))
    assert f"SUCCESS: {len(RULES)} rule files found" in done.stdout + done.stderr


def test_rule_files_are_valid() -> None:
    assert RULES, "no rule files in deploy/prometheus/rules"
    _run_promtool("check", "rules", *map(str, RULES))


def test_alerts_fire_on_unhealthy_series_and_stay_quiet_on_healthy_ones() -> None:
    assert RULE_TESTS, "no rule tests in deploy/prometheus/tests"
    _run_promtool("test", "rules", *map(str, RULE_TESTS))


def test_every_alert_has_a_test_that_fires_it_and_one_that_does_not() -> None:
    fired: set[str] = set()
    quiet: set[str] = set()
    for path in RULE_TESTS:
        for case in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]:
            for check in case.get("alert_rule_test", []):
                (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    alerts = {rule["alert"] for rule in _alerts()}
    assert alerts >= REQUIRED_ALERT_TESTS
    assert alerts - fired == set(), "alerts never shown to fire"
    assert alerts - quiet == set(), "alerts never shown to stay quiet"


def test_every_alert_says_what_to_do_and_links_its_docs_section() -> None:
    headings = {
        _anchor(line.lstrip("#").strip())
        for line in DOCS.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }
    for rule in _alerts():
        name, annotations = rule["alert"], rule.get("annotations", {})
        assert {"summary", "description", "runbook"} <= set(annotations), name
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert annotations["runbook"] == f"docs/observability.md#{name.lower()}", name
        assert name.lower() in headings, f"docs/observability.md has no section {name}"


def test_kubernetes_example_labels_jobs_as_the_alerts_expect() -> None:
    monitor = yaml.safe_load(
        (ROOT / "deploy/k8s/components/monitoring/podmonitor.yaml").read_text(encoding="utf-8")
    )
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["kind"] == "PodMonitor"
    endpoints = monitor["spec"]["podMetricsEndpoints"]
    assert {e["port"] for e in endpoints} == {"metrics"}  # the API port would need a token
    for endpoint in endpoints:
        job = [r for r in endpoint["relabelings"] if r.get("targetLabel") == "job"]
        assert len(job) == 1
        assert job[0]["replacement"] == "sluicegate-$1"  # SluicegateTargetDown: sluicegate-.*


# -- Grafana --------------------------------------------------------------------------------


def _round_trip(dashboard: dict[str, Any]) -> tuple[Dashboard, dict[str, Any]]:
    register_default_plugins()
    model = Dashboard.from_json(dashboard)
    written: dict[str, Any] = json.loads(json.dumps(model, cls=JSONEncoder))
    return model, written


def _lost(given: Any, written: Any, path: str = "") -> Iterator[str]:
    """Paths of what ``given`` holds that ``written`` lacks or holds differently (defaults the
    model adds to ``written`` are fine)."""
    if isinstance(given, dict) and isinstance(written, dict):
        for key, value in given.items():
            if key not in written:
                yield f"{path}/{key} (dropped)"
            else:
                yield from _lost(value, written[key], f"{path}/{key}")
    elif isinstance(given, list) and isinstance(written, list) and len(given) == len(written):
        for index, (a, b) in enumerate(zip(given, written, strict=True)):
            yield from _lost(a, b, f"{path}[{index}]")
    elif given != written:
        yield f"{path}: {given!r} became {written!r}"


def test_dashboard_loses_nothing_in_a_round_trip_through_grafanas_schema() -> None:
    dashboard = load_dashboard()
    _, written = _round_trip(dashboard)
    assert list(_lost(dashboard, written)) == []


def test_dashboard_model_keeps_panels_targets_and_variables() -> None:
    dashboard = load_dashboard()
    model, _ = _round_trip(dashboard)
    panels = [p for p in model.panels or [] if isinstance(p, Panel)]
    given = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert [(p.type_val, p.title) for p in panels] == [(p["type"], p["title"]) for p in given]
    assert len(model.panels or []) - len(panels) == sum(
        isinstance(p, RowPanel) for p in model.panels or []
    )
    for parsed, raw in zip(panels, given, strict=True):
        queries = []
        for target in parsed.targets or []:
            assert isinstance(target, prometheus.Dataquery), parsed.title
            queries.append((target.ref_id, target.expr, target.legend_format))
        assert queries == [(t["refId"], t["expr"], t["legendFormat"]) for t in raw["targets"]]
        assert parsed.description, f"panel {parsed.title!r} needs a description"
    variables = {v.name: v.query for v in model.templating.list_val or []}
    assert variables["pipeline"] == "label_values(sluicegate_attempt, pipeline)"
    assert variables["operator"] == (
        'label_values(sluicegate_records_in_total{pipeline="$pipeline"}, operator)'
    )


def test_dashboard_panels_do_not_overlap_and_have_unique_ids() -> None:
    panels = load_dashboard()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    taken: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not cells & taken, f"{panel['title']!r} overlaps another panel"
        taken |= cells


def test_every_dashboard_query_selects_the_chosen_pipeline_and_operators() -> None:
    for target in dashboard_targets(load_dashboard()):
        for selector in re.findall(r"(sluicegate_\w+)(\{[^}]*\})?", target.expr):
            name, matchers = selector
            where = f"{target.panel} {target.ref_id}: {name}"
            assert 'pipeline="$pipeline"' in matchers, where
            if name not in COORDINATOR_METRICS:
                assert 'operator=~"$operator"' in matchers, where


# -- The closed list of metrics -------------------------------------------------------------


def _expressions() -> Iterator[tuple[str, str]]:
    for path in RULES:
        for rule in load_rules(path):
            yield f"{path.name}: {rule.get('alert') or rule.get('record')}", rule["expr"]
    for target in dashboard_targets(load_dashboard()):
        yield f"{DASHBOARD.name}: {target.panel} {target.ref_id}", target.expr


def test_every_expression_names_only_exported_metrics() -> None:
    unknown = {
        where: sorted(names)
        for where, expr in _expressions()
        if (names := metric_names(expr) - EXPORTED_METRICS - PROMETHEUS_METRICS)
    }
    assert unknown == {}


def test_dashboard_shows_what_the_design_asks_for() -> None:
    used = set().union(*(metric_names(t.expr) for t in dashboard_targets(load_dashboard())))
    asked = {
        "sluicegate_checkpoint_lag_seconds",
        "sluicegate_checkpoint_phase_seconds_bucket",
        "sluicegate_checkpoint_size_bytes",
        "sluicegate_checkpoints_completed_total",
        "sluicegate_checkpoints_aborted_total",
        "sluicegate_restarts_total",
        "sluicegate_restore_duration_seconds_bucket",
        "sluicegate_consumer_lag_records",
        "sluicegate_records_in_total",
        "sluicegate_records_out_total",
        "sluicegate_agent_runs",
        "sluicegate_agent_approvals_waiting",
        "sluicegate_agent_model_tokens_total",
        "sluicegate_agent_model_cost_usd_total",
        "sluicegate_dead_letters_total",
    }
    assert asked - used == set()


def test_closed_list_matches_the_agent_metrics_the_code_declares() -> None:
    registry = CollectorRegistry()
    AgentMetrics(registry)
    declared = {
        family.name + ("_total" if family.type == "counter" else "")
        for family in registry.collect()
    }
    assert declared == AGENT_METRICS


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        (
            'histogram_quantile(0.9, sum by (le) (rate(a_bucket{x="1"}[$__rate_interval])))',
            {"a_bucket"},
        ),
        ("max by (pipeline) (a) > on (pipeline) 3 * max by (pipeline) (b)", {"a", "b"}),
        ('a unless on (p) b or c{l=~"d|e"} offset 1h30m > bool 1e3', {"a", "b", "c"}),
        ('up{job=~"sluicegate-.*"} == 0', {"up"}),
        ("60 * sum(rate(x:y_total[5m]))", {"x:y_total"}),
    ],
)
def test_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")

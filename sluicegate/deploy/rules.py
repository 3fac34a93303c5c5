"""The alert rules (``deploy/prometheus/rules/sluicegate.yml``) as a Prometheus Operator
``PrometheusRule``: ``python -m sluicegate.deploy.rules`` prints the monitoring component's
``prometheusrule.yaml`` (kustomize reads no file outside a kustomization's folder, so the
component holds a generated copy; a test checks that it agrees with the rules file)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from sluicegate.deploy.manifests import Manifest

__all__ = ["HEADER", "prometheus_rule"]

HEADER = """\
# The alert rules of deploy/prometheus/rules/sluicegate.yml for the Prometheus Operator: the
# same groups, generated (kustomize may not read files outside this folder). Do not edit; after
# a change to the rules file, regenerate with
#   uv run python -m sluicegate.deploy.rules > deploy/k8s/components/monitoring/prometheusrule.yaml
# (tests/unit/sluicegate/deploy checks that the two agree). What each alert means:
# docs/observability.md.
"""


def prometheus_rule(rules_file_text: str) -> Manifest:
    """A ``PrometheusRule`` named ``sluicegate`` holding the rules file's groups."""
    groups = yaml.safe_load(rules_file_text)["groups"]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "sluicegate",
            "labels": {
                "app.kubernetes.io/name": "sluicegate",
                "app.kubernetes.io/part-of": "sluicegate",
            },
        },
        "spec": {"groups": groups},
    }


def main() -> None:
    """Print the component's ``prometheusrule.yaml`` from the repository's rules file."""
    rules = Path(__file__).resolve().parents[2] / "deploy/prometheus/rules/sluicegate.yml"
    rule = prometheus_rule(rules.read_text(encoding="utf-8"))
    sys.stdout.write(HEADER + yaml.safe_dump(rule, sort_keys=False, width=100))


if __name__ == "__main__":
    main()

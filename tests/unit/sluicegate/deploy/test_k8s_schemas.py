"""Every Kubernetes object we ship is valid against the API's schemas, offline.

The kustomize base, the example overlay (built by a real kustomize) and `render`'s output are
checked with ``kubernetes-validate`` in strict mode (an unknown field fails, as a typo would
be dropped silently by the API server) for the oldest and the newest Kubernetes we support.
The Prometheus Operator's kinds have no schema there: they are checked in
test_k8s_wiring.py and by promtool (the rules).
"""

from __future__ import annotations

import kubernetes_validate
import pytest

from sluicegate.deploy import render
from tests.unit.sluicegate.deploy.example import EXAMPLE
from tests.unit.sluicegate.deploy.kustomize import Manifest, build

VERSIONS = ["1.30.0", "1.37.0"]
"""The oldest Kubernetes we claim to support, and the newest the package has schemas of."""

OPERATOR_KINDS = {"PodMonitor", "PrometheusRule"}


def _objects(source: str) -> list[Manifest]:
    return render(EXAMPLE) if source == "render" else build(source)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("source", ["base", "overlays/example", "render"])
def test_every_object_is_valid_for_kubernetes(source: str, version: str) -> None:
    objects = _objects(source)
    checked = 0
    for obj in objects:
        if obj["kind"] in OPERATOR_KINDS:
            assert obj["apiVersion"] == "monitoring.coreos.com/v1"
            continue
        kubernetes_validate.validate(obj, version, strict=True)
        checked += 1
    assert checked >= 6  # ConfigMap, Deployment, StatefulSet, two Services, PodDisruptionBudget


def test_validation_would_catch_a_typo() -> None:
    """The check has teeth: a misspelt field and a wrong type are both refused."""
    worker = next(o for o in build("base") if o["kind"] == "StatefulSet")
    worker["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, VERSIONS[-1], strict=True)
    worker = next(o for o in build("base") if o["kind"] == "StatefulSet")
    worker["spec"]["replicas"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, VERSIONS[-1], strict=True)

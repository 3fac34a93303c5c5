"""The manifests hang together and mean what the engine needs, checked on what kustomize
builds from the example overlay and on what `render` prints.

Schemas (test_k8s_schemas.py) cannot see that a Service selects no pod, that a probe names a
port the container lacks, that an argument is a flag the CLI does not have, or that the
workers cannot host the pipeline: these tests do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from sluicegate.cli.loader import load_graph
from sluicegate.cli.main import _parser
from sluicegate.cli.settings_reference import environment_variables
from sluicegate.deploy import render
from tests.unit.sluicegate.deploy.example import EXAMPLE
from tests.unit.sluicegate.deploy.kustomize import ROOT, Manifest, build, find

ARGS_ONLY = {"SLUICEGATE_PIPELINE"}
"""Variables the manifests set only to expand them in arguments (``$(SLUICEGATE_PIPELINE)``)."""


@pytest.fixture(params=["overlays/example", "render"])
def objects(request: pytest.FixtureRequest) -> list[Manifest]:
    return render(EXAMPLE) if request.param == "render" else build(request.param)


def _workloads(objects: list[Manifest]) -> Iterator[Manifest]:
    yield from (o for o in objects if o["kind"] in {"Deployment", "StatefulSet"})


def _pod(workload: Manifest) -> dict[str, Any]:
    pod: dict[str, Any] = workload["spec"]["template"]
    return pod


def _container(workload: Manifest) -> dict[str, Any]:
    containers = _pod(workload)["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _environment(objects: list[Manifest], workload: Manifest) -> dict[str, str]:
    """The container's variables as the kubelet sets them: envFrom ConfigMaps, then env
    (values, or ``<ref>`` for fieldRef and secretKeyRef)."""
    container = _container(workload)
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(find(objects, "ConfigMap", source["configMapRef"]["name"])["data"])
    for var in container.get("env", []):
        env[var["name"]] = var.get("value", "<ref>")
    return env


def _expanded_args(objects: list[Manifest], workload: Manifest) -> list[str]:
    env = _environment(objects, workload)
    args: list[str] = _container(workload)["args"]
    for arg in args:
        for name in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg):
            assert name in env, f"{arg} refers to ${name}, which the container does not define"
    return [re.sub(r"\$\(([A-Za-z_0-9]+)\)", lambda m: env[m.group(1)], arg) for arg in args]


def test_the_cli_accepts_every_workload_s_arguments(objects: list[Manifest]) -> None:
    """Each container's arguments, variables expanded, parse with the `sluicegate` parser."""
    for workload in _workloads(objects):
        args = _parser().parse_args(_expanded_args(objects, workload))
        assert args.pipeline == EXAMPLE.pipeline
        load_graph(args.pipeline)  # importable: the image holds the same packages


def test_one_coordinator_recreated_never_two(objects: list[Manifest]) -> None:
    coordinator = find(objects, "Deployment", "sluicegate-coordinator")
    assert coordinator["spec"]["replicas"] == 1
    assert coordinator["spec"]["strategy"] == {"type": "Recreate"}
    args = _parser().parse_args(_expanded_args(objects, coordinator))
    assert args.http_host == "0.0.0.0"  # the Service and the probes reach it


def test_checkpoints_go_to_s3_shared_by_every_pod(objects: list[Manifest]) -> None:
    for workload in _workloads(objects):
        assert _environment(objects, workload)["SLUICEGATE_STORAGE_URL"].startswith("s3://")


def test_a_worker_is_its_pod_with_its_own_volume(objects: list[Manifest]) -> None:
    """Worker id = pod name (stable across restarts), local state on the pod's volume."""
    workers = find(objects, "StatefulSet", "sluicegate-worker")
    container = _container(workers)
    args = _parser().parse_args(_expanded_args(objects, workers))
    assert args.worker_id == "<ref>"
    [pod_name] = [v for v in container["env"] if v["name"] == "POD_NAME"]
    assert pod_name["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert "--worker-id=$(POD_NAME)" in container["args"]
    [claim] = workers["spec"]["volumeClaimTemplates"]
    state_dir = _environment(objects, workers)["SLUICEGATE_STATE_DIR"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == state_dir
    assert _pod(workers)["spec"]["securityContext"]["fsGroup"] == 10001  # writable volume


def test_the_workers_host_every_subtask_with_one_down(objects: list[Manifest]) -> None:
    workers = find(objects, "StatefulSet", "sluicegate-worker")
    args = _parser().parse_args(_expanded_args(objects, workers))
    subtasks = len(load_graph(args.pipeline).subtasks())
    replicas = workers["spec"]["replicas"]
    assert replicas == EXAMPLE.workers
    assert (replicas - 1) * args.slots >= subtasks
    budget = find(objects, "PodDisruptionBudget", "sluicegate-worker")
    assert budget["spec"]["maxUnavailable"] == 1


def test_services_and_the_budget_select_the_right_pods(objects: list[Manifest]) -> None:
    pods = {w["metadata"]["name"]: _pod(w) for w in _workloads(objects)}
    for service in (o for o in objects if o["kind"] == "Service"):
        selected = [
            name
            for name, pod in pods.items()
            if _selects(service["spec"]["selector"], pod["metadata"]["labels"])
        ]
        assert selected == [service["metadata"]["name"]], service["metadata"]["name"]
        ports = {p["name"] for c in pods[selected[0]]["spec"]["containers"] for p in c["ports"]}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports
    budget = find(objects, "PodDisruptionBudget", "sluicegate-worker")
    selector = budget["spec"]["selector"]["matchLabels"]
    assert [n for n, p in pods.items() if _selects(selector, p["metadata"]["labels"])] == [
        "sluicegate-worker"
    ]


def test_probes_ask_the_process_on_a_port_it_has(objects: list[Manifest]) -> None:
    for workload in _workloads(objects):
        container = _container(workload)
        ports = {p["name"] for p in container["ports"]}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            check = container[probe]["httpGet"]
            assert check["path"] == "/healthz", (workload["metadata"]["name"], probe)
            assert check["port"] in ports


def test_every_container_requests_resources_and_runs_unprivileged(
    objects: list[Manifest],
) -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "--uid 10001" in dockerfile
    for workload in _workloads(objects):
        container = _container(workload)
        assert {"cpu", "memory"} <= set(container["resources"]["requests"])
        assert "memory" in container["resources"]["limits"]
        assert container["image"] == EXAMPLE.image
        pod = _pod(workload)["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 10001
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert pod["automountServiceAccountToken"] is False


def test_every_reference_resolves(objects: list[Manifest]) -> None:
    """ConfigMaps and Secrets named by the pods exist with those keys (a Secret the overlay
    leaves out only where marked optional: the Kafka CA)."""
    secrets = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Secret"}
    rendered = not secrets
    for workload in _workloads(objects):
        pod = _pod(workload)["spec"]
        for var in _container(workload).get("env", []):
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref is None or rendered:  # render prints no Secret: the cluster has its own
                continue
            assert ref["key"] in secrets[ref["name"]]["data"], var["name"]
        for volume in pod.get("volumes", []):
            if "secret" in volume and not rendered:
                name = volume["secret"]["secretName"]
                assert name in secrets or volume["secret"].get("optional") is True, name
                for item in volume["secret"].get("items", []):
                    assert item["key"] in secrets[name]["data"]


def test_every_setting_is_read_by_sluicegate_or_a_marked_placeholder(
    objects: list[Manifest],
) -> None:
    known = environment_variables()
    for workload in _workloads(objects):
        names = {n for n in _environment(objects, workload) if n.startswith("SLUICEGATE_")}
        unknown = names - known - ARGS_ONLY
        assert unknown == set(), f"{workload['metadata']['name']} sets {sorted(unknown)}"


def test_prometheus_finds_every_pod_on_a_named_port(objects: list[Manifest]) -> None:
    monitor = find(objects, "PodMonitor", "sluicegate")
    selector = monitor["spec"]["selector"]["matchLabels"]
    endpoints = {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]}
    for workload in _workloads(objects):
        pod = _pod(workload)
        assert _selects(selector, pod["metadata"]["labels"])
        ports = {p["name"] for p in _container(workload)["ports"]}
        assert ports & endpoints, workload["metadata"]["name"]


@pytest.mark.parametrize("source", ["base", "overlays/example", "render"])
def test_kafka_security_settings_are_consistent(source: str) -> None:
    """As issue 13's KafkaSettings checks at start: a SASL protocol has a mechanism and only
    then; a CA file only with TLS, and every pod mounts it from the Secret it names."""
    objects = render(EXAMPLE) if source == "render" else build(source)
    data = find(objects, "ConfigMap", "sluicegate-config")["data"]
    protocol = data["SLUICEGATE_KAFKA_SECURITY_PROTOCOL"]
    assert protocol in {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
    assert protocol.startswith("SASL_") == ("SLUICEGATE_KAFKA_SASL_MECHANISM" in data)
    cafile = data.get("SLUICEGATE_KAFKA_SSL_CAFILE")
    if cafile is None:
        return
    assert protocol in {"SSL", "SASL_SSL"}
    for workload in _workloads(objects):
        container = _container(workload)
        volumes = {v["name"]: v for v in _pod(workload)["spec"]["volumes"]}
        [mount] = [m for m in container["volumeMounts"] if cafile.startswith(m["mountPath"] + "/")]
        assert volumes[mount["name"]]["secret"]["secretName"] == "sluicegate-kafka-tls"

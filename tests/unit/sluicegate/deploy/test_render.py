"""`sluicegate deploy render` prints what kustomize builds from an overlay of the same values,
computes the workers' slots from the pipeline, and refuses what cannot work."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from sluicegate.cli.main import _parser
from sluicegate.deploy import render, slots_for, to_yaml
from sluicegate.deploy.rules import prometheus_rule
from sluicegate.operators.exceptions import ConfigError
from tests.unit.sluicegate.deploy.example import EXAMPLE
from tests.unit.sluicegate.deploy.kustomize import ROOT, Manifest, build, find

PIPELINE = "sluicegate.demos.wordcount:demo_graph"  # four subtasks


def _by_identity(objects: list[Manifest]) -> dict[tuple[str, str], Manifest]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_render_prints_what_kustomize_builds_from_the_example_overlay() -> None:
    """The same objects, field for field, but the Namespace and the Secret (a cluster brings
    its own) and the hash kustomize appends to the generated Secret's name."""
    built = [o for o in build("overlays/example") if o["kind"] not in {"Namespace", "Secret"}]
    text = re.sub(
        r"sluicegate-secrets-[a-z0-9]{10}\b", "sluicegate-secrets", yaml.safe_dump_all(built)
    )
    expected = _by_identity([doc for doc in yaml.safe_load_all(text) if doc])
    rendered = _by_identity(list(yaml.safe_load_all(to_yaml(render(EXAMPLE)))))
    assert set(rendered) == set(expected)
    for identity, obj in expected.items():
        assert rendered[identity] == obj, identity


def test_the_flags_in_the_overlay_s_comment_render_the_example() -> None:
    header = (ROOT / "deploy/k8s/overlays/example/kustomization.yaml").read_text()
    command = re.search(r"sluicegate deploy render (.*?)\n(?!#  )", header, re.S)
    assert command is not None
    argv = command.group(1).replace("\\\n#", "").split()
    args = _parser().parse_args(["deploy", "render", *argv])
    assert (args.workers, args.image, args.namespace) == (3, EXAMPLE.image, EXAMPLE.namespace)
    assert (args.kafka_bootstrap, args.storage_url) == (
        EXAMPLE.kafka_bootstrap,
        EXAMPLE.storage_url,
    )
    assert (args.region, args.kafka_security_protocol) == (EXAMPLE.region, "SASL_SSL")
    assert (args.kafka_sasl_mechanism, args.kafka_tls_ca) == ("SCRAM-SHA-512", True)
    assert args.monitoring


@pytest.mark.parametrize(
    ("subtasks", "workers", "slots"),
    [(4, 1, 4), (4, 2, 4), (4, 3, 2), (4, 5, 1), (5, 3, 3), (12, 4, 4), (1, 8, 1)],
)
def test_slots_leave_room_for_one_worker_down(subtasks: int, workers: int, slots: int) -> None:
    assert slots_for(subtasks, workers) == slots
    assert max(workers - 1, 1) * slots >= subtasks


def test_settings_refuse_what_cannot_work() -> None:
    with pytest.raises(ConfigError, match="--workers"):
        dataclasses.replace(EXAMPLE, workers=0)
    with pytest.raises(ConfigError, match="S3"):
        dataclasses.replace(EXAMPLE, storage_url="file:///var/lib/sluicegate/checkpoints")
    with pytest.raises(ConfigError, match="pin"):
        dataclasses.replace(EXAMPLE, image="registry.example.com:5000/sluicegate")
    dataclasses.replace(EXAMPLE, image="registry.example.com:5000/sluicegate@sha256:" + "0" * 64)
    # As issue 13's KafkaSettings refuses them at start: a SASL protocol without a mechanism,
    # a mechanism without SASL, a CA without TLS.
    with pytest.raises(ConfigError, match="mechanism"):
        dataclasses.replace(EXAMPLE, kafka_sasl_mechanism=None)
    with pytest.raises(ConfigError, match="mechanism"):
        dataclasses.replace(EXAMPLE, kafka_security_protocol="SSL")
    with pytest.raises(ConfigError, match="--kafka-tls-ca"):
        dataclasses.replace(EXAMPLE, kafka_security_protocol="PLAINTEXT", kafka_sasl_mechanism=None)


def test_an_s3_compatible_endpoint_over_http_is_allowed_explicitly() -> None:
    objects = render(dataclasses.replace(EXAMPLE, s3_endpoint="http://minio.storage:9000"))
    data = find(objects, "ConfigMap", "sluicegate-config")["data"]
    assert data["AWS_ENDPOINT_URL"] == "http://minio.storage:9000"
    assert data["AWS_ALLOW_HTTP"] == "true"
    assert "AWS_ENDPOINT_URL" not in find(render(EXAMPLE), "ConfigMap", "sluicegate-config")["data"]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    args = _parser().parse_args(
        ["deploy", "render", "--pipeline", PIPELINE, "--image", "sluicegate:0.1.0",
         "--kafka-bootstrap", "kafka:9092", "--storage-url", "s3://b/p", *argv]
    )  # fmt: skip
    code: int = args.run(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_sizes_the_workers_from_the_pipeline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run(capsys, "--workers", "3")
    assert (code, err) == (0, "")
    workers = find(list(yaml.safe_load_all(out)), "StatefulSet", "sluicegate-worker")
    assert workers["spec"]["replicas"] == 3
    assert "--slots=2" in workers["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {o["kind"] for o in yaml.safe_load_all(out)}.isdisjoint({"PodMonitor", "Secret"})


def test_the_command_passes_the_state_changelog_to_the_workers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for flags, expected in (((), False), (("--state-changelog",), True)):
        code, out, _ = _run(capsys, "--workers", "3", *flags)
        assert code == 0
        workers = find(list(yaml.safe_load_all(out)), "StatefulSet", "sluicegate-worker")
        args = workers["spec"]["template"]["spec"]["containers"][0]["args"]
        assert ("--state-changelog" in args) is expected
        assert _parser().parse_args(args).state_changelog is expected  # args start "worker"


def test_the_command_refuses_too_few_slots_and_warns_of_no_spare(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ConfigError, match="cannot host the pipeline's 4 subtasks"):
        _run(capsys, "--workers", "3", "--slots", "1")
    code, _, err = _run(capsys, "--workers", "2", "--slots", "2")
    assert code == 0
    assert "with one of 2 workers down, 2 slots each cannot host all 4 subtasks" in err


def test_the_component_s_prometheus_rule_is_the_rules_file() -> None:
    rules = (ROOT / "deploy/prometheus/rules/sluicegate.yml").read_text()
    component = ROOT / "deploy/k8s/components/monitoring/prometheusrule.yaml"
    assert yaml.safe_load(component.read_text()) == prometheus_rule(rules), (
        "regenerate: uv run python -m sluicegate.deploy.rules > " + str(component.relative_to(ROOT))
    )

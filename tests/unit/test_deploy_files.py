"""The Docker-user deployment files: the compose file is valid, mounts exist, images are pinned.

These run the Compose tool's ``config``, which parses, interpolates and validates the file but
needs no Docker engine. Either ``docker compose`` (v2 or later) or the old ``docker-compose``
(v1) will do; ``.ci/install-compose`` installs one. Without any, these tests fail rather than
skip, so that CI cannot pass without checking the file.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
APP_SERVICES = {"coordinator", "worker"}
INFRASTRUCTURE_SERVICES = {"kafka", "s3", "s3-bucket", "prometheus", "grafana"}


@dataclass(frozen=True, slots=True)
class ComposeTool:
    """How to invoke the installed Compose implementation."""

    command: tuple[str, ...]
    v1: bool

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``config``-style arguments against the project's compose file, all profiles on."""
        return subprocess.run(
            [*self.command, "-f", str(COMPOSE_FILE), "--profile", "app", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def _works(command: list[str]) -> bool:
    try:
        done = subprocess.run(command, capture_output=True, timeout=60, check=False)
    except OSError:
        return False
    return done.returncode == 0


@functools.cache
def _find_compose() -> ComposeTool | None:
    docker = shutil.which("docker")
    if docker is not None and _works([docker, "compose", "version"]):
        return ComposeTool(command=(docker, "compose"), v1=False)
    legacy = shutil.which("docker-compose")
    if legacy is not None and _works([legacy, "version"]):
        return ComposeTool(command=(legacy,), v1=True)
    return None


def _compose() -> ComposeTool:
    tool = _find_compose()
    if tool is None:
        pytest.fail(
            "no Docker Compose found (neither `docker compose` nor `docker-compose` works): "
            "run .ci/install-compose",
            pytrace=False,
        )
    return tool


@functools.cache
def _resolved_config() -> dict[str, Any]:
    """The compose file as the tool resolves it: merge keys applied, paths made absolute.

    Cached for the session; callers must not modify it.
    """
    tool = _compose()
    if tool.v1:
        # v1 prints YAML only. PyYAML is in the dev environment only as a dependency of moto,
        # without stubs, hence the dynamic import.
        done = tool.run("config")
        assert done.returncode == 0, done.stderr
        yaml = importlib.import_module("yaml")
        resolved: dict[str, Any] = yaml.safe_load(done.stdout)
        return resolved
    done = tool.run("config", "--format", "json")
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def _bind_sources(service: dict[str, Any]) -> list[str]:
    """Host paths a service mounts, from either the long (v2) or the short (v1) volume syntax."""
    sources = []
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            if volume["type"] == "bind":
                sources.append(str(volume["source"]))
        elif str(volume).startswith(("/", ".")):
            sources.append(str(volume).split(":", 1)[0])
    return sources


def _is_pinned(image: str) -> bool:
    """True for ``name:tag`` with a tag other than ``latest``, or a digest reference."""
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:  # no tag at all, or the colon belonged to a registry port
        return False
    return tag != "latest"


def test_compose_file_is_valid() -> None:
    done = _compose().run("config", "-q")
    assert done.returncode == 0, f"compose config failed:\n{done.stderr}"
    assert done.stderr.strip() == "", f"compose config warned:\n{done.stderr}"


def test_app_services_run_only_with_the_app_profile() -> None:
    services: dict[str, Any] = _resolved_config()["services"]
    assert set(services) == INFRASTRUCTURE_SERVICES | APP_SERVICES
    for name in INFRASTRUCTURE_SERVICES:
        assert not services[name].get("profiles"), f"{name} must start without a profile"
    for name in APP_SERVICES:
        assert services[name].get("profiles") == ["app"], f"{name} must be in the app profile"


def test_every_mounted_host_path_exists_in_the_repo() -> None:
    services: dict[str, Any] = _resolved_config()["services"]
    mounted = {
        (name, Path(source))
        for name, service in services.items()
        for source in _bind_sources(service)
    }
    assert mounted, "expected the Prometheus and Grafana config mounts"
    for name, source in sorted(mounted):
        path = (ROOT / source).resolve()
        assert path.is_relative_to(ROOT), f"{name} mounts {source}, outside the repository"
        assert path.exists(), f"{name} mounts {source}, which does not exist"


def test_every_build_context_and_dockerfile_exists() -> None:
    services: dict[str, Any] = _resolved_config()["services"]
    builds = {name: service["build"] for name, service in services.items() if "build" in service}
    assert set(builds) == APP_SERVICES
    for name, build in builds.items():
        context = (ROOT / build["context"]).resolve()
        assert context == ROOT, f"{name} must build from the repository root"
        assert (context / build.get("dockerfile", "Dockerfile")).is_file()


def test_every_image_is_pinned() -> None:
    services: dict[str, Any] = _resolved_config()["services"]
    for name, service in services.items():
        if "build" in service:
            continue
        image = service.get("image")
        assert image is not None, f"{name} has neither an image nor a build"
        assert _is_pinned(image), f"{name} uses {image}: pin a tag other than latest"


def test_app_services_reach_kafka_on_an_advertised_listener() -> None:
    services: dict[str, Any] = _resolved_config()["services"]
    advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    addresses = {listener.split("://", 1)[1] for listener in advertised.split(",")}
    for name in APP_SERVICES:
        bootstrap = services[name]["environment"]["SLUICEGATE_KAFKA_BOOTSTRAP"]
        assert bootstrap == "kafka:19092"
        assert bootstrap in addresses, f"{name} bootstraps from {bootstrap}, not advertised"


def _parsed_command(service: dict[str, Any]) -> argparse.Namespace:
    """A sluicegate service's command as the `sluicegate` CLI parses it (a flag it lacks
    fails here, not in a container)."""
    from sluicegate.cli.main import _parser

    return _parser().parse_args([str(arg) for arg in service["command"]])


def test_checkpoints_go_to_the_stack_s_s3_bucket() -> None:
    services: dict[str, Any] = _resolved_config()["services"]
    bucket_command = services["s3-bucket"]["entrypoint"]
    assert bucket_command[:3] == ["mc", "mb", "--ignore-existing"]
    bucket = bucket_command[3].split("/", 1)[1]
    root = services["s3"]["environment"]
    for name in APP_SERVICES:
        env = services[name]["environment"]
        assert env["SLUICEGATE_STORAGE_URL"].startswith(f"s3://{bucket}/")
        assert env["AWS_ENDPOINT_URL"] == "http://s3:9000"
        assert env["AWS_ALLOW_HTTP"] == "true"
        assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (
            root["MINIO_ROOT_USER"],
            root["MINIO_ROOT_PASSWORD"],
        )
        depends = services[name]["depends_on"]
        assert depends["kafka"]["condition"] == "service_healthy"
        assert depends["s3-bucket"]["condition"] == "service_completed_successfully"


def test_sluicegate_commands_parse_and_health_checks_ask_their_ports() -> None:
    services: dict[str, Any] = _resolved_config()["services"]
    coordinator = _parsed_command(services["coordinator"])
    worker = _parsed_command(services["worker"])
    assert coordinator.http_host == "0.0.0.0"
    assert worker.metrics_host == "0.0.0.0"
    for name, port in (("coordinator", coordinator.http_port), ("worker", worker.metrics_port)):
        check = " ".join(services[name]["healthcheck"]["test"])
        assert f"http://127.0.0.1:{port}/healthz" in check, name


def test_the_workers_host_the_pipeline_with_one_down() -> None:
    from sluicegate.cli.loader import load_graph

    services: dict[str, Any] = _resolved_config()["services"]
    worker = _parsed_command(services["worker"])
    replicas = int(services["worker"]["deploy"]["replicas"])
    assert replicas >= 2
    subtasks = len(load_graph(worker.pipeline).subtasks())
    assert (replicas - 1) * worker.slots >= subtasks


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "deploy" / "grafana" / "dashboards").glob("*.json")),
    ids=lambda path: path.name,
)
def test_dashboard_is_valid_json_with_a_uid_and_title(path: Path) -> None:
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    assert dashboard["uid"]
    assert dashboard["title"]


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        ("apache/kafka:4.4.0", True),
        ("apache/kafka:latest", False),
        ("apache/kafka", False),
        ("registry.local:5000/kafka", False),
        ("registry.local:5000/kafka:4.4.0", True),
        ("prom/prometheus@sha256:" + "0" * 64, True),
    ],
)
def test_is_pinned(image: str, pinned: bool) -> None:
    assert _is_pinned(image) is pinned


def test_the_image_copies_every_package_the_wheel_ships() -> None:
    """The Dockerfile copies the sources package by package: one left out (the application
    package `sluicegate`, when it moved out of `coordinator`) breaks the image's entry point."""

    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]["packages"]
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    missing = [p for p in packages if f"COPY {p} ./{p}" not in dockerfile]
    assert missing == []


def test_the_image_copies_every_folder_the_wheel_force_includes() -> None:
    """The wheel carries deploy/kafka (the dev broker) and deploy/k8s (`deploy render`): the
    image's build installs the wheel, which fails on a folder the Dockerfile left out."""
    included = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]["force-include"]
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert set(included) >= {"deploy/kafka", "deploy/k8s"}
    missing = [folder for folder in included if f"COPY {folder} ./{folder}" not in dockerfile]
    assert missing == []

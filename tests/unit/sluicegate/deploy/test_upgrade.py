"""The upgrade runbook's objects: the savepoint Pod runs the old coordinator on loopback and
takes a stop-with-savepoint once (its script is run here against stand-in commands), and the
restore patch moves the coordinator to the new image and the savepoint."""

from __future__ import annotations

import copy
import io
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from sluicegate.cli.main import _parser
from sluicegate.deploy import render
from sluicegate.deploy.upgrade import restore_patch, savepoint_pod
from sluicegate.operators.exceptions import ConfigError
from tests.unit.sluicegate.deploy.example import EXAMPLE
from tests.unit.sluicegate.deploy.kustomize import ROOT, Manifest, find


def _coordinator() -> Manifest:
    return find(render(EXAMPLE), "Deployment", "sluicegate-coordinator")


def _apply(obj: Manifest, patch: list[dict[str, Any]]) -> Manifest:
    """The JSON patch's ``replace`` operations applied, as the API server would."""
    patched = copy.deepcopy(obj)
    for op in patch:
        assert op["op"] == "replace"
        *parents, last = op["path"].strip("/").split("/")
        target: Any = patched
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        assert last in target, op["path"]
        target[last] = op["value"]
    return patched


def _stand_in(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run_script(pod: Manifest, tmp_path: Path, savepoint_exit: int) -> tuple[int, list[str]]:
    """Run the Pod's script with `sluicegate` and `python` stand-ins; each call's argv."""
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stand_in(
        bin_dir,
        "sluicegate",
        f"""echo "$*" >> {calls}
case "$1" in coordinator) sleep 0.3 ;; savepoint) exit {savepoint_exit} ;; esac""",
    )
    _stand_in(bin_dir, "python", "exit 0")  # the coordinator's /healthz answers
    [container] = pod["spec"]["containers"]
    assert container["command"][:2] == ["sh", "-c"]
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "SLUICEGATE_PIPELINE": "my.flows:graph with spaces",
    }
    done = subprocess.run(container["command"], env=env, timeout=30, check=False)
    return done.returncode, calls.read_text().splitlines()


@pytest.mark.parametrize("savepoint_exit", [0, 3])
def test_the_savepoint_pod_runs_the_old_coordinator_on_loopback_and_stops_with_a_savepoint(
    tmp_path: Path, savepoint_exit: int
) -> None:
    coordinator = _coordinator()
    coordinator["spec"]["template"]["spec"]["containers"][0]["args"].append(
        "--from-savepoint=before-0-1-0"  # left by the previous upgrade
    )
    pod = savepoint_pod(coordinator, savepoint="before-0-2-0")
    code, calls = _run_script(pod, tmp_path, savepoint_exit)
    assert code == savepoint_exit  # the Pod fails when the savepoint does
    # Two calls; the stand-in health check answers at once, so their order is not fixed.
    [second] = [call for call in calls if call.startswith("savepoint")]
    [first] = [call for call in calls if not call.startswith("savepoint")]
    assert second == "savepoint create --stop --name before-0-2-0 --url http://127.0.0.1:8470"
    argv = first.split(" ")
    assert argv[0] == "coordinator"
    assert "--pipeline=my.flows:graph with spaces" in first  # $(VAR) expanded by the shell
    assert "--http-host=127.0.0.1" in argv
    assert "--http-host=0.0.0.0" not in argv
    assert not any(a.startswith("--from-savepoint") for a in argv)  # it must adopt the attempt


def test_the_savepoint_pod_is_a_valid_pod_that_runs_once_with_the_coordinator_s_config() -> None:
    coordinator = _coordinator()
    pod = savepoint_pod(coordinator, savepoint="before-0-2-0")
    kubernetes_validate.validate(pod, "1.37.0", strict=True)
    assert pod["metadata"]["name"] == "sluicegate-savepoint-before-0-2-0"
    assert pod["metadata"]["namespace"] == EXAMPLE.namespace
    # Not selected by the coordinator's Service or its probes' expectations.
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "savepoint"
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    [container] = spec["containers"]
    [original] = coordinator["spec"]["template"]["spec"]["containers"]
    assert container["image"] == original["image"]  # the old version takes the savepoint
    for field in ("env", "envFrom", "volumeMounts", "securityContext", "resources"):
        assert container[field] == original[field], field
    assert spec["volumes"] == coordinator["spec"]["template"]["spec"]["volumes"]
    assert not {"ports", "startupProbe", "livenessProbe", "readinessProbe"} & set(container)


def test_the_restore_patch_moves_to_the_new_image_and_the_savepoint() -> None:
    coordinator = _coordinator()
    coordinator["spec"]["template"]["spec"]["containers"][0]["args"].append(
        "--from-savepoint=before-0-1-0"
    )
    image = "registry.example.com/sluicegate:0.2.0"
    patched = _apply(coordinator, restore_patch(coordinator, image=image, savepoint="sp-2"))
    kubernetes_validate.validate(patched, "1.37.0", strict=True)
    [container] = patched["spec"]["template"]["spec"]["containers"]
    assert container["image"] == image
    assert [a for a in container["args"] if "savepoint" in a] == ["--from-savepoint=sp-2"]
    assert container["args"][:-1] == [
        a
        for a in _coordinator()["spec"]["template"]["spec"]["containers"][0]["args"]
        if "savepoint" not in a
    ]


def test_a_savepoint_name_that_cannot_name_a_pod_is_refused() -> None:
    with pytest.raises(ConfigError, match="--savepoint"):
        savepoint_pod(_coordinator(), savepoint="Before_v2")


def test_the_commands_read_the_deployment_as_kubectl_prints_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    deployment = json.dumps(_coordinator())
    monkeypatch.setattr("sys.stdin", io.StringIO(deployment))
    args = _parser().parse_args(["deploy", "restore-patch", "--savepoint", "sp", "--image", "i:1"])
    assert args.run(args) == 0
    assert json.loads(capsys.readouterr().out)[0]["value"] == "i:1"
    monkeypatch.setattr("sys.stdin", io.StringIO(deployment))
    args = _parser().parse_args(["deploy", "savepoint-pod", "--savepoint", "sp"])
    assert args.run(args) == 0
    assert "kind: Pod" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO("kind: Service\n"))
    with pytest.raises(ConfigError, match="Deployment"):
        args.run(args)


def test_the_script_is_valid_bash_and_uses_commands_that_exist() -> None:
    script = ROOT / "deploy" / "k8s" / "upgrade.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    assert 'sluicegate deploy savepoint-pod --savepoint "$SAVEPOINT"' in text
    assert 'sluicegate deploy restore-patch --savepoint "$SAVEPOINT" --image "$IMAGE"' in text
    _parser().parse_args(["deploy", "savepoint-pod", "--savepoint", "sp"])
    _parser().parse_args(["deploy", "restore-patch", "--savepoint", "sp", "--image", "i:1"])

"""The Kubernetes objects of the upgrade runbook (docs/deploy.md): savepoint, new image,
restore. ``deploy/k8s/upgrade.sh`` drives them with kubectl.

* `savepoint_pod`: from the coordinator's Deployment, a Pod that runs the *old* coordinator
  once (it adopts the attempt the workers run, listening on loopback only), takes a
  stop-with-savepoint (``sluicegate savepoint create --stop``) and exits. The Deployment is
  scaled to zero first: a Deployment restarts a coordinator that exits, and the restarted one
  would resume the job on the old version after its savepoint (outputs the restore would then
  publish twice). ``restartPolicy: Never`` makes this one run exactly once.
* `restore_patch`: a JSON patch of the Deployment to the new image, started with
  ``--from-savepoint NAME`` (a savepoint is restored once per checkpoint storage: a later
  restart of the same coordinator resumes from its own newer checkpoints, so the flag may
  stay until the next upgrade replaces it).
"""

from __future__ import annotations

import copy
import re
import shlex
from typing import Any

from sluicegate.deploy.manifests import Manifest
from sluicegate.operators.exceptions import ConfigError

__all__ = ["restore_patch", "savepoint_pod"]

_LOCAL_API = "http://127.0.0.1:8470"
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$")
_DROPPED = ("--from-savepoint", "--allow-non-restored-state", "--http-host", "--http-port")


def _check(savepoint: str) -> None:
    if not _NAME.match(savepoint):
        raise ConfigError(
            "--savepoint",
            f"{savepoint!r}: use lowercase letters, digits and dashes (it names a Pod too)",
        )


def _kept(args: list[str]) -> list[str]:
    """``args`` without the flags the savepoint's coordinator sets itself (with their values
    when given as a separate argument)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _DROPPED:
            skip = arg != "--allow-non-restored-state"
        elif not arg.startswith(tuple(f"{flag}=" for flag in _DROPPED)):
            kept.append(arg)
    return kept


def _shell(arg: str) -> str:
    """``arg`` quoted for sh, Kubernetes' ``$(VAR)`` turned into the shell's ``${VAR}``."""
    parts = re.split(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg)
    quoted = [shlex.quote(p) if i % 2 == 0 else f'"${{{p}}}"' for i, p in enumerate(parts)]
    return "".join(q for q in quoted if q != "''") or "''"


def _container(obj: Manifest) -> dict[str, Any]:
    containers: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    [container] = [c for c in containers if c["name"] == "sluicegate"]
    return container


def savepoint_pod(coordinator: Manifest, *, savepoint: str) -> Manifest:
    """A Pod taking stop-with-savepoint ``savepoint`` with the coordinator's image and config.

    Its script: 1. start the coordinator on 127.0.0.1 (it adopts the running attempt);
    2. wait for its ``/healthz``; 3. ``sluicegate savepoint create --stop --name``; 4. wait for
    the coordinator to exit (it does once the savepoint is written) and exit with the
    command's status.
    """
    _check(savepoint)
    template = copy.deepcopy(coordinator["spec"]["template"])
    spec: dict[str, Any] = template["spec"]
    spec["restartPolicy"] = "Never"
    container = next(c for c in spec["containers"] if c["name"] == "sluicegate")
    coordinator_argv = ["sluicegate", *_kept(container.pop("args")), "--http-host=127.0.0.1"]
    health = f"{_LOCAL_API}/healthz"
    script = "\n".join(
        [
            "set -u",
            " ".join(_shell(arg) for arg in coordinator_argv) + " &",
            "coordinator=$!",
            "until python -c "
            + shlex.quote(f"import urllib.request; urllib.request.urlopen({health!r}, timeout=2)")
            + " 2>/dev/null; do",
            '  kill -0 "$coordinator" || exit 1',
            "  sleep 1",
            "done",
            f"sluicegate savepoint create --stop --name {shlex.quote(savepoint)} "
            f"--url {_LOCAL_API}",
            "created=$?",
            'wait "$coordinator"',
            'exit "$created"',
        ]
    )
    container["command"] = ["sh", "-c", script]
    container.pop("ports", None)
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        container.pop(probe, None)
    labels = dict(template["metadata"].get("labels", {}))
    labels["app.kubernetes.io/component"] = "savepoint"
    metadata: dict[str, Any] = {"name": f"sluicegate-savepoint-{savepoint}", "labels": labels}
    if "namespace" in coordinator["metadata"]:
        metadata["namespace"] = coordinator["metadata"]["namespace"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def restore_patch(coordinator: Manifest, *, image: str, savepoint: str) -> list[dict[str, Any]]:
    """JSON-patch operations: the new ``image``, and ``--from-savepoint=<savepoint>`` in place
    of any earlier one, on the coordinator's container."""
    _check(savepoint)
    containers = coordinator["spec"]["template"]["spec"]["containers"]
    index = next(i for i, c in enumerate(containers) if c["name"] == "sluicegate")
    args = [
        arg for arg in _container(coordinator)["args"] if not arg.startswith("--from-savepoint=")
    ]
    path = f"/spec/template/spec/containers/{index}"
    return [
        {"op": "replace", "path": f"{path}/image", "value": image},
        {
            "op": "replace",
            "path": f"{path}/args",
            "value": [*args, f"--from-savepoint={savepoint}"],
        },
    ]

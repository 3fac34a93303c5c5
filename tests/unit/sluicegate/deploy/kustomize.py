"""Building the kustomizations of ``deploy/k8s`` with a real kustomize, and what tests share.

kustomize is found as ``$SLUICEGATE_KUSTOMIZE`` or on PATH; else ``.ci/install-kustomize`` is
run (it finds the binary it built before in its cache, or builds it from the Go module proxy);
else ``kubectl kustomize`` (the same kustomize, built into kubectl). Only if none works do the
tests skip, saying why (or fail, with ``SLUICEGATE_REQUIRE_KUSTOMIZE=1``, as in CI).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[4]
K8S = ROOT / "deploy" / "k8s"
INSTALL = ROOT / ".ci" / "install-kustomize"

Manifest = dict[str, Any]


@functools.cache
def _find() -> tuple[tuple[str, ...] | None, str]:
    """The command that builds a kustomization (its folder appended), or None and why not."""
    given = os.environ.get("SLUICEGATE_KUSTOMIZE") or shutil.which("kustomize")
    if given:
        return (given, "build"), ""
    try:
        done = subprocess.run(
            ["bash", str(INSTALL)], capture_output=True, text=True, timeout=900, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = f"{INSTALL.name} could not run: {exc}"
    else:
        if done.returncode == 0 and done.stdout.strip():
            return (done.stdout.strip().splitlines()[-1], "build"), ""
        why = f"{INSTALL.name} failed: {done.stderr.strip()[-500:]}"
    kubectl = shutil.which("kubectl")
    if kubectl is not None:
        return (kubectl, "kustomize"), ""
    return None, why


def kustomize() -> tuple[str, ...]:
    """The build command; skips (or fails where required) when there is none."""
    command, why = _find()
    if command is None:
        message = f"kustomize is not installed and cannot be built here ({why})"
        if os.environ.get("SLUICEGATE_REQUIRE_KUSTOMIZE"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return command


@functools.cache
def _build(folder: str) -> tuple[Manifest, ...]:
    done = subprocess.run(
        [*kustomize(), str(K8S / folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"kustomize build {folder} failed:\n{done.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def build(folder: str) -> list[Manifest]:
    """``kustomize build deploy/k8s/<folder>``, parsed (a copy: callers may change it)."""
    return [yaml.safe_load(yaml.safe_dump(doc)) for doc in _build(folder)]


def find(objects: list[Manifest], kind: str, name: str) -> Manifest:
    """The one object of that kind and name."""
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]

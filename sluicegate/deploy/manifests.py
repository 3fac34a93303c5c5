"""Where the Kubernetes manifests are, and reading them.

An installed wheel carries ``deploy/k8s`` inside this package (``resources/k8s``); a source
checkout reads the repository's folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["BASE_FILES", "MONITORING_FILES", "Manifest", "k8s_root", "load"]

Manifest = dict[str, Any]
"""One Kubernetes object as parsed from YAML."""

BASE_FILES = ("config.yaml", "coordinator.yaml", "worker.yaml", "disruption.yaml")
"""The base's resources, in the order of its kustomization.yaml."""

MONITORING_FILES = ("podmonitor.yaml", "prometheusrule.yaml")
"""The monitoring component's resources (Prometheus Operator CRDs)."""


def k8s_root() -> Path:
    """The folder holding ``base/``, ``components/`` and ``overlays/``."""
    packaged = Path(__file__).parent / "resources" / "k8s"
    if (packaged / "base").is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "deploy" / "k8s"


def load(folder: str, names: tuple[str, ...]) -> list[Manifest]:
    """Every object of the files ``names`` in ``k8s_root() / folder``, in order."""
    objects: list[Manifest] = []
    for name in names:
        text = (k8s_root() / folder / name).read_text(encoding="utf-8")
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects

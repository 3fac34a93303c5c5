"""The dependency direction of DESIGN.md, enforced by reading every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# package -> packages it must not import
# The application package `sluicegate` (CLI, demos, dev broker) is the one place that imports
# all three libraries; no library imports it.
FORBIDDEN = {
    "operators": {"agents", "coordinator", "sluicegate"},
    "agents": {"coordinator", "sluicegate"},
    "coordinator": {"agents", "sluicegate"},
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_packages_import_only_downwards(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_packages(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert offenders == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from coordinator.service import Coordinator\nimport agents.run\n")
    assert imported_packages(module) >= {"coordinator", "agents"}

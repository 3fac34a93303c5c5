"""The dependency direction of DESIGN.md, enforced by reading every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# package -> packages it must not import
FORBIDDEN = {
    "operators": {"agents", "coordinator"},
    "agents": {"coordinator"},
    "coordinator": {"agents"},
}
# the CLI wires agents into the coordinator's processes (the demo command is CLI wiring)
ALLOWED = {("coordinator", "cli.py"): {"agents"}, ("coordinator", "agent_demo.py"): {"agents"}}


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
        forbidden = FORBIDDEN[package] - ALLOWED.get((package, path.name), set())
        bad = imported_packages(path) & forbidden
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert offenders == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from coordinator.cli import main\nimport agents.run\n")
    assert imported_packages(module) >= {"coordinator", "agents"}

"""The dependency direction of DESIGN.md, enforced by reading every module's imports.

Everything installed lives under the `sluicegate` namespace: the libraries are
`sluicegate.operators`, `sluicegate.agents` and `sluicegate.coordinator` (the repository's
top-level folders `operators/`, `agents/`, `coordinator/`, linked into `sluicegate/`); the rest
of `sluicegate` is the application (CLI, demos, dev broker, the facade)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("operators", "agents", "coordinator")

# library -> what it must not import. "app" is any `sluicegate` module outside the libraries,
# the facade `sluicegate` itself included.
FORBIDDEN = {
    "operators": {"agents", "coordinator", "app"},
    "agents": {"coordinator", "app"},
    "coordinator": {"agents", "app"},
}


def imported_parts(path: Path) -> set[str]:
    """What ``path`` imports, by part: a library's name, "app", or "bare <name>" for an import of
    a library by its folder name (which would load a second copy of it)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    modules: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.append(node.module)
    parts: set[str] = set()
    for module in modules:
        head, _, rest = module.partition(".")
        if head in LIBRARIES:
            parts.add(f"bare {head}")
        elif head == "sluicegate":
            second = rest.split(".")[0]
            parts.add(second if second in LIBRARIES else "app")
    return parts


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_packages_import_only_downwards(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_parts(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert offenders == []


def test_nothing_imports_a_library_by_its_folder_name() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {sorted(bare)}"
        for top in (*LIBRARIES, "sluicegate", "tests", "bench")
        for path in sorted((ROOT / top).rglob("*.py"))
        if (bare := {p for p in imported_parts(path) if p.startswith("bare ")})
    ]
    assert offenders == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from sluicegate.coordinator.service import Coordinator\n"
        "import sluicegate.agents.runs.machine\n"
        "from sluicegate import Agent\nimport operators.graph\n"
    )
    assert imported_parts(module) == {"coordinator", "agents", "app", "bare operators"}


def test_only_the_faust_adapter_imports_faust() -> None:
    # faust-streaming is the optional extra sluicegate[faust]: the engine must run without it
    offenders = []
    for top in (*LIBRARIES, "sluicegate"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "faust_adapter" in path.parts:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                names = (
                    [a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                )  # fmt: skip
                if any(n.split(".")[0] in {"faust", "mode"} for n in names):
                    offenders.append(str(path.relative_to(ROOT)))
    # the CLI's faust commands import it only to tell a user without the extra how to get it
    assert offenders == ["sluicegate/cli/faust.py"]

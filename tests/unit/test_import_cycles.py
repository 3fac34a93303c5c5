"""No import circles: the modules of each library import one another in one direction only.

A circle (``a`` imports ``b`` imports ... ``a``) works only in the order someone happened to
import first, and hides which module is the lower one. Imports anywhere in a module count,
including those under ``TYPE_CHECKING`` and inside functions. ``from pkg import sub`` counts
as importing the submodule ``pkg.sub``, not ``pkg/__init__.py`` (a package that re-exports its
submodules is not in a circle with them).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("operators", "agents", "coordinator")


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every module under ``packages``."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules among ``modules`` it imports."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if sub in modules:
                        targets.add(sub)
                    elif node.module in modules:
                        targets.add(node.module)
        targets.discard(name)
        graph[name] = targets
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_circles_in_the_libraries() -> None:
    assert circles(import_graph(module_files(ROOT, PACKAGES))) == []


def test_the_check_sees_a_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg.a import A\n")
    (pkg / "a.py").write_text("from pkg import c\nA = 1\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n"
    )
    (pkg / "c.py").write_text("def f() -> None:\n    from pkg.b import g\n")
    graph = import_graph(module_files(tmp_path, ("pkg",)))
    assert graph["pkg"] == {"pkg.a"}
    assert graph["pkg.a"] == {"pkg.c"}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_a_package_re_exporting_its_submodules_is_no_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg.a import A\nfrom pkg.b import B\n")
    (pkg / "a.py").write_text("A = 1\n")
    (pkg / "b.py").write_text("from pkg import a\nfrom pkg.a import A\nB = A\n")
    assert circles(import_graph(module_files(tmp_path, ("pkg",)))) == []

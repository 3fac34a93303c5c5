"""The front door: `from sluicegate import ...` gives a pipeline's author every name they need,
each the very object its home module defines, and importing it loads nothing until a name is
used."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sluicegate


def test_the_facade_is_small() -> None:
    # About 20: what a pipeline, an agent, its tools and its model need; a model client or a
    # kind of tool server is one name each, everything else lives in documented submodules.
    # 30: Memory (issue 31) is part of declaring an agent, like Budget.
    assert 15 <= len(sluicegate.__all__) <= 30


@pytest.mark.parametrize("name", sluicegate.__all__)
def test_each_name_is_its_home_modules_object(name: str) -> None:
    home = importlib.import_module(sluicegate._HOMES[name])
    assert getattr(sluicegate, name) is getattr(home, name)
    assert name in dir(sluicegate)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Coordinator'"):
        _ = sluicegate.Coordinator  # type: ignore[attr-defined]


def test_importing_the_facade_loads_no_library_module() -> None:
    probe = (
        "import json, sys, sluicegate\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('sluicegate.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == []


def test_the_api_page_names_exactly_the_facade() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    table = page.split("## `from sluicegate import ...`")[1].split("## ")[0]
    named = re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)
    assert sorted(named) == sorted(sluicegate.__all__)

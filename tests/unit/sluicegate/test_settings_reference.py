"""docs/configuration.md is the generated reference, and the settings it documents agree with the
command line: one default per setting, and each model's variables are its fields."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from sluicegate.cli.main import _parser
from sluicegate.cli.settings_reference import SECTIONS, flag_bindings, reference

ROOT = Path(__file__).resolve().parents[3]
REGENERATE = "python -m sluicegate.cli.settings_reference > docs/configuration.md"


def test_the_committed_page_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == reference(), f"docs/configuration.md is stale: run `{REGENERATE}`"


def _default(model: type[Any], name: str) -> Any:
    if dataclasses.is_dataclass(model):
        found = {f.name: f.default for f in dataclasses.fields(model)}[name]
        return None if found is dataclasses.MISSING else found
    assert issubclass(model, BaseModel)
    return model.model_fields[name].get_default(call_default_factory=True)


def _action(path: str, option: str) -> argparse.Action:
    parser = _parser()
    for word in path.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return next(a for a in parser._actions if option in a.option_strings)


def test_a_flag_has_its_settings_default_or_none() -> None:
    bindings = list(flag_bindings())
    assert ("coordinator", "--interval", SECTIONS[0].model, "interval_seconds") in bindings
    for path, option, model, name in bindings:
        action = _action(path, option)
        if action.required or action.default is None:
            continue  # the model's default applies
        assert action.default == _default(model, name), f"{path} {option}"


@pytest.mark.parametrize(
    "section", [s for s in SECTIONS if s.env is not None], ids=lambda s: s.title
)
def test_every_variable_sets_a_field(section: Any) -> None:
    assert section.env is not None
    fields = (
        {f.name for f in dataclasses.fields(section.model)}
        if dataclasses.is_dataclass(section.model)
        else set(section.model.model_fields)
    )
    assert set(section.env.model_fields) <= fields

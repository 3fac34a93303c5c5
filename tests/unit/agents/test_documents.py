"""The one chain of forward upgraders of the agents' stored documents."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sluicegate.agents.documents import Document, DocumentVersionError, Upgraders, upgrade


def _add(field: str, version: int) -> Callable[[Document], Document]:
    def step(doc: Document) -> Document:
        return {**doc, field: True, "schema_version": version}

    return step


UPGRADERS: Upgraders = {1: _add("a", 2), 2: _add("b", 3)}


def test_each_upgrader_runs_in_order_up_to_current() -> None:
    doc = upgrade({"schema_version": 1}, what="thing", current=3, upgraders=UPGRADERS)
    assert doc == {"schema_version": 3, "a": True, "b": True}


def test_a_document_without_a_version_is_of_the_missing_version() -> None:
    assert upgrade({}, what="thing", current=3, upgraders=UPGRADERS)["b"]
    assert upgrade({}, what="thing", current=3, upgraders=UPGRADERS, missing=3) == {}


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (4, "thing schema_version 4 is newer than this code's (3)"),
        ("2", "thing schema_version '2' is not a version"),
        (True, "thing schema_version True is not a version"),
        (0, "thing schema_version 0 is not a version"),
    ],
)
def test_what_cannot_be_read_is_refused_by_name(version: object, message: str) -> None:
    with pytest.raises(DocumentVersionError) as caught:
        upgrade({"schema_version": version}, what="thing", current=3, upgraders=UPGRADERS)
    assert str(caught.value).startswith(message)


def test_a_gap_in_the_chain_is_refused() -> None:
    with pytest.raises(DocumentVersionError, match="no upgrader of thing from schema_version 2"):
        upgrade({"schema_version": 1}, what="thing", current=3, upgraders={1: UPGRADERS[1]})

"""`RunState` schema versions and their forward upgraders.

Every stored ``RunState`` (``run/<run_id>`` rows of an agent's state) carries its
``schema_version``. `UPGRADERS` maps each older version ``k`` to a pure function of the JSON
document, from ``k`` to ``k + 1``. They run on restore from a savepoint or from a checkpoint of
an older version (the agent declares `run_state_versions` as its operator's `StateVersions`,
so the engine upgrades every row before the new code reads it), and again in `RunState.decode`
for any document still older (belt and braces: nothing reads two versions).

History:

* 1: the first version.
* 2: ``metadata`` is always stored (version 1 states written before task metadata existed
  lack it and meant ``{}``).
* 3: ``offered_tools``, the tools the model was offered (``{}`` in version 2 states: not
  recorded, so nothing is refused as gone).

Remove an upgrader only when ``sluicegate state versions`` counts no checkpoint and no
savepoint of its version; ``tests/fixtures/savepoints/`` keeps savepoints of every older
version, restored in the tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from sluicegate.agents.documents import Document, Upgraders, upgrade

if TYPE_CHECKING:  # imported when called: `RunState` (a pure core) loads no storage library
    from sluicegate.operators.state.versions import StateVersions

__all__ = ["CURRENT", "UPGRADERS", "run_state_versions", "upgrade_document"]

CURRENT = 3
"""The ``schema_version`` of `RunState` this code writes."""


def _v1_to_v2(doc: Document) -> Document:
    return {**doc, "metadata": doc.get("metadata") or {}, "schema_version": 2}


def _v2_to_v3(doc: Document) -> Document:
    return {**doc, "offered_tools": doc.get("offered_tools") or {}, "schema_version": 3}


UPGRADERS: Upgraders = {1: _v1_to_v2, 2: _v2_to_v3}


def upgrade_document(doc: Document) -> Document:
    """``doc`` (a stored `RunState` as JSON) at `CURRENT`; raises ``ValueError`` for a version
    newer than this code or without an upgrader."""
    return upgrade(doc, what="RunState", current=CURRENT, upgraders=UPGRADERS)


def _row_upgrader(version: int) -> Callable[[bytes, bytes], tuple[bytes, bytes] | None]:
    def upgrade(key: bytes, value: bytes) -> tuple[bytes, bytes] | None:
        if not key.startswith(b"run/"):
            return key, value  # history rows and the like are not RunState documents
        doc = json.loads(value)
        if doc.get("schema_version", 1) != version:
            raise ValueError(
                f"expected a version {version} RunState, found {doc.get('schema_version')}"
            )
        return key, json.dumps(UPGRADERS[version](doc), separators=(",", ":")).encode()

    return upgrade


def run_state_versions() -> StateVersions:
    """The agent operator's state versions: `CURRENT`, with one row upgrader per step."""
    from sluicegate.operators.state.versions import StateVersions

    return StateVersions.of(CURRENT, {k: _row_upgrader(k) for k in UPGRADERS})

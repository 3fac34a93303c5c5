"""Versioned JSON documents: the one chain of forward upgraders that every stored document of
the agents (a `RunState`, a journal entry, a memory entry) goes through before it validates.

Each kind keeps its own ``CURRENT`` version and its ``UPGRADERS``: ``k`` -> a pure function of
the JSON document from ``k`` to ``k + 1``. `upgrade` applies them in order; a version that is
not one, is newer than the code, or has no way up is refused with a message naming the kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Document", "DocumentVersionError", "Upgraders", "upgrade"]

Document = dict[str, Any]

Upgraders = Mapping[int, Callable[[Document], Document]]
"""Version ``k`` -> the upgrader of a document from ``k`` to ``k + 1``."""


class DocumentVersionError(ValueError):
    """A stored document's ``schema_version`` cannot be read by this code."""


def upgrade(
    doc: Document, *, what: str, current: int, upgraders: Upgraders, missing: int = 1
) -> Document:
    """``doc`` at version ``current``, through ``upgraders``. A document without a
    ``schema_version`` is of version ``missing``. ``what`` names the kind in errors."""
    version = doc.get("schema_version", missing)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise DocumentVersionError(f"{what} schema_version {version!r} is not a version")
    if version > current:
        raise DocumentVersionError(
            f"{what} schema_version {version} is newer than this code's ({current}): run the "
            "code that wrote it, or newer"
        )
    while version < current:
        if version not in upgraders:
            raise DocumentVersionError(f"no upgrader of {what} from schema_version {version}")
        doc = upgraders[version](doc)
        version += 1
    return doc

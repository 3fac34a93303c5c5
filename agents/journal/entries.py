"""What the effect journal stores: one :class:`JournalEntry` per state change of an effect.

An effect (a model call or a tool call of an agent run) is journalled twice under one
deterministic idempotency key (:func:`effect_key`): ``issued`` before the call, ``done`` with the
result after it. Both live in a compacted Kafka topic, under separate record keys
(:func:`record_key`), so that compaction of a late ``issued`` can never hide a ``done``.

Schema versions (:data:`SCHEMA_VERSION`; :data:`UPGRADERS` read every older one):

* 1: the first version.
* 2: ``settled_by`` on ``done``: how a call whose outcome a crash left unknown was settled
  (absent in version 1, which did not say: ``None``). ``tests/fixtures/journal/`` keeps
  entries of every version, read in the tests.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sluicegate.agents.documents import Document, DocumentVersionError, Upgraders, upgrade
from sluicegate.agents.journal.exceptions import JournalCorruptError

__all__ = [
    "SCHEMA_VERSION",
    "UPGRADERS",
    "EffectKind",
    "EntryStatus",
    "JournalEntry",
    "SettledBy",
    "effect_key",
    "record_key",
]

SCHEMA_VERSION = 2
"""The newest ``schema_version`` of a journal entry this code writes and reads."""

EntryStatus = Literal["issued", "done"]

SettledBy = Literal["retry", "lookup", "call_after_lookup"]
"""How a ``done`` settled a call whose outcome was unknown (``issued`` without ``done`` after a
crash): ``retry``, called again with the same key (the service must deduplicate);
``lookup``, the tool's lookup found the effect and its result is the one recorded;
``call_after_lookup``, the lookup found nothing, so the call ran (again, if the lookup was
wrong)."""


def _v1_to_v2(doc: Document) -> Document:
    return {**doc, "settled_by": None, "schema_version": 2}


UPGRADERS: Upgraders = {1: _v1_to_v2}
"""From each older ``schema_version`` ``k`` to ``k + 1``: pure functions of the JSON document."""


class EffectKind(StrEnum):
    """What kind of effect an entry records."""

    MODEL = "model"
    TOOL = "tool"


class JournalEntry(BaseModel):
    """One state change of one effect: ``issued`` (about to call) or ``done`` (called)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[2] = 2
    key: str
    """The effect's idempotency key, from :func:`effect_key`."""
    run_id: str
    status: EntryStatus
    kind: EffectKind
    name: str
    """The tool's or the model's name."""
    request: dict[str, Any] = Field(default_factory=dict)
    """The call's arguments (on ``issued``). A factory, not ``{}``: pydantic deep-copies a
    mutable default for every entry it builds, four per agent step."""
    result: Any = None
    """The call's JSON-able result (on ``done``)."""
    error: str | None = None
    """On ``done``, when the effect failed for good: a replay sees the same failure."""
    settled_by: SettledBy | None = None
    """On ``done``: how an outcome left unknown by a crash was settled (:data:`SettledBy`);
    None when the call ran the first time (or the entry is of version 1)."""
    attempt: int
    """The attempt that wrote this entry."""
    written_at: float
    """Seconds since the epoch, by the writer's clock."""

    def encode(self) -> bytes:
        """The entry as the JSON value of its Kafka record (``model_dump_json``'s bytes, from
        the serializer itself: four entries a durable step)."""
        return self.__pydantic_serializer__.to_json(self)

    @classmethod
    def decode(cls, raw: bytes) -> JournalEntry:
        """Read an entry written by :meth:`encode` (by this or an older version, upgraded).

        Raises:
            JournalCorruptError: ``raw`` is not a JSON object, has a ``schema_version``
                newer than :data:`SCHEMA_VERSION`, or does not validate.
        """
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise JournalCorruptError(f"not JSON: {exc}", raw) from exc
        if not isinstance(data, dict):
            raise JournalCorruptError(f"not a JSON object but {type(data).__name__}", raw)
        try:
            data = upgrade(
                data,
                what="journal entry",
                current=SCHEMA_VERSION,
                upgraders=UPGRADERS,
                missing=SCHEMA_VERSION,
            )
        except DocumentVersionError as exc:
            raise JournalCorruptError(str(exc), raw) from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise JournalCorruptError(f"invalid entry: {exc}", raw) from exc


def effect_key(run_id: str, step: int, call: int | str) -> str:
    """The idempotency key of call ``call`` (index or tool-call id) of ``step`` of a run.

    It does not depend on the attempt, so every replay of the step finds the same key. The
    parts are joined with ``/`` and not escaped: a ``run_id`` containing ``/`` could collide
    with another run's keys, so run ids should not contain it.
    """
    return f"{run_id}/{step}/{call}"


def record_key(key: str, status: EntryStatus) -> bytes:
    """The Kafka record key of the ``status`` entry of effect ``key``: ``key|status``.

    ``issued`` and ``done`` are separate compaction keys, so neither replaces the other.
    """
    return f"{key}|{status}".encode()

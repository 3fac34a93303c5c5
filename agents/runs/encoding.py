"""Encoding a `RunState` again after a transition without encoding what did not change.

A run's document grows with the run (its messages, its effects), and every safe point writes
it again, so encoding it whole made a step's cost grow with the run. A transition builds the
new state with ``model_copy``: the messages and effects it did not change are the same
objects as before. `encode_run` encodes the other fields in three segments (a handful of
small values) and each message and effect once, reusing the bytes of an item that is the
very object (``is``) the previous document of the run encoded; models are frozen, so the
same object encodes to the same bytes. The result is byte for byte `RunState.encode` (the
agent unit tests check every document they write against it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import is_
from typing import Any

from pydantic import BaseModel

from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.runs.state import EffectRecord, RunState

__all__ = ["EncodedRun", "encode_run"]

_FIELDS = list(RunState.model_fields)
_M, _E = _FIELDS.index("messages"), _FIELDS.index("effects")
_HEAD = set(_FIELDS[:_M])
_MIDDLE = set(_FIELDS[_M + 1 : _E])
_TAIL = set(_FIELDS[_E + 1 :])
if not (_HEAD and _MIDDLE and _TAIL):  # every segment is a non-empty object to splice
    raise AssertionError(f"RunState fields around messages and effects: {_FIELDS}")

_RUN = RunState.__pydantic_serializer__
_MESSAGE = ChatMessage.__pydantic_serializer__
_EFFECT = EffectRecord.__pydantic_serializer__


@dataclass(frozen=True, slots=True)
class EncodedRun:
    """``run`` and its ``document``, with the bytes of each message and effect in it."""

    run: RunState
    document: bytes
    messages: tuple[bytes, ...]
    effects: tuple[bytes, ...]


def encode_run(run: RunState, previous: EncodedRun | None = None) -> EncodedRun:
    """``run``'s document (`RunState.encode`), reusing ``previous``'s bytes of the messages and
    effects ``run`` still holds (by identity)."""
    old = previous.run if previous is not None else None
    messages = _items(run.messages, old.messages if old else (), previous, "messages", _MESSAGE)
    effects = _items(run.effects, old.effects if old else (), previous, "effects", _EFFECT)
    head = _RUN.to_json(run, include=_HEAD)
    middle = _RUN.to_json(run, include=_MIDDLE)
    tail = _RUN.to_json(run, include=_TAIL)
    document = b"".join(
        (
            head[:-1],
            b',"messages":[',
            b",".join(messages),
            b"],",
            middle[1:-1],
            b',"effects":[',
            b",".join(effects),
            b"],",
            tail[1:],
        )
    )
    return EncodedRun(run, document, messages, effects)


def _items(
    items: Sequence[BaseModel],
    old: Sequence[BaseModel],
    previous: EncodedRun | None,
    field: str,
    serializer: Any,
) -> tuple[bytes, ...]:
    pieces: tuple[bytes, ...] = getattr(previous, field) if previous is not None else ()
    reusable = min(len(old), len(pieces), len(items))
    if all(map(is_, items[:reusable], old[:reusable])):
        # The common case, a transition that kept every item and appended: one pass in C.
        return (*pieces[:reusable], *(serializer.to_json(item) for item in items[reusable:]))
    return tuple(
        pieces[i] if i < reusable and old[i] is item else serializer.to_json(item)
        for i, item in enumerate(items)
    )

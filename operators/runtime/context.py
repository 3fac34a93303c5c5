"""The `Context` a process function gets: its partition's state and a buffered ``emit``.

Emits are collected and handed to the subtask only when the function returns: a function that
raises has its record dead-lettered and none of its outputs sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from operators.api import Record
from operators.state.store import PartitionState

__all__ = ["Emitted", "RecordContext"]


@dataclass(frozen=True, slots=True)
class Emitted:
    topic: str
    key: bytes | None
    value: bytes


@dataclass(slots=True)
class RecordContext:
    """Implements `operators.api.Context` for one call of a process function."""

    record: Record
    _state: PartitionState
    emitted: list[Emitted] = field(default_factory=list)

    @property
    def state(self) -> PartitionState:
        return self._state

    def emit(self, topic: str, value: bytes, *, key: bytes | None = None) -> None:
        if not isinstance(value, bytes) or not (key is None or isinstance(key, bytes)):
            raise TypeError("emit takes bytes: encode the key and value first")
        self.emitted.append(Emitted(topic, key, value))

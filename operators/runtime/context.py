"""The `Context` a process function gets: its partition's state, a buffered ``emit``, wake-ups.

Emits and wake-ups are collected and handed to the subtask only when the function returns: a
function that raises has its record dead-lettered and none of its outputs sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from sluicegate.operators.contract import Record
from sluicegate.operators.kafka import KafkaLike
from sluicegate.operators.runtime.wakes import WakeUp
from sluicegate.operators.state.store import PartitionState
from sluicegate.operators.storage import Storage

__all__ = ["Emitted", "OperatorOpenContext", "RecordContext"]


class Emitted(NamedTuple):
    """One record a call emitted (a named tuple: one is built per output record, by
    ``tuple.__new__``, which skips the named tuple's Python-level ``__new__``)."""

    topic: str
    key: bytes | None
    value: bytes
    partition: int | None = None
    """The partition asked for (`Context.emit`); None: the key's."""


@dataclass(slots=True)
class RecordContext:
    """Implements `operators.contract.Context` for one call of a process function or a wake-up.

    ``record`` is None for a wake-up; ``topic``/``partition`` name the partition either way.
    """

    topic: str
    partition: int
    record: Record | None
    _states: Callable[[str, int], PartitionState]
    _clock: Callable[[], float]
    emitted: list[Emitted] = field(default_factory=list)
    wakes: list[WakeUp] = field(default_factory=list)
    _state: PartitionState | None = field(default=None, init=False)

    @property
    def state(self) -> PartitionState:
        if self._state is None:  # looked up once a call: a function often reads and writes
            self._state = self._states(self.topic, self.partition)
        return self._state

    def state_of(self, topic: str) -> PartitionState:
        return self._states(topic, self.partition)

    def emit(
        self, topic: str, value: bytes, *, key: bytes | None = None, partition: int | None = None
    ) -> None:
        if not isinstance(value, bytes) or not (key is None or isinstance(key, bytes)):
            raise TypeError("emit takes bytes: encode the key and value first")
        if partition is None:
            self.emitted.append(tuple.__new__(Emitted, (topic, key, value, None)))
            return
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise ValueError(f"emit's partition is a partition number, not {partition!r}")
        self.emitted.append(Emitted(topic, key, value, partition))

    def wake(self, key: bytes, *, topic: str | None = None, after_s: float = 0.0) -> None:
        if not isinstance(key, bytes):
            raise TypeError("wake takes a bytes key")
        due = self._clock() + max(0.0, after_s)
        self.wakes.append(WakeUp(topic or self.topic, self.partition, key, due))


@dataclass(frozen=True, slots=True)
class OperatorOpenContext:
    """Implements `operators.contract.OpenContext` for `Operator.open`."""

    subtask: str
    attempt: int
    bootstrap: KafkaLike
    input_partitions: list[tuple[str, int]]
    owned_topics: dict[str, str]
    """suffix -> topic name"""
    storage: Storage
    _states: Callable[[str, int], PartitionState]
    _schedule: Callable[[WakeUp], None]
    _clock: Callable[[], float]

    def owned_topic(self, suffix: str) -> str:
        if suffix not in self.owned_topics:
            raise ValueError(f"{self.subtask} declares no owned topic {suffix!r}")
        return self.owned_topics[suffix]

    def state(self, topic: str, partition: int) -> PartitionState:
        return self._states(topic, partition)

    def wake(self, topic: str, partition: int, key: bytes, *, after_s: float = 0.0) -> None:
        self._schedule(WakeUp(topic, partition, key, self._clock() + max(0.0, after_s)))

"""A simulated subtask: its volatile state around the real aligner and restore filter."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from sluicegate.operators.protocol.alignment import BarrierAligner
from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.protocol.restore_filter import RestoreFilter

__all__ = [
    "MODULUS",
    "AbortMessage",
    "CompletedMessage",
    "DeclineMessage",
    "LogRecord",
    "SimSubtask",
    "Snapshot",
    "TriggerMessage",
    "fold",
]

MODULUS = 1_000_003


def fold(state: dict[int, tuple[int, int]], key: int, value: int) -> tuple[int, int]:
    """Fold ``value`` into the accumulator of ``key``; the output record is ``(key, acc)``.

    The fold is order-sensitive on purpose: a reordered record changes every later output.
    """
    count, acc = state.get(key, (0, 0))
    acc = (acc * 31 + value + 1) % MODULUS
    state[key] = (count + 1, acc)
    return key, acc


@dataclass(frozen=True, slots=True)
class LogRecord:
    """A record in a partition; barriers have key -1 and say what they are in headers."""

    key: int
    value: int
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a subtask uploads: keyed state and the sink outputs not yet published."""

    state: tuple[tuple[int, tuple[int, int]], ...]
    unpublished: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]


@dataclass(frozen=True, slots=True)
class AbortMessage:
    checkpoint_id: int
    attempt: int


@dataclass(frozen=True, slots=True)
class TriggerMessage:
    """Checkpoint ``checkpoint_id`` triggered: a source subtask takes it at its read position."""

    checkpoint_id: int
    attempt: int


@dataclass(frozen=True, slots=True)
class CompletedMessage:
    checkpoint_id: int
    attempt: int


@dataclass(frozen=True, slots=True)
class DeclineMessage:
    subtask: str
    checkpoint_id: int
    attempt: int
    reason: str


Upload = tuple[int, Mapping[TopicPartition, int], Snapshot]


@dataclass(slots=True)
class Publication:
    """A sink transaction in flight beside the subtask's loop (``ExactlyOnceSink``): the
    outputs of ``intervals`` up to checkpoint ``up_to``; ``committed`` once the sink topic
    holds them, after which the loop removes them from state."""

    up_to: int
    intervals: tuple[int, ...]
    outputs: tuple[tuple[int, int], ...]
    committed: bool = False


class SimSubtask:
    """One subtask of one attempt. Everything here is lost in a crash."""

    def __init__(
        self,
        *,
        uid: str,
        operator: int,
        attempt: int,
        positions: dict[TopicPartition, int],
        outputs: list[TopicPartition],
        snapshot: Snapshot,
        interval: int,
        aligner: BarrierAligner[LogRecord],
        restore_filter: RestoreFilter,
    ) -> None:
        self.uid = uid
        self.operator = operator
        self.attempt = attempt
        self.positions = positions
        self.state = dict(snapshot.state)
        self.unpublished = {i: list(outputs) for i, outputs in snapshot.unpublished}
        self.interval = interval
        self.aligner = aligner
        self.restore_filter = restore_filter
        self.outbox: dict[TopicPartition, deque[LogRecord]] = {tp: deque() for tp in outputs}
        self.uploads: deque[Upload] = deque()
        self.inbox: deque[TriggerMessage | AbortMessage | CompletedMessage] = deque()
        self.fenced = False
        self.completed = 0
        """The newest checkpoint this sink subtask heard completed."""
        self.published = 0
        """The newest checkpoint whose outputs this sink subtask published and removed."""
        self.publishing: Publication | None = None

    @property
    def name(self) -> str:
        return f"{self.uid}@{self.attempt}"

    def readable(self, log: Mapping[TopicPartition, list[LogRecord]]) -> list[TopicPartition]:
        """Input partitions with a record at the read position (none once fenced)."""
        if self.fenced:
            return []
        return [tp for tp, offset in self.positions.items() if offset < len(log[tp])]

    def snapshot(self) -> Snapshot:
        return Snapshot(
            tuple(sorted(self.state.items())),
            tuple((i, tuple(outputs)) for i, outputs in sorted(self.unpublished.items())),
        )

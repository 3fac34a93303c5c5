"""A pipeline built from a faust app, run in memory: each record through the operators that
read its topic, one partition, one dict of state per operator. No broker, no engine: what the
operators emit for what they read (the engine's own tests cover the engine)."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Generator
from dataclasses import dataclass, field

from sluicegate.operators.contract import Operator, Record
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.specs import TopicKind
from sluicegate.operators.state.store import PartitionState


class DictState:
    def __init__(self) -> None:
        self.rows: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self.rows.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.rows[key] = value

    def delete(self, key: bytes) -> None:
        self.rows.pop(key, None)

    def items(self, *, prefix: bytes = b"") -> Generator[tuple[bytes, bytes], None, None]:
        for key in sorted(self.rows):
            if key.startswith(prefix):
                yield key, self.rows[key]


@dataclass
class Ctx:
    store: DictState
    emitted: list[tuple[str, bytes | None, bytes]] = field(default_factory=list)
    partition: int = 0

    @property
    def state(self) -> PartitionState:
        return self.store

    def state_of(self, topic: str) -> PartitionState:
        return self.store

    def emit(
        self, topic: str, value: bytes, *, key: bytes | None = None, partition: int | None = None
    ) -> None:
        assert isinstance(value, bytes)
        assert partition is None, "faust operators let the partitioner place their records"
        self.emitted.append((topic, key, value))

    def wake(self, key: bytes, *, topic: str | None = None, after_s: float = 0.0) -> None:
        raise AssertionError("faust operators never wake")


class MemoryRun:
    """The operators of ``pipeline`` with their state; `feed` a source record."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.operators: dict[str, Operator] = {
            uid: spec.factory() for uid, spec in pipeline.operators.items()
        }
        self.states: dict[str, DictState] = defaultdict(DictState)
        self.sinks: dict[str, list[tuple[bytes | None, bytes]]] = defaultdict(list)
        self.failures: list[tuple[str, Exception]] = []
        self._offset = 0

    def feed(
        self,
        topic: str,
        value: bytes,
        key: bytes | None = None,
        timestamp_ms: int = 1_700_000_000_000,
    ) -> None:
        """Feed a source record of Kafka timestamp ``timestamp_ms``, and what it leads to."""
        queue = deque([(topic, key, value)])
        while queue:
            topic, key, value = queue.popleft()
            if self.pipeline.topics[topic].kind is TopicKind.SINK:
                self.sinks[topic].append((key, value))
                continue
            for uid, spec in self.pipeline.operators.items():
                if topic not in spec.inputs:
                    continue
                self._offset += 1
                ctx = Ctx(self.states[uid])
                record = Record(topic, 0, self._offset, key, value, timestamp_ms)
                try:
                    assert self.operators[uid].process(record, ctx) is None
                except Exception as exc:  # noqa: BLE001 - what the engine dead-letters
                    self.failures.append((uid, exc))
                    continue
                queue.extend(ctx.emitted)

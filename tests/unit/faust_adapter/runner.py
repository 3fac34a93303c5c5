"""A pipeline built from a faust app, run in memory: each record through the operators that
read its topic, one partition, one dict of state per operator. No broker, no engine: what the
operators emit for what they read (the engine's own tests cover the engine). Wake-ups are
queued with their due time on ``clock`` and run by `MemoryRun.tick`; `MemoryRun.restored`
is a new run over a copy of the state, opened as the engine opens a restored subtask."""

from __future__ import annotations

import copy
import time
from collections import defaultdict, deque
from collections.abc import Callable, Generator
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
    wakes: list[tuple[bytes, float]] = field(default_factory=list)
    """(key, after_s) asked for by the call."""

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
        assert topic is None, "faust operators wake their own partition"
        self.wakes.append((key, after_s))


@dataclass
class OpenCtx:
    """`OpenContext` of a one-partition subtask reading ``topic``."""

    store: DictState
    topic: str
    wakes: list[tuple[bytes, float]] = field(default_factory=list)

    @property
    def input_partitions(self) -> list[tuple[str, int]]:
        return [(self.topic, 0)]

    def state(self, topic: str, partition: int) -> PartitionState:
        assert (topic, partition) == (self.topic, 0)
        return self.store

    def wake(self, topic: str, partition: int, key: bytes, *, after_s: float = 0.0) -> None:
        assert (topic, partition) == (self.topic, 0)
        self.wakes.append((key, after_s))


class MemoryRun:
    """The operators of ``pipeline`` with their state; `feed` a source record, `tick` to run
    the wake-ups due on ``clock``."""

    def __init__(self, pipeline: Pipeline, clock: Callable[[], float] = time.time) -> None:
        self.pipeline = pipeline
        self.clock = clock
        self.operators: dict[str, Operator] = {
            uid: spec.factory() for uid, spec in pipeline.operators.items()
        }
        self.states: dict[str, DictState] = defaultdict(DictState)
        self.sinks: dict[str, list[tuple[bytes | None, bytes]]] = defaultdict(list)
        self.failures: list[tuple[str, Exception]] = []
        self.wakes: list[tuple[float, str, bytes]] = []
        """(due, uid, key) not yet run."""
        self._offset = 0

    async def restored(self, pipeline: Pipeline) -> MemoryRun:
        """A run of ``pipeline`` (built anew, as a restarted worker does) over a copy of this
        run's state, its operators opened; wake-ups not yet run are dropped, as in a crash."""
        run = MemoryRun(pipeline, self.clock)
        run._offset = self._offset
        for uid, state in self.states.items():
            run.states[uid].rows = copy.copy(state.rows)
        for uid, spec in pipeline.operators.items():
            ctx = OpenCtx(run.states[uid], spec.inputs[0])
            await run.operators[uid].open(ctx)  # type: ignore[arg-type]
            run.wakes.extend((self.clock() + after, uid, key) for key, after in ctx.wakes)
        return run

    def tick(self) -> None:
        """Run every wake-up due by ``clock``, earliest first, and what its emits lead to."""
        while due := sorted(w for w in self.wakes if w[0] <= self.clock()):
            self.wakes.remove(due[0])
            _, uid, key = due[0]
            ctx = Ctx(self.states[uid])
            assert self.operators[uid].on_wake(key, ctx) is None
            self._queue_wakes(uid, ctx)
            for topic, out_key, value in ctx.emitted:
                self.feed(topic, value, out_key)

    def _queue_wakes(self, uid: str, ctx: Ctx) -> None:
        self.wakes.extend((self.clock() + after, uid, key) for key, after in ctx.wakes)

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
                self._queue_wakes(uid, ctx)
                queue.extend(ctx.emitted)

"""The job graph: a validated pipeline and what follows from it.

Derived facts every process needs to agree on: the subtasks (``uid#index``), which input
partitions each subtask owns, who writes each topic, and so the channels a subtask aligns
barriers over.

Partition ownership follows Flink's key-group ranges: with ``N`` partitions and parallelism
``P``, subtask ``i`` owns the contiguous range ``[i*N//P, (i+1)*N//P)``. All inputs of one
operator must have the same partition count (they are co-partitioned by key).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluicegate.operators.exceptions import PipelineError
from sluicegate.operators.protocol.channels import Channel, TopicPartition
from sluicegate.operators.protocol.records import SOURCE_WRITER
from sluicegate.operators.specs import OperatorSpec, TopicKind, TopicSpec

__all__ = ["JobGraph", "SubtaskId"]


@dataclass(frozen=True, slots=True, order=True)
class SubtaskId:
    """One parallel instance of an operator: ``uid#index``."""

    uid: str
    index: int

    def __str__(self) -> str:
        return f"{self.uid}#{self.index}"

    @classmethod
    def parse(cls, text: str) -> SubtaskId:
        uid, _, index = text.rpartition("#")
        if not uid or not index.isdigit():
            raise ValueError(f"not a subtask id (uid#index): {text!r}")
        return cls(uid, int(index))


@dataclass(frozen=True, slots=True)
class JobGraph:
    """A validated pipeline. Build it with `Pipeline.build`."""

    name: str
    topics: dict[str, TopicSpec]
    operators: dict[str, OperatorSpec]

    @classmethod
    def validated(
        cls, name: str, topics: Mapping[str, TopicSpec], operators: Mapping[str, OperatorSpec]
    ) -> JobGraph:
        """Validate a declaration; raise `PipelineError` naming the first culprit found."""
        graph = cls(name, dict(topics), dict(operators))
        graph._validate()
        return graph

    def subtasks(self, uid: str | None = None) -> list[SubtaskId]:
        """Every subtask, or those of operator ``uid``, in a stable order."""
        specs = [self.operators[uid]] if uid else list(self.operators.values())
        return [SubtaskId(s.uid, i) for s in specs for i in range(s.parallelism)]

    def input_partitions(self, subtask: SubtaskId) -> list[TopicPartition]:
        """The input partitions ``subtask`` owns, topic by topic, in partition order."""
        spec = self.operators[subtask.uid]
        owned: list[TopicPartition] = []
        for topic in spec.inputs:
            n, p, i = self.topics[topic].partitions, spec.parallelism, subtask.index
            owned.extend(TopicPartition(topic, q) for q in range(i * n // p, (i + 1) * n // p))
        return owned

    def writers(self, topic: str) -> list[str]:
        """Who appends records and markers to ``topic``: subtask ids, or the coordinator."""
        if self.topics[topic].kind is TopicKind.SOURCE:
            return [SOURCE_WRITER]
        return [str(s) for op in self._writers_of(topic) for s in self.subtasks(op.uid)]

    def channels(self, subtask: SubtaskId) -> list[Channel]:
        """(input partition, writer) pairs ``subtask`` aligns barriers over."""
        return [
            Channel(p, w) for p in self.input_partitions(subtask) for w in self.writers(p.topic)
        ]

    def sources(self) -> list[TopicSpec]:
        return [t for t in self.topics.values() if t.kind is TopicKind.SOURCE]

    def sinks(self) -> list[TopicSpec]:
        return [t for t in self.topics.values() if t.kind is TopicKind.SINK]

    def _writers_of(self, topic: str) -> list[OperatorSpec]:
        return [op for op in self.operators.values() if topic in op.outputs]

    def _validate(self) -> None:
        if not self.operators:
            raise PipelineError(self.name, "the pipeline has no operators")
        for op in self.operators.values():
            for topic in (*op.inputs, *op.outputs):
                if topic not in self.topics:
                    raise PipelineError(op.uid, f"unknown topic {topic!r}: declare it first")
            for topic in op.outputs:
                if self.topics[topic].kind is TopicKind.SOURCE:
                    raise PipelineError(op.uid, f"writes source topic {topic!r}; use a topic")
            for topic in op.inputs:
                if self.topics[topic].kind is TopicKind.SINK:
                    raise PipelineError(op.uid, f"reads sink topic {topic!r}; use a topic")
            counts = {self.topics[t].partitions for t in op.inputs}
            if len(counts) > 1:
                raise PipelineError(
                    op.uid, f"inputs {list(op.inputs)} are not co-partitioned: {sorted(counts)}"
                )
            (partitions,) = counts
            if op.parallelism > partitions:
                raise PipelineError(
                    op.uid,
                    f"parallelism {op.parallelism} exceeds the {partitions} input partitions "
                    "(the partition count is the maximum parallelism)",
                )
        for spec in self.topics.values():
            writers = self._writers_of(spec.name)
            if spec.kind is TopicKind.SINK and len(writers) > 1:
                names = ", ".join(w.uid for w in writers)
                raise PipelineError(spec.name, f"a sink has one writer; it has {names}")
            if spec.kind is not TopicKind.SOURCE and not writers:
                raise PipelineError(spec.name, "no operator writes this topic")
        self._check_acyclic()

    def _check_acyclic(self) -> None:
        readers = {
            op.uid: [r.uid for r in self.operators.values() if set(op.outputs) & set(r.inputs)]
            for op in self.operators.values()
        }
        done: set[str] = set()
        path: list[str] = []

        def visit(uid: str) -> None:
            if uid in path:
                cycle = " -> ".join([*path[path.index(uid) :], uid])
                raise PipelineError(uid, f"the pipeline has a cycle: {cycle}")
            if uid in done:
                return
            path.append(uid)
            for nxt in readers[uid]:
                visit(nxt)
            path.pop()
            done.add(uid)

        for uid in readers:
            visit(uid)

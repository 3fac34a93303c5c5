"""Declaring a pipeline: topics and the operators between them.

A word count reads like this::

    p = Pipeline("wordcount")
    p.source("lines", partitions=4)
    p.topic("words", partitions=4)
    p.sink("counts", partitions=4)
    p.operator("tokenizer", tokenize, inputs="lines", outputs="words", parallelism=2)
    p.operator("counter", count, inputs="words", outputs="counts", parallelism=2)
    graph = p.build()   # validates; raises PipelineError naming the culprit

Kinds of topic: a *source* is written by the outside world only (its barriers are taken by the
subtasks that read it, at their read positions, when the coordinator triggers a checkpoint); a
*topic* joins two operators; a *sink* is read by the outside world and written by
exactly one operator, with exactly-once publication.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from sluicegate.operators.contract import (
    FunctionOperator,
    Operator,
    OperatorFactory,
    ProcessFunction,
)
from sluicegate.operators.exceptions import PipelineError
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.specs import OperatorSpec, OwnedTopic, TopicKind, TopicSpec
from sluicegate.operators.state.versions import StateVersions

__all__ = ["Pipeline"]

_UID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,99}")
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class Pipeline:
    """A DAG of operators joined by Kafka topics, declared in Python."""

    def __init__(self, name: str) -> None:
        if not _UID.fullmatch(name):
            raise PipelineError(name, "a pipeline name is 1-100 of [a-z0-9_.-], starting alnum")
        self.name = name
        self.topics: dict[str, TopicSpec] = {}
        self.operators: dict[str, OperatorSpec] = {}

    def source(self, name: str, *, partitions: int) -> str:
        """Declare a topic the outside world writes; returns its name."""
        return self._add_topic(name, partitions, TopicKind.SOURCE)

    def topic(self, name: str, *, partitions: int) -> str:
        """Declare a topic between operators; returns its name."""
        return self._add_topic(name, partitions, TopicKind.TOPIC)

    def sink(self, name: str, *, partitions: int, exactly_once: bool = True) -> str:
        """Declare a topic the outside world reads; returns its name.

        Exactly-once (the default): outputs are published in a Kafka transaction when the
        checkpoint holding them completes, so ``read_committed`` consumers see each once, one
        checkpoint interval late. ``exactly_once=False``: published at once, at least once,
        each with a deterministic ``sg-id`` header for the consumer to drop duplicates by.
        """
        return self._add_topic(name, partitions, TopicKind.SINK, exactly_once=exactly_once)

    def operator(
        self,
        uid: str,
        function: ProcessFunction | None = None,
        *,
        factory: OperatorFactory | None = None,
        inputs: str | Sequence[str],
        outputs: str | Sequence[str] = (),
        parallelism: int = 1,
        owned_topics: Sequence[OwnedTopic] = (),
        labels: Mapping[str, str] | None = None,
        state_versions: StateVersions | None = None,
    ) -> str:
        """Declare an operator with a stable ``uid`` (state is mapped by it); returns the uid.

        Give either a process ``function`` or a ``factory`` of `Operator` instances (one per
        subtask, for operators with a lifecycle). ``state_versions``: the version of the
        operator's own state rows and its upgraders (`operators.state.versions`; default 1)."""
        if (function is None) == (factory is None):
            raise PipelineError(uid, "give either a process function or an operator factory")
        if not _UID.fullmatch(uid):
            raise PipelineError(uid, "an operator uid is 1-100 of [a-z0-9_.-], starting alnum")
        if uid in self.operators:
            raise PipelineError(uid, "duplicate operator uid: every operator needs its own")
        if parallelism < 1:
            raise PipelineError(uid, f"parallelism must be at least 1, not {parallelism}")
        ins = (inputs,) if isinstance(inputs, str) else tuple(inputs)
        outs = (outputs,) if isinstance(outputs, str) else tuple(outputs)
        if not ins:
            raise PipelineError(uid, "an operator needs at least one input topic")
        if function is not None:
            fn = function

            def make() -> Operator:
                return FunctionOperator(fn)

            factory = make
        assert factory is not None
        tags = tuple(sorted((labels or {}).items()))
        spec = OperatorSpec(
            uid, factory, ins, outs, parallelism, tuple(owned_topics), tags,
            state_versions or StateVersions(),
        )  # fmt: skip
        self.operators[uid] = spec
        return uid

    def build(self) -> JobGraph:
        """Validate the declaration and return the job graph; raises `PipelineError`."""
        return JobGraph.validated(self.name, self.topics, self.operators)

    def _add_topic(
        self, name: str, partitions: int, kind: TopicKind, *, exactly_once: bool = True
    ) -> str:
        if not _TOPIC.fullmatch(name) or name in {".", ".."}:
            raise PipelineError(name, "a topic name is 1-249 of [a-zA-Z0-9._-]")
        if name in self.topics:
            raise PipelineError(name, "topic declared twice")
        if partitions < 1:
            raise PipelineError(name, f"a topic needs at least 1 partition, not {partitions}")
        self.topics[name] = TopicSpec(name, partitions, kind, exactly_once)
        return name

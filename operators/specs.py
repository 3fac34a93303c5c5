"""The declaration's value types: topics and operators as `Pipeline` records them.

`operators.pipeline` builds them, `operators.graph` validates and reads them, and the runtime
reads them from the graph; they import neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from sluicegate.operators.contract import OperatorFactory
from sluicegate.operators.state.versions import StateVersions

__all__ = ["OperatorSpec", "OwnedTopic", "TopicKind", "TopicSpec"]


class TopicKind(Enum):
    SOURCE = "source"
    TOPIC = "topic"
    SINK = "sink"


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    kind: TopicKind
    exactly_once: bool = True
    """For sinks: publish on checkpoint completion in a transaction (else at once, with ids)."""


@dataclass(frozen=True, slots=True)
class OwnedTopic:
    """A topic an operator keeps for itself (not part of the dataflow), with one partition per
    input partition: ``sluicegate.<pipeline>.<uid>.<suffix>``."""

    suffix: str
    compact: bool = True


@dataclass(frozen=True, slots=True)
class OperatorSpec:
    uid: str
    factory: OperatorFactory
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    parallelism: int
    owned_topics: tuple[OwnedTopic, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    """Facts about the operator for tools that read the graph (e.g. ``kind=agent``)."""
    state_versions: StateVersions = field(default_factory=StateVersions)
    """The version of the operator's own state rows, and its upgraders (savepoints)."""

    def label(self, name: str) -> str | None:
        return dict(self.labels).get(name)

    def owned_topic_name(self, pipeline: str, suffix: str) -> str:
        return f"sluicegate.{pipeline}.{self.uid}.{suffix}"

"""Creating a pipeline's topics, and refusing ones that exist with the wrong shape.

Besides the topics a pipeline declares, each pipeline has two internal topics:

* ``sluicegate.<pipeline>.dead-letters``: records a process function could not handle;
* ``sluicegate.<pipeline>.sink-progress`` (compacted): per sink subtask, the last checkpoint
  whose outputs were published, written in the same transaction as those outputs;
* ``sluicegate.<pipeline>.to-workers`` and ``.to-coordinator``: the control plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from aiokafka.admin import NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from sluicegate.operators.exceptions import FatalError
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.protocol.wire import to_coordinator_topic, to_workers_topic

__all__ = ["TopicMismatchError", "dead_letter_topic", "ensure_topics", "sink_progress_topic"]


class TopicMismatchError(FatalError):
    """A topic exists with another partition count than the pipeline declares."""

    def __init__(self, topic: str, declared: int, actual: int) -> None:
        super().__init__(
            f"topic {topic!r} has {actual} partitions but the pipeline declares {declared}: "
            "declare the existing count, or delete the topic (its data is lost) and let "
            "sluicegate create it"
        )
        self.topic, self.declared, self.actual = topic, declared, actual


_SETTLE_S = 15.0


def dead_letter_topic(pipeline: str) -> str:
    """The dead-letter topic of ``pipeline``."""
    return f"sluicegate.{pipeline}.dead-letters"


def sink_progress_topic(pipeline: str) -> str:
    """The compacted topic recording, per sink subtask, the last published checkpoint."""
    return f"sluicegate.{pipeline}.sink-progress"


def wanted_topics(graph: JobGraph, replication: int = 1) -> list[NewTopic]:
    """Every topic ``graph`` needs, with its partition count and configs."""
    topics = [NewTopic(t.name, t.partitions, replication) for t in graph.topics.values()]
    for op in graph.operators.values():
        partitions = graph.topics[op.inputs[0]].partitions
        for owned in op.owned_topics:
            configs = {"cleanup.policy": "compact"} if owned.compact else {}
            name = op.owned_topic_name(graph.name, owned.suffix)
            topics.append(NewTopic(name, partitions, replication, topic_configs=configs))
    topics.append(NewTopic(dead_letter_topic(graph.name), 1, replication))
    compact = {"cleanup.policy": "compact"}
    topics.append(NewTopic(sink_progress_topic(graph.name), 1, replication, topic_configs=compact))
    # Control topics: one partition each, so every reader sees one order.
    for name in (to_workers_topic(graph.name), to_coordinator_topic(graph.name)):
        topics.append(NewTopic(name, 1, replication, topic_configs={"retention.ms": "86400000"}))
    return topics


async def ensure_topics(bootstrap: KafkaLike, graph: JobGraph, *, replication: int = 1) -> None:
    """Create the missing topics of ``graph``; raise `TopicMismatchError` on a wrong shape."""
    wanted = wanted_topics(graph, replication)
    admin = kafka_clients.admin(bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in wanted if t.name not in existing]
        if missing:
            # Another process may create them meanwhile; the check below decides.
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(missing)
        # A topic created a moment ago may show no partitions yet: ask again for a while.
        deadline = time.monotonic() + _SETTLE_S
        while True:
            described = await admin.describe_topics([t.name for t in wanted])
            counts = {d["topic"]: len(d["partitions"]) for d in described}
            unsettled = [t for t in missing if not counts.get(t.name)]
            if not unsettled or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        for topic in wanted:
            if counts.get(topic.name) != topic.num_partitions:
                raise TopicMismatchError(
                    topic.name, topic.num_partitions, counts.get(topic.name, 0)
                )
    finally:
        await admin.close()

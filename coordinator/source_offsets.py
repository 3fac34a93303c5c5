"""The sources' consumer-group offsets, committed for lag tools after each checkpoint.

Kafka's own tooling (``kafka-consumer-groups``, Burrow, the Grafana lag panels) reads a
group's committed offsets. A sluicegate pipeline never reads them back (it restores the read
positions of its checkpoints), but it commits ``R_p`` of every source partition of each
completed checkpoint under the group ``sluicegate.<pipeline>``, so those tools show its lag.
"""

from __future__ import annotations

from types import TracebackType

from aiokafka import TopicPartition

from sluicegate.operators.graph import JobGraph
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.storage.manifest import CheckpointManifest

__all__ = ["SourceOffsets"]


class SourceOffsets:
    """Commits the source read positions of completed checkpoints; an async context."""

    def __init__(self, bootstrap: KafkaLike, graph: JobGraph) -> None:
        self._sources = {s.name for s in graph.sources()}
        self._consumer = kafka_clients.consumer(
            bootstrap,
            group_id=f"sluicegate.{graph.name}",
            enable_auto_commit=False,
        )

    async def __aenter__(self) -> SourceOffsets:
        try:  # a cancel during the start must still stop the client
            await self._consumer.start()
        except BaseException:
            await self._consumer.stop()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._consumer.stop()

    async def commit(self, manifest: CheckpointManifest) -> None:
        """Commit ``R_p`` of every source partition of ``manifest``."""
        offsets = {
            TopicPartition(topic, p): offset
            for snapshot in manifest.subtasks.values()
            for topic, partitions in snapshot.positions.items()
            if topic in self._sources
            for p, offset in partitions.items()
        }
        if offsets:
            self._consumer.assign(list(offsets))
            await self._consumer.commit(offsets)

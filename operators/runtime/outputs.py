"""Where a subtask's records go: the output side of `operators.runtime.subtask`.

* an emitted record bound for a sink topic goes to that topic's `Sink` (which decides, by its
  guarantee, when the outside world sees it); any other goes through the subtask's idempotent
  producer, stamped with the writer's attempt, interval and pipeline, gathered in one batch
  per partition (`PartitionBatches`) until the subtask ships them (`Outputs.ship`);
* barrier ``n`` goes to every partition of every output topic between operators (sinks get no
  markers), through the same batches, then everything is shipped: per partition records and
  markers keep their order;
* an input record whose processing failed goes to the pipeline's dead-letter topic with its
  reason (logged bounded: an error's text may hold the whole value).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from aiokafka import AIOKafkaProducer, ConsumerRecord

from sluicegate.operators.contract import Record
from sluicegate.operators.graph import JobGraph, SubtaskId
from sluicegate.operators.metrics import SubtaskInstruments
from sluicegate.operators.protocol.records import RecordKind, RecordMeta, encode_headers
from sluicegate.operators.runtime.batches import PartitionBatches
from sluicegate.operators.runtime.bounded import error_text
from sluicegate.operators.runtime.context import Emitted
from sluicegate.operators.runtime.deadletters import dead_letter_headers
from sluicegate.operators.runtime.partitioner import partition_for
from sluicegate.operators.runtime.sinks.contract import Sink, SinkRecord
from sluicegate.operators.runtime.topics import dead_letter_topic
from sluicegate.operators.specs import TopicKind

__all__ = ["Outputs"]

logger = logging.getLogger(__name__)


class Outputs:
    """The records, markers and dead letters of subtask ``subtask`` at ``attempt``."""

    def __init__(
        self,
        graph: JobGraph,
        subtask: SubtaskId,
        *,
        attempt: int,
        interval: int,
        producer: AIOKafkaProducer,
        batches: PartitionBatches,
        sinks: Mapping[str, Sink],
        metrics: SubtaskInstruments,
    ) -> None:
        """``batches`` gathers what ``producer`` sends (the at-least-once sink's records too);
        ``interval`` is the writer's first (the checkpoint whose barrier follows its records)."""
        self._graph, self._id, self._attempt = graph, subtask, attempt
        self.interval = interval
        """The writer interval of what is sent now: each barrier ``n`` moves it to ``n+1``."""
        self._name = str(subtask)
        self._producer = producer
        self._batches = batches
        self._sinks = sinks
        self._metrics = metrics
        self._topics = [
            graph.topics[t]
            for t in graph.operators[subtask.uid].outputs
            if graph.topics[t].kind is TopicKind.TOPIC
        ]
        self._targets = {
            t: (graph.topics[t].partitions, sinks.get(t))
            for t in graph.operators[subtask.uid].outputs
        }
        """output topic -> (its partition count, its sink or None)"""
        self._headers: tuple[int, list[tuple[str, bytes]]] = (-1, [])
        """The headers of the records of the latest interval written."""
        self.records_out = 0
        self._records_out_reported = 0
        self.dead_letters = 0

    def send(self, emitted: Sequence[Emitted], input_partition: int, source: Record | None) -> None:
        """Send, in order, what one call emitted while processing ``source`` (None: a
        wake-up) read from ``input_partition``, as records of the current interval."""
        interval = self.interval
        self.records_out += len(emitted)  # the metric follows in `ship`, once per cycle
        for index, (topic, key, value, asked) in enumerate(emitted):
            partitions, sink = self._targets[topic]
            if asked is None:
                partition = partition_for(key, partitions, input_partition=input_partition)
            elif asked < partitions:
                partition = asked
            else:
                raise ValueError(f"{topic} has {partitions} partitions; {asked} was asked for")
            if sink is not None:
                record = tuple.__new__(SinkRecord, (topic, partition, key, value, source, index))
                sink.write(record, interval)
                continue
            if self._headers[0] != interval:  # one list per interval, shared by its records
                meta = RecordMeta(self._attempt, interval, self._name, pipeline=self._graph.name)
                self._headers = (interval, encode_headers(meta))
            self._batches.add(topic, partition, key, value, self._headers[1])

    async def barrier(self, checkpoint_id: int) -> None:
        """Barrier ``checkpoint_id`` into every partition of every output topic (no sinks):
        interval ``checkpoint_id`` ends, and what is sent from now on is of the next one."""
        n = checkpoint_id
        self.interval = n + 1
        meta = RecordMeta(self._attempt, n, self._name, RecordKind.BARRIER, n, self._graph.name)
        headers = encode_headers(meta)
        for spec in self._topics:
            for p in range(spec.partitions):
                self._batches.add(spec.name, p, None, b"", headers)
        await self._batches.ship()

    async def ship(self) -> None:
        """Hand the records gathered for topics between operators to the producer; count the
        records emitted since the last time in ``sluicegate_records_out_total``."""
        await self._batches.ship()
        if self.records_out != self._records_out_reported:
            self._metrics.records_out.inc(self.records_out - self._records_out_reported)
            self._records_out_reported = self.records_out

    async def dead_letter(self, incoming: ConsumerRecord[bytes, bytes], error: Exception) -> None:
        """Send ``incoming`` to the dead-letter topic with why its processing failed."""
        self.dead_letters += 1
        self._metrics.dead_letters.inc()
        logger.warning(
            "%s dead-letters %s[%s]@%s: %s",
            self._name, incoming.topic, incoming.partition, incoming.offset, error_text(error),
        )  # fmt: skip
        headers = dead_letter_headers(incoming, error, operator=self._id.uid, subtask=self._name)
        await self._producer.send(
            dead_letter_topic(self._graph.name),
            incoming.value or b"",
            key=incoming.key,
            partition=0,
            headers=headers,
        )

    async def flush(self) -> None:
        """Every record and marker sent so far is in Kafka."""
        await self._batches.ship()
        await self._producer.flush()

"""The control plane over Kafka: two single-partition topics per pipeline.

``to-workers`` carries assignments, checkpoint triggers, completions, aborts and stops from the
coordinator to every worker; ``to-coordinator`` carries heartbeats, acks, declines and failures back
(`operators.protocol.wire` has the topic names and the JSON form). Each end reads its topic from
the end, so it hears only what is sent after it joined; the coordinator re-sends the assignment
to a worker whose heartbeat disagrees with it.

A record that does not decode is logged (its first bytes only) and skipped: the control topics
are the job's own, but nothing read from Kafka is trusted.
"""

from __future__ import annotations

import logging
from typing import Generic, Self, TypeVar, get_args

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.protocol.messages import (
    FromWorker,
    ToWorker,
)
from sluicegate.operators.protocol.wire import (
    decode_message,
    encode_message,
    to_coordinator_topic,
    to_workers_topic,
)

__all__ = ["KafkaCoordinatorLink", "KafkaWorkerLink"]

logger = logging.getLogger(__name__)

_In = TypeVar("_In", FromWorker, ToWorker)
_Out = TypeVar("_Out", FromWorker, ToWorker)


class _KafkaEnd(Generic[_Out, _In]):
    """Sends to ``out_topic`` and reads ``in_topic`` from its end; types checked on receive."""

    def __init__(
        self, bootstrap: KafkaLike, *, out_topic: str, in_topic: str, accepts: tuple[type, ...]
    ) -> None:
        self._out_topic = out_topic
        self._in = TopicPartition(in_topic, 0)
        self._accepts = accepts
        self._bootstrap = bootstrap
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def __aenter__(self) -> Self:
        """Start both clients (made here: aiokafka clients belong to a running loop)."""
        self._producer = kafka_clients.producer(self._bootstrap, linger_ms=0)
        self._consumer = kafka_clients.consumer(self._bootstrap, enable_auto_commit=False)
        try:  # a cancel during a start must still stop both clients
            await self._producer.start()
            await self._consumer.start()
            self._consumer.assign([self._in])
            await self._consumer.seek_to_end(self._in)
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
        if self._producer is not None:
            await self._producer.stop()
        self._producer = self._consumer = None

    async def send(self, message: _Out) -> None:
        assert self._producer is not None, "send before the link started"
        await self._producer.send_and_wait(self._out_topic, encode_message(message), partition=0)

    async def receive(self, timeout_s: float) -> list[_In]:
        assert self._consumer is not None, "receive before the link started"
        batches = await self._consumer.getmany(self._in, timeout_ms=int(timeout_s * 1000))
        messages: list[_In] = []
        for record in batches.get(self._in, []):
            try:
                message = decode_message(record.value or b"")
            except (ValueError, TypeError, KeyError) as exc:
                logger.warning(
                    "skipped a control record at %s offset %s that does not decode (%s): %r",
                    self._in, record.offset, type(exc).__name__, (record.value or b"")[:120],
                )  # fmt: skip
                continue
            if isinstance(message, self._accepts):
                messages.append(message)  # type: ignore[arg-type]
        return messages


class KafkaWorkerLink(_KafkaEnd[FromWorker, ToWorker]):
    """A worker's end (`operators.runtime.control.WorkerLink`) over the pipeline's topics."""

    def __init__(self, bootstrap: KafkaLike, pipeline: str) -> None:
        super().__init__(
            bootstrap,
            out_topic=to_coordinator_topic(pipeline),
            in_topic=to_workers_topic(pipeline),
            accepts=get_args(ToWorker),
        )


class KafkaCoordinatorLink(_KafkaEnd[ToWorker, FromWorker]):
    """The coordinator's end (`operators.runtime.control.CoordinatorLink`) over Kafka."""

    def __init__(self, bootstrap: KafkaLike, pipeline: str) -> None:
        super().__init__(
            bootstrap,
            out_topic=to_workers_topic(pipeline),
            in_topic=to_coordinator_topic(pipeline),
            accepts=get_args(FromWorker),
        )

"""End the transactions Kafka left hanging for a transactional id: open on a partition although
its coordinator recorded them complete, so nothing else would ever end them and the partition's
last stable offset stays before them for good (every ``read_committed`` reader stalls there).

Kafka 4.4 leaves them when the last replica of a partition shuts down while the coordinator
completes a transaction: the controlled shutdown makes the partition leaderless, the coordinator
takes a leaderless partition for a deleted one, drops its marker and records the transaction
complete anyway (seen on a single-node broker stopped during a commit: ``CompleteCommit`` in the
transaction log, no marker in any partition). Kafka's own remedy is ``kafka-transactions.sh
abort`` (KIP-664), which cannot know whether the lost marker said commit. The coordinator does,
until the next ``InitProducerId`` of the id replaces its record, so `end_hanging` runs first:

1. ``DescribeTransactions``: the coordinator's record of the id; unless it says the last
   transaction is ``CompleteCommit`` or ``CompleteAbort``, nothing is hanging that the coming
   ``InitProducerId`` would not end itself;
2. ``DescribeProducers`` on every partition of the given topics: the transactions open there;
3. `hanging` (sans IO): those of the recorded producer id and epoch, to end as recorded;
4. ``DescribeTransactions`` again: when the record moved in between (a zombie of the id began
   a transaction), nothing is ended, and the fencing that follows sorts it out;
5. ``WriteTxnMarkers`` to each partition's leader: the marker Kafka dropped.

Needs Kafka 3.0 or later; on a cluster with ACLs also ``Describe`` on the transactional id,
``Read`` and ``Alter`` on the topics. Without them it says so and ends nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from aiokafka import TopicPartition
from aiokafka.client import AIOKafkaClient, CoordinationType
from aiokafka.errors import KafkaError, LeaderNotAvailableError, for_code

from sluicegate.operators.kafka.txn_requests import (
    DescribeProducers,
    DescribeTransactions,
    WriteTxnMarkers,
)

__all__ = ["OpenTransaction", "TransactionRecord", "end_hanging", "hanging"]

logger = logging.getLogger(__name__)

_TRANSACTIONAL_ID_NOT_FOUND = 105
_RETRY_FOR_S = 30.0
"""How long a retriable error (a coordinator still loading after a restart) is retried."""
_T = TypeVar("_T")
_COMPLETED = {"CompleteCommit": True, "CompleteAbort": False}


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    """What a transaction coordinator holds of a transactional id."""

    state: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A producer's open transaction on one partition, as the partition's leader reports it."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int


def hanging(
    record: TransactionRecord | None, open_: Iterable[OpenTransaction]
) -> tuple[bool, list[OpenTransaction]]:
    """The transactions of ``open_`` that ``record`` says are complete, and whether they
    committed; none unless ``record`` is a completed transaction."""
    if record is None or record.state not in _COMPLETED:
        return False, []
    found = [
        t
        for t in open_
        if (t.producer_id, t.producer_epoch) == (record.producer_id, record.producer_epoch)
    ]
    return _COMPLETED[record.state], found


async def end_hanging(
    client: AIOKafkaClient, transactional_id: str, topics: Sequence[str]
) -> list[OpenTransaction]:
    """Steps 1-5 of the module docstring over every partition of ``topics``; the transactions
    ended."""

    def describe() -> Awaitable[TransactionRecord | None]:
        return _retrying(lambda: _describe_transaction(client, transactional_id))

    record = await describe()
    if record is None or record.state not in _COMPLETED:
        return []
    partitions = [
        TopicPartition(topic, p)
        for topic in topics
        for p in sorted(await client._wait_on_metadata(topic))  # aiokafka: fetch the metadata
    ]
    commit, found = hanging(
        record, await _retrying(lambda: _describe_producers(client, partitions))
    )
    if not found or await describe() != record:
        return []
    await _retrying(lambda: _write_markers(client, found, commit=commit))
    logger.warning(
        "%s: ended %d transaction(s) Kafka had left open (%s as its coordinator recorded): %s",
        transactional_id, len(found), "committed" if commit else "aborted",
        ", ".join(f"{t.topic}-{t.partition} from offset {t.start_offset}" for t in found),
    )  # fmt: skip
    return found


async def _retrying(call: Callable[[], Awaitable[_T]]) -> _T:
    """``call()``, again while it raises a retriable Kafka error, for `_RETRY_FOR_S`."""
    deadline = time.monotonic() + _RETRY_FOR_S
    while True:
        try:
            return await call()
        except KafkaError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _describe_transaction(
    client: AIOKafkaClient, transactional_id: str
) -> TransactionRecord | None:
    node = await client.coordinator_lookup(CoordinationType.TRANSACTION, transactional_id)
    response: Any = await client.send(node, DescribeTransactions([transactional_id]))
    (error_code, _, state, _, _, producer_id, epoch, *_), *_ = response.transaction_states
    if error_code == _TRANSACTIONAL_ID_NOT_FOUND:
        return None
    if error_code:
        raise for_code(error_code)(f"DescribeTransactions {transactional_id}")
    return TransactionRecord(state, producer_id, epoch)


async def _describe_producers(
    client: AIOKafkaClient, partitions: Sequence[TopicPartition]
) -> list[OpenTransaction]:
    found: list[OpenTransaction] = []
    for leader, by_topic in (await _by_leader(client, partitions)).items():
        response: Any = await client.send(leader, DescribeProducers(by_topic))
        for topic, results, _ in response.topics:
            for partition, error_code, message, producers, _ in results:
                if error_code:
                    raise for_code(error_code)(f"DescribeProducers {topic}-{partition}: {message}")
                found.extend(
                    OpenTransaction(topic, partition, pid, epoch, coordinator_epoch, start)
                    for pid, epoch, _, _, coordinator_epoch, start, _ in producers
                    if start >= 0
                )
    return found


async def _write_markers(
    client: AIOKafkaClient, transactions: Sequence[OpenTransaction], *, commit: bool
) -> None:
    by_tp = {TopicPartition(t.topic, t.partition): t for t in transactions}
    for leader, by_topic in (await _by_leader(client, list(by_tp))).items():
        ours = [by_tp[TopicPartition(topic, p)] for topic, ps in by_topic.items() for p in ps]
        markers = [
            (t.producer_id, t.producer_epoch, commit, t.topic, t.partition, t.coordinator_epoch)
            for t in ours
        ]
        response: Any = await client.send(leader, WriteTxnMarkers(markers))
        for marker in response.markers:
            for topic, results, *_ in marker[1]:
                for partition, error_code, *_ in results:
                    if error_code:
                        raise for_code(error_code)(f"WriteTxnMarkers {topic}-{partition}")


async def _by_leader(
    client: AIOKafkaClient, partitions: Sequence[TopicPartition]
) -> dict[int, dict[str, list[int]]]:
    """``partitions`` by the node that leads them, as ``{topic: [partition, ...]}``."""
    by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for tp in partitions:
        leader = client.cluster.leader_for_partition(tp)
        if leader is None or leader < 0:
            await client.force_metadata_update()  # for the retry
            raise LeaderNotAvailableError(f"{tp.topic}-{tp.partition} has no leader")
        by_leader[leader][tp.topic].append(tp.partition)
    return by_leader

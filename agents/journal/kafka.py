"""The effect journal over a compacted Kafka topic, with a local index per subtask.

The topic is partitioned like the runs and created by the pipeline, not here. Each entry is a
record keyed ``key|status`` (:func:`~agents.journal.entries.record_key`); a tombstone (value
``None``) deletes one. The topic is never rolled back: a global recovery rewinds the runs'
state, not the journal, so a replayed step finds the effects it already performed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Iterable
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from sluicegate.agents.journal.entries import EntryStatus, JournalEntry, record_key
from sluicegate.agents.journal.exceptions import JournalCorruptError, JournalUnavailableError
from sluicegate.agents.journal.outbox import Outbox
from sluicegate.agents.journal.store import JournalIndex, StatusCounts
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients

__all__ = ["KafkaJournal"]

logger = logging.getLogger(__name__)

_STATUSES: tuple[EntryStatus, ...] = ("issued", "done")


def _parse_record_key(raw: bytes | None) -> tuple[str, EntryStatus] | None:
    """``(key, status)`` from a record key ``key|status``; ``None`` if it is not one."""
    if raw is None:
        return None
    try:
        key, _, status = raw.decode().rpartition("|")
    except UnicodeDecodeError:
        return None
    if not key:
        return None
    if status == "issued":
        return key, "issued"
    if status == "done":
        return key, "done"
    return None


def _written() -> asyncio.Future[None]:
    """A write that needed no record: complete already."""
    written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    written.set_result(None)
    return written


class KafkaJournal:
    """A :class:`~agents.journal.store.Journal` over ``partitions`` of compacted ``topic``.

    Use::

        journal = KafkaJournal(bootstrap, topic, partitions=[0, 2])
        await journal.start()   # producer up, then the index rebuilt from the topic
        ...
        await journal.stop()

    Records that do not decode are skipped at rebuild (logged at WARNING with their
    coordinates) and counted in :attr:`corrupt_records`.
    """

    def __init__(
        self,
        bootstrap: KafkaLike,
        topic: str,
        partitions: Iterable[int],
        *,
        rebuild_timeout_seconds: float = 60.0,
    ) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._partitions = tuple(sorted(set(partitions)))
        self._rebuild_timeout = rebuild_timeout_seconds
        self._index = JournalIndex()
        self._producer: Any = None
        self._outbox: Outbox | None = None
        self.corrupt_records = 0
        """Records skipped at the last rebuild because they did not decode."""

    @property
    def topic(self) -> str:
        """The journal topic."""
        return self._topic

    @property
    def partitions(self) -> tuple[int, ...]:
        """The partitions this journal serves, sorted."""
        return self._partitions

    async def start(self) -> None:
        """Make the journal ready.

        1. Start an idempotent producer (``acks=all``), so a write is durable when awaited.
        2. Rebuild the index from every partition served, from the beginning up to its end
           offset as of now.

        Raises:
            JournalUnavailableError: the broker cannot be reached, or the partitions could not
                be read to their end in time.
        """
        producer = kafka_clients.producer(self._bootstrap, acks="all", enable_idempotence=True)
        try:
            try:
                await producer.start()
            except KafkaError as exc:
                raise JournalUnavailableError("producer start", None, repr(exc)) from exc
            await self._rebuild()
        except BaseException:
            await producer.stop()
            raise
        self._producer = producer
        self._outbox = Outbox(producer, self._topic, self._settle)
        counts = self._index.counts()
        logger.info(
            "journal %s started on partitions %s: %s issued, %s done, %s corrupt records skipped",
            self._topic,
            list(self._partitions),
            counts["issued"],
            counts["done"],
            self.corrupt_records,
        )

    async def stop(self) -> None:
        """Stop the producer; the index is kept but writes are refused until restarted."""
        producer, self._producer, self._outbox = self._producer, None, None
        if producer is not None:
            await producer.stop()
            logger.info("journal %s stopped", self._topic)

    def get(self, key: str) -> tuple[JournalEntry | None, JournalEntry | None]:
        """The latest ``issued`` and the first ``done`` of effect ``key``, from the index."""
        return self._index.get(key)

    def unacknowledged(self, key: str) -> JournalEntry | None:
        """The ``done`` of ``key`` whose write raised since the last rebuild, until one is
        written."""
        return self._index.unacknowledged(key)

    def write(self, entry: JournalEntry, *, partition: int) -> Awaitable[None]:
        """Hand ``entry`` to ``partition`` now; the awaitable returned completes once all
        in-sync replicas have it.

        Entries are handed over in the order of these calls: one begun while another is
        unacknowledged lands after it in the partition. The entries of one turn of the event
        loop (concurrent runs, a ``done`` behind its ``issued``) go as one batch a partition
        (`agents.journal.outbox`), and the producer puts batches in flight together into
        shared produce requests.

        A ``done`` for a key whose ``done`` the index holds is not sent: the first stays (in
        a compacted topic the last record of a key would otherwise replace it).

        Raises:
            ValueError: this journal does not serve ``partition`` (at once).
            JournalUnavailableError: the broker did not acknowledge the write (on await); a
                ``done`` is then held as :meth:`unacknowledged`.
        """
        self._require_producer(partition)
        if entry.status == "done" and self._index.has_done(entry.key):
            logger.debug("journal %s: %s is done already; not written", self._topic, entry.key)
            return _written()
        assert self._outbox is not None
        return self._outbox.add(entry, partition)

    def _settle(
        self, entry: JournalEntry, partition: int, error: BaseException | None
    ) -> BaseException | None:
        """Fold the fate of a write into the index; the error its writer sees."""
        if error is None:
            self._index.put(entry, partition)
            logger.debug("journal %s: %s %s", self._topic, entry.status, entry.key)
            return None
        self._index.hold(entry)  # it may be durable all the same
        if isinstance(error, KafkaError | asyncio.CancelledError):
            return JournalUnavailableError(
                f"write of {entry.status} {entry.key!r}", partition, repr(error)
            )
        return error

    async def forget_run(self, run_id: str, *, partition: int) -> int:
        """Tombstone both record keys of every effect of ``run_id`` held in ``partition``.

        Returns the number of tombstones written (two per effect key). The index forgets the
        run only once every tombstone is acknowledged.

        Raises:
            ValueError: this journal does not serve ``partition``.
            JournalUnavailableError: the broker did not acknowledge a tombstone.
        """
        producer = self._require_producer(partition)
        keys = self._index.keys_of_run(run_id, partition)
        try:
            sent = [
                await producer.send(
                    self._topic, None, key=record_key(key, status), partition=partition
                )
                for key in keys
                for status in _STATUSES
            ]
            await asyncio.gather(*sent)
        except KafkaError as exc:
            raise JournalUnavailableError(
                f"forget of run {run_id!r}", partition, repr(exc)
            ) from exc
        for key in keys:
            for status in _STATUSES:
                self._index.drop(key, status)
        logger.info(
            "journal %s: forgot run %s (%s effects) in partition %s",
            self._topic,
            run_id,
            len(keys),
            partition,
        )
        return len(sent)

    def entries_by_status(self) -> StatusCounts:
        """Keys by status: ``issued`` (no ``done`` yet) and ``done``."""
        return self._index.counts()

    def _require_producer(self, partition: int) -> Any:
        if partition not in self._partitions:
            raise ValueError(
                f"journal {self._topic} serves partitions {list(self._partitions)}, not {partition}"
            )
        if self._producer is None:
            raise RuntimeError("KafkaJournal.start() must be awaited before writing")
        return self._producer

    async def _rebuild(self) -> None:
        """Read every served partition from its beginning to its end offset as of now."""
        self._index = JournalIndex()
        self.corrupt_records = 0
        tps = [TopicPartition(self._topic, p) for p in self._partitions]
        if not tps:
            return
        consumer = kafka_clients.consumer(
            self._bootstrap,
            enable_auto_commit=False,
            group_id=None,
            fetch_max_wait_ms=kafka_clients.READ_TO_END_WAIT_MS,
        )
        try:
            await consumer.start()
            await self._read_to_end(consumer, tps)
        except KafkaError as exc:
            raise JournalUnavailableError(
                f"rebuild of partitions {list(self._partitions)}", None, repr(exc)
            ) from exc
        finally:
            await consumer.stop()

    async def _read_to_end(self, consumer: Any, tps: list[Any]) -> None:
        """Fold every record of ``tps`` below its end offset as of now into the index."""
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends: dict[Any, int] = await consumer.end_offsets(tps)
        pending = {tp for tp in tps if await consumer.position(tp) < ends[tp]}
        deadline = time.monotonic() + self._rebuild_timeout
        while pending:
            if time.monotonic() > deadline:
                first = min(pending, key=lambda tp: tp.partition)
                raise JournalUnavailableError(
                    "rebuild",
                    first.partition,
                    f"not read to end offset {ends[first]} within {self._rebuild_timeout}s",
                )
            batches = await consumer.getmany(*pending, timeout_ms=500)
            for tp, records in batches.items():
                for record in records:
                    if record.offset < ends[tp]:
                        self._apply(tp.partition, record.offset, record.key, record.value)
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)

    def _apply(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        """Fold one record into the index, or skip it (with a warning) if it does not read."""
        parsed = _parse_record_key(key)
        if parsed is None:
            self._skip(partition, offset, f"record key {key!r} is not 'key|issued' or 'key|done'")
            return
        effect, status = parsed
        if value is None:
            self._index.drop(effect, status)
            return
        try:
            entry = JournalEntry.decode(value)
        except JournalCorruptError as exc:
            self._skip(partition, offset, exc.problem)
            return
        if (entry.key, entry.status) != (effect, status):
            self._skip(
                partition, offset, f"entry {entry.status} {entry.key!r} under record key {key!r}"
            )
            return
        self._index.put(entry, partition)

    def _skip(self, partition: int, offset: int, problem: str) -> None:
        self.corrupt_records += 1
        logger.warning(
            "journal %s: skipping corrupt record at partition %s offset %s: %s",
            self._topic,
            partition,
            offset,
            problem,
        )

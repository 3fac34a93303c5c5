"""Reading runs from an agent's events topic: one run's events, and the latest of every run.

The agent writes every event of a run keyed by ``run_id`` (`agents.operator`), so a run's
events are all in the partition `RunDirectory` computes (the engine's partitioner), in ``seq``
order. Reads are ``read_committed``, so they see exactly the events of completed checkpoints:
a run's history is a prefix of what it will be, never holding an event a recovery took back.

Every read is bounded: by a deadline (`EventsUnavailableError` when the topic cannot be read
to its end in time), by the events kept per run (`HistoryError` past ``max_events``) and by
the runs kept by `RunHistory.runs` (the most recently active first, ``limit``). Records that are
not agent events (not JSON, no ``run_id``/``seq``) are skipped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from sluicegate.agents.exceptions import EventsUnavailableError, HistoryError, UnknownRunError
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.runtime.partitioner import partition_for

__all__ = ["DEFAULT_MAX_EVENTS", "RunHistory", "RunSummary", "fold", "newest_first"]

DEFAULT_MAX_EVENTS = 10_000
"""Events of one run `RunHistory.events` reads at most (a run has ``max_steps`` steps, a few
events each)."""

Event = dict[str, Any]


@dataclass(slots=True)
class RunSummary:
    """A run as its latest committed event shows it, with what its first event said."""

    run_id: str
    status: str
    step: int
    seq: int
    updated_at: float | None
    started_at: float | None = None
    goal: str | None = None
    forked_from: dict[str, Any] | None = None
    cost_usd: float = 0.0
    waiting: Event | None = None
    """The latest event when it is an ``approval_requested`` one: the call a person decides."""
    metadata: dict[str, Any] | None = None
    """The task's metadata, as its ``started`` (or ``forked``) event recorded it."""

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "step": self.step,
            "events": self.seq + 1,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "goal": self.goal,
            "forked_from": self.forked_from,
            "cost_usd": self.cost_usd,
        }


class RunHistory:
    """The runs of ``agent`` in its events ``topic``; see the module docstring."""

    def __init__(
        self,
        bootstrap: KafkaLike,
        agent: str,
        topic: str,
        *,
        read_timeout_s: float = 20.0,
        max_events: int = DEFAULT_MAX_EVENTS,
    ) -> None:
        self.bootstrap, self.agent, self.topic = bootstrap, agent, topic
        self._timeout, self._max_events = read_timeout_s, max_events

    async def events(self, run_id: str, *, from_offset: int | None = None) -> list[Event]:
        """Every committed event of ``run_id``, by ``seq``; `UnknownRunError` without any.

        ``from_offset``: where in its partition the run's first event is (`RunIndex` knows),
        so the read skips the events of older runs; None: from the beginning."""
        found: dict[int, Event] = {}

        def keep(partition: int, offset: int, event: Event) -> None:
            if event["run_id"] != run_id:
                return
            found[event["seq"]] = event  # a seq written twice: the later write holds
            if len(found) > self._max_events:
                raise HistoryError(run_id, event["seq"], f"more than {self._max_events} events")

        await self.read({self.partition_of(run_id, await self.partitions()): from_offset}, keep)
        if not found:
            raise UnknownRunError(self.agent, run_id, self.topic)
        return [found[seq] for seq in sorted(found)]

    async def runs(self, *, limit: int = 1000) -> list[RunSummary]:
        """The latest committed event of every run, the most recently updated first."""
        runs: dict[str, RunSummary] = {}
        await self.read(
            dict.fromkeys(range(await self.partitions())), lambda _p, _o, e: fold(runs, e)
        )
        return newest_first(runs.values())[:limit]

    @staticmethod
    def partition_of(run_id: str, partitions: int) -> int:
        """The partition of the events topic that holds the run's events."""
        return partition_for(run_id.encode(), partitions, input_partition=0)

    async def read(
        self, start: Mapping[int, int | None], keep: Callable[[int, int, Event], None]
    ) -> dict[int, int]:
        """Pass every committed agent event of the partitions of ``start`` to ``keep``
        (partition, offset, event), each from its offset there (None: the beginning) up to
        its end as of the read; the offsets to start from next time, per partition.

        Raises:
            EventsUnavailableError: the topic cannot be read to its end in time.
        """
        consumer = kafka_clients.consumer(
            self.bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # deleted by retention under us: the oldest left
        )
        try:  # started inside: a cancel during start must still stop it
            await consumer.start()
            tps = {TopicPartition(self.topic, p): offset for p, offset in start.items()}
            consumer.assign(list(tps))
            beginning = [tp for tp, offset in tps.items() if offset is None]
            if beginning:
                await consumer.seek_to_beginning(*beginning)
            for tp, offset in tps.items():
                if offset is not None:
                    consumer.seek(tp, offset)
            ends = await consumer.end_offsets(list(tps))  # read_committed: last stable offsets
            await self._read_to(consumer, ends, keep)
            return {tp.partition: await consumer.position(tp) for tp in tps}
        except KafkaError as exc:
            raise EventsUnavailableError(self.topic, repr(exc)) from exc
        finally:
            await consumer.stop()

    async def _read_to(
        self,
        consumer: AIOKafkaConsumer,
        ends: dict[TopicPartition, int],
        keep: Callable[[int, int, Event], None],
    ) -> None:
        # A record past the end as of the read is committed too (read_committed): it is kept,
        # as the next read starts after it.
        deadline = time.monotonic() + self._timeout
        left = {tp for tp, end in ends.items() if await consumer.position(tp) < end}
        while left:
            if time.monotonic() > deadline:
                raise EventsUnavailableError(
                    self.topic, f"partitions {sorted(tp.partition for tp in left)} not read "
                    f"to their end in {self._timeout}s"
                )  # fmt: skip
            for tp, records in (await consumer.getmany(*left, timeout_ms=200)).items():
                for record in records:
                    event = _event(record.value)
                    if event is not None:
                        keep(tp.partition, record.offset, event)
            left = {tp for tp in left if await consumer.position(tp) < ends[tp]}

    async def partitions(self) -> int:
        """The events topic's partition count.

        Raises:
            EventsUnavailableError: no such topic, or the broker cannot say.
        """
        return await self._partition_count()

    async def _partition_count(self) -> int:
        admin = kafka_clients.admin(self.bootstrap)
        try:
            await admin.start()
            (described,) = await admin.describe_topics([self.topic])
        except KafkaError as exc:
            raise EventsUnavailableError(self.topic, repr(exc)) from exc
        finally:
            await admin.close()
        if described.get("error_code") or not described.get("partitions"):
            raise EventsUnavailableError(self.topic, "no such topic")
        return len(described["partitions"])


def fold(runs: dict[str, RunSummary], event: Event) -> None:
    """Fold one event into ``runs`` (run id -> summary), in any order of the run's events: the
    summary shows the latest ``seq``, what the first event said and the costs so far.

    A model event is counted once per time it is folded: fold each event once."""
    summary = runs.get(event["run_id"])
    if summary is None:
        summary = runs[event["run_id"]] = RunSummary(event["run_id"], "", -1, -1, None)
    if event.get("type") in ("started", "forked"):
        summary.started_at = _number(event.get("at"))
        goal = event.get("goal")
        summary.goal = goal[:200] if isinstance(goal, str) else None
        metadata = event.get("metadata")
        summary.metadata = metadata if isinstance(metadata, dict) else None
        origin = event.get("forked_from")
        if isinstance(origin, dict):
            summary.forked_from = {"run_id": origin.get("run_id"), "step": origin.get("step")}
    if event.get("type") == "model":
        summary.cost_usd += _number(event.get("cost_usd")) or 0.0
    if event["seq"] >= summary.seq:
        summary.seq, summary.status = event["seq"], str(event.get("status", ""))
        summary.step = event["step"] if isinstance(event.get("step"), int) else -1
        summary.updated_at = _number(event.get("at"))
        summary.waiting = event if event.get("type") == "approval_requested" else None


def newest_first(runs: Iterable[RunSummary]) -> list[RunSummary]:
    """``runs``, the most recently updated first (then by run id, descending)."""
    return sorted(runs, key=lambda r: (r.updated_at or 0.0, r.run_id), reverse=True)


def _event(value: bytes | None) -> Event | None:
    """The agent event a record holds, or None for one that is not (skipped)."""
    try:
        event = json.loads(value or b"")
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    if not isinstance(event.get("run_id"), str) or not isinstance(event.get("seq"), int):
        return None
    return event if event["seq"] >= 0 else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from sluicegate.agents.exceptions import EventsUnavailableError, HistoryError, UnknownRunError
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.runtime.partitioner import partition_for

__all__ = ["DEFAULT_MAX_EVENTS", "RunHistory", "RunSummary"]

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

    async def events(self, run_id: str) -> list[Event]:
        """Every committed event of ``run_id``, by ``seq``; `UnknownRunError` without any."""
        found: dict[int, Event] = {}

        def keep(event: Event) -> None:
            if event["run_id"] != run_id:
                return
            found[event["seq"]] = event  # a seq written twice: the later write holds
            if len(found) > self._max_events:
                raise HistoryError(run_id, event["seq"], f"more than {self._max_events} events")

        partitions = await self._partition_count()
        partition = partition_for(run_id.encode(), partitions, input_partition=0)
        await self._read([partition], keep)
        if not found:
            raise UnknownRunError(self.agent, run_id, self.topic)
        return [found[seq] for seq in sorted(found)]

    async def runs(self, *, limit: int = 1000) -> list[RunSummary]:
        """The latest committed event of every run, the most recently updated first."""
        runs: dict[str, RunSummary] = {}

        def keep(event: Event) -> None:
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
                    summary.forked_from = {
                        "run_id": origin.get("run_id"),
                        "step": origin.get("step"),
                    }
            if event.get("type") == "model":
                summary.cost_usd += _number(event.get("cost_usd")) or 0.0
            if event["seq"] >= summary.seq:
                summary.seq, summary.status = event["seq"], str(event.get("status", ""))
                summary.step = event["step"] if isinstance(event.get("step"), int) else -1
                summary.updated_at = _number(event.get("at"))
                summary.waiting = event if event.get("type") == "approval_requested" else None

        await self._read(list(range(await self._partition_count())), keep)
        ordered = sorted(runs.values(), key=lambda r: (r.updated_at or 0.0, r.run_id), reverse=True)
        return ordered[:limit]

    async def _read(self, partitions: list[int], keep: Callable[[Event], None]) -> None:
        consumer = kafka_clients.consumer(
            self.bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:  # started inside: a cancel during start must still stop it
            await consumer.start()
            tps = [TopicPartition(self.topic, p) for p in partitions]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)  # read_committed: the last stable offsets
            await self._read_to(consumer, ends, keep)
        except KafkaError as exc:
            raise EventsUnavailableError(self.topic, repr(exc)) from exc
        finally:
            await consumer.stop()

    async def _read_to(
        self,
        consumer: AIOKafkaConsumer,
        ends: dict[TopicPartition, int],
        keep: Callable[[Event], None],
    ) -> None:
        deadline = time.monotonic() + self._timeout
        left = {tp for tp, end in ends.items() if end > 0}
        while left:
            if time.monotonic() > deadline:
                raise EventsUnavailableError(
                    self.topic, f"partitions {sorted(tp.partition for tp in left)} not read "
                    f"to their end in {self._timeout}s"
                )  # fmt: skip
            for tp, records in (await consumer.getmany(*left, timeout_ms=200)).items():
                for record in records:
                    if record.offset < ends[tp]:
                        event = _event(record.value)
                        if event is not None:
                            keep(event)
            left = {tp for tp in left if await consumer.position(tp) < ends[tp]}

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

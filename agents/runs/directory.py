"""What an agent's events sink says about its runs: which exist, which wait for approval.

``approve``/``reject`` (CLI and HTTP) ask it before writing a decision, and refuse one that
cannot apply: a run with no event is unknown (`UnknownRunError`, HTTP 404), a run whose latest
event is not an approval request is not waiting (`RunNotWaitingError`, HTTP 409). Without this
check a decision for a mistyped run was accepted with 202 and dead-lettered by the agent.

The agent writes every status change of a run to its events sink, keyed by ``run_id`` and
placed by the engine's partitioner, so all events of a run are in one partition that
`RunDirectory.lookup` computes. A lookup:

1. reads that partition with ``read_committed``, from where the previous lookup of the same
   partition stopped (the beginning, the first time), up to its end offset as of the lookup;
2. keeps, per run, the event with the highest ``seq``;
3. answers with that event as a `RunSeen`, or None.

Consistency: the events sink is exactly-once, so a lookup sees exactly the runs and statuses
of completed checkpoints. An approval request shows up about one checkpoint interval after the
run asked, which is also when any reader of the events topic (a person's tool, the demo's
approver) can first see it: whoever saw a request, then asks, finds the run waiting. A decision
taken but not yet in a completed checkpoint still shows the run waiting, so a second decision
in that window is accepted and then ignored by the run (logged). Events deleted by the topic's
retention are gone: a run that waited longer than the retention (default 7 days) and was not
seen by this process before looks unknown; decide with ``force`` then.

The directory keeps each partition's runs in memory (one small row per run) and opens a
consumer per lookup, so it holds no connection between requests.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from sluicegate.agents.exceptions import (
    EventsUnavailableError,
    RollingBackError,
    RunNotWaitingError,
    UnknownRunError,
)
from sluicegate.agents.runs.state import RunStatus
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients
from sluicegate.operators.runtime.partitioner import partition_for

__all__ = ["RunDirectory", "RunSeen"]


@dataclass(frozen=True, slots=True)
class RunSeen:
    """A run as its latest committed event shows it."""

    run_id: str
    status: str
    seq: int
    waits_on: str = ""
    """The call id the run waits on, when its latest event is an approval request."""


class RunDirectory:
    """The runs of ``agent`` as its events ``topic`` shows them; see the module docstring."""

    def __init__(
        self, bootstrap: KafkaLike, agent: str, topic: str, *, read_timeout_s: float = 10.0
    ) -> None:
        self.bootstrap, self.agent, self.topic = bootstrap, agent, topic
        self._timeout = read_timeout_s
        self._runs: dict[int, dict[str, RunSeen]] = {}
        self._next: dict[int, int] = {}  # partition -> the offset the next lookup reads from
        self._lock = asyncio.Lock()
        self._partitions: int | None = None

    async def lookup(self, run_id: str) -> RunSeen | None:
        """The run's latest committed event, read up to now; None if it has none."""
        async with self._lock:
            partition = await self._catch_up(run_id)
        return self._runs.get(partition, {}).get(run_id)

    async def check_decision(self, run_id: str, call_id: str = "") -> RunSeen:
        """The run, if it waits for a decision on ``call_id`` ("": whatever call it waits on);
        else raise `UnknownRunError` or `RunNotWaitingError`."""
        seen = await self.lookup(run_id)
        if seen is None:
            raise UnknownRunError(self.agent, run_id, self.topic)
        if seen.status != RunStatus.WAITING_APPROVAL.value:
            raise RunNotWaitingError(self.agent, run_id, seen.status)
        if call_id and seen.waits_on and call_id != seen.waits_on:
            raise RunNotWaitingError(
                self.agent, run_id, seen.status, waits_on=seen.waits_on, call_id=call_id
            )
        return seen

    async def check_rollback(self, run_id: str) -> RunSeen:
        """The run, if a rollback may be asked of it: it has events and is not being rolled
        back already; else raise `UnknownRunError` or `RollingBackError`."""
        seen = await self.lookup(run_id)
        if seen is None:
            raise UnknownRunError(self.agent, run_id, self.topic)
        if seen.status == RunStatus.ROLLING_BACK.value:
            raise RollingBackError(self.agent, run_id)
        return seen

    async def _catch_up(self, run_id: str) -> int:
        """Fold the committed events of ``run_id``'s partition into the index; return it."""
        consumer = kafka_clients.consumer(
            self.bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # deleted by retention under us: the oldest left
        )
        try:  # started inside: a cancel during start must still stop it
            partitions = self._partitions or await self._partition_count()
            partition = partition_for(run_id.encode(), partitions, input_partition=0)
            await consumer.start()
            await self._read_to_end(consumer, TopicPartition(self.topic, partition))
            return partition
        except KafkaError as exc:
            raise EventsUnavailableError(self.topic, repr(exc)) from exc
        finally:
            await consumer.stop()

    async def _partition_count(self) -> int:
        """The events topic's partition count, asked once (a count that changed would move
        every run's events: the engine refuses such a topic)."""
        admin = kafka_clients.admin(self.bootstrap)
        try:
            await admin.start()
            (described,) = await admin.describe_topics([self.topic])
        finally:
            await admin.close()
        if described.get("error_code") or not described.get("partitions"):
            raise EventsUnavailableError(self.topic, "no such topic")
        self._partitions = len(described["partitions"])
        return self._partitions

    async def _read_to_end(self, consumer: AIOKafkaConsumer, tp: TopicPartition) -> None:
        consumer.assign([tp])
        if tp.partition in self._next:
            consumer.seek(tp, self._next[tp.partition])
        else:
            await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]  # read_committed: the last stable offset
        runs = self._runs.setdefault(tp.partition, {})
        deadline = time.monotonic() + self._timeout
        while await consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise EventsUnavailableError(
                    self.topic, f"partition {tp.partition} not read to {end} in {self._timeout}s"
                )
            for record in (await consumer.getmany(tp, timeout_ms=200)).get(tp, []):
                seen = _seen(record.value)
                if seen is not None:
                    known = runs.get(seen.run_id)
                    if known is None or known.seq <= seen.seq:
                        runs[seen.run_id] = seen
        self._next[tp.partition] = await consumer.position(tp)


def _seen(value: bytes | None) -> RunSeen | None:
    """The run an event shows, or None for a record that is not an agent event."""
    try:
        event = json.loads(value or b"")
        run_id, status, seq = event["run_id"], event["status"], event["seq"]
    except (ValueError, KeyError, TypeError):
        return None
    if not (isinstance(run_id, str) and isinstance(status, str) and isinstance(seq, int)):
        return None
    waiting = event.get("type") == "approval_requested"
    return RunSeen(run_id, status, seq, str(event.get("call_id", "")) if waiting else "")

"""The operators a faust app becomes: `AgentOperator` runs an agent's body over its records,
`TakeOperator` over batches of them (``stream.take(...)``), `GroupByOperator` re-keys records
for ``stream.group_by``.

`AgentOperator.process`, per record, in order (synchronous: the subtask calls it straight from
its loop, so one record is done before the next and a barrier falls between two records):

1. decode the record as faust would, with the agent's topic's schema (key and value codecs,
   ``faust.Record`` models); a record that does not decode raises, and is dead-lettered;
2. bind the app's producer and tables to this record (`binding.AppBinding.bound`; with a
   windowed table, the record's faust event is faust's current event, whose timestamp is the
   record's Kafka timestamp) and step the agent over it until it awaits its next record
   (`stepping.AgentStepper`);
3. send each ``yield``ed reply to the agent's sinks (``sink=[...]``), through faust's encoding;
4. emit what was sent, in order, through the context: to topics between operators, or
   to exactly-once sinks, published when the checkpoint holding them completes;
5. an agent that raised (or awaited real I/O) fails the record: it is dead-lettered with the
   error, its outputs are dropped, and the next record starts the agent again.

`TakeOperator` (an agent that iterates ``stream.take(max_, within=s)``) buffers each decoded
record in its partition's keyed state instead (`takes.TakeBuffer`), and steps the agent over a
batch when `batching.TakeRule` says so: at the record that fills it, or at the wake-up armed
for its deadline (`Operator.on_wake`, re-armed by `Operator.open` for a restored buffer).
Steps 2-4 are then the same for the batch, with its last record's event as faust's current
event. A batch the agent fails on is consumed, as in faust (its buffer is emptied, the agent
starts again): at a record, that record is dead-lettered with an `AgentStepError` naming the
batch's offsets; at a deadline, where there is no record to dead-letter, the error is logged
and counted (``sluicegate status``: ``batches``, ``failed``), and the job goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from faust.events import Event
from faust.models.fields import FieldDescriptor
from faust.types.tuples import Message

from sluicegate.faust_adapter.batching import TakeRule, Verdict
from sluicegate.faust_adapter.binding import AppBinding, check_sends
from sluicegate.faust_adapter.exceptions import AgentStepError
from sluicegate.faust_adapter.plan import AgentPlan, Repartition, Take, TopicPlan
from sluicegate.faust_adapter.stepping import AgentStepper, Arrival, Batch, Failed, run_now
from sluicegate.faust_adapter.takes import TakeBuffer
from sluicegate.operators.contract import Context, OpenContext, Operator, Record

__all__ = ["TAKE_WAKE_KEY", "AgentOperator", "GroupByOperator", "TakeOperator"]

logger = logging.getLogger(__name__)

TAKE_WAKE_KEY = b"faust-take"
"""The key `TakeOperator` wakes itself with (one wake-up per partition's buffer)."""


def _message(record: Record) -> Message:
    return Message(
        record.topic, record.partition, record.offset, record.timestamp_ms / 1000.0, 0, [],
        record.key, record.value, None,
    )  # fmt: skip


class _Decoder:
    """Records of ``topic`` decoded with its faust schema."""

    def __init__(self, app: Any, topic: TopicPlan) -> None:
        self._app, self._channel = app, topic.channel
        self._schema = topic.channel.schema

    def arrival(self, record: Record) -> Arrival:
        message = _message(record)
        key = self._schema.loads_key(self._app, message) if record.key is not None else None
        value = self._schema.loads_value(self._app, message)
        return Arrival(key, value, lambda: self._event(key, value, message), message.timestamp)

    def _event(self, key: Any, value: Any, message: Message) -> Any:
        return Event(self._app, key, value, message.headers, message)


class AgentOperator(Operator):
    """One subtask of an agent's body (steps in the module docstring)."""

    def __init__(self, app: Any, agent: AgentPlan, sinks: dict[str, Any]) -> None:
        self._agent = agent
        self._binding = AppBinding.install(app)
        self._decoder = _Decoder(app, agent.body_input)
        self._stepper = AgentStepper(agent.name, agent.function)
        self._sinks = sinks
        self._outputs = frozenset((*agent.sends, *agent.sinks))
        self._windowed = self._binding.windowed

    def process(self, record: Record, ctx: Context) -> None:
        self._step(self._decoder.arrival(record), ctx)

    def _step(self, fed: Arrival | Batch, ctx: Context) -> None:
        """Steps 2-4 of the module docstring for a record or a batch; raises on step 5."""
        last = fed.arrivals[-1] if isinstance(fed, Batch) else fed
        event = last.event() if self._windowed and last.event is not None else None
        with self._binding.bound(self._agent.name, ctx.state, event) as outbox:
            step = self._stepper.feed(fed)
            for reply in step.replies:
                for sink in self._sinks.values():
                    run_now(self._agent.name, sink.send(value=reply))
        if isinstance(step, Failed):
            raise step.error
        check_sends(self._agent.name, outbox, self._outputs, "agent")
        for out in outbox:
            ctx.emit(out.topic, out.value, key=out.key)

    async def close(self) -> None:
        self._stepper.close()


class TakeOperator(AgentOperator):
    """One subtask of an agent's body that iterates ``stream.take(...)``: batches per input
    partition (module docstring); ``clock`` is the wall clock ``within`` is measured by."""

    def __init__(
        self, app: Any, agent: AgentPlan, sinks: dict[str, Any], *,
        clock: Callable[[], float] = time.time,
    ) -> None:  # fmt: skip
        super().__init__(app, agent, sinks)
        take: Take | None = agent.take
        if take is None:
            raise ValueError(f"agent {agent.name} takes no batches")
        self._rule = TakeRule(take.max_, take.within_s)
        self._clock = clock
        self._yielded = self._failed = 0

    async def open(self, ctx: OpenContext) -> None:
        """Re-arm the deadline of each restored non-empty buffer."""
        now = self._clock()
        for topic, partition in ctx.input_partitions:
            pending = TakeBuffer(ctx.state(topic, partition), self._agent.name).pending()
            verdict = self._rule.restored(pending, now)
            if verdict.wake_after_s is not None:
                ctx.wake(topic, partition, TAKE_WAKE_KEY, after_s=verdict.wake_after_s)

    def process(self, record: Record, ctx: Context) -> None:
        """Buffer ``record`` (decoded first: one that does not decode is dead-lettered now, not
        its batch), and yield the batch if it is full or due."""
        self._decoder.arrival(record)
        buffer = TakeBuffer(ctx.state, self._agent.name)
        verdict = self._rule.value_added(buffer.pending(), self._clock())
        buffer.append(record)
        self._settle(buffer, verdict, ctx, at_record=True)

    def on_wake(self, key: bytes, ctx: Context) -> None:
        """The deadline of ``ctx``'s partition's buffer: yield it if it is due."""
        if key != TAKE_WAKE_KEY:
            return
        buffer = TakeBuffer(ctx.state, self._agent.name)
        self._settle(buffer, self._rule.woken(buffer.pending(), self._clock()), ctx,
                     at_record=False)  # fmt: skip

    def status_counts(self) -> Mapping[str, Mapping[str, int]]:
        return {"batches": {"yielded": self._yielded, "failed": self._failed}}

    def _settle(
        self, buffer: TakeBuffer, verdict: Verdict, ctx: Context, *, at_record: bool
    ) -> None:
        """Do what ``verdict`` says: take the batch out of the buffer, keep the rest, arm the
        wake-up, then step the agent over the batch."""
        topic = self._agent.body_input.name
        records = buffer.take(verdict.flush, topic, ctx.partition) if verdict.flush else []
        buffer.save(verdict.pending)
        if verdict.wake_after_s is not None:
            ctx.wake(TAKE_WAKE_KEY, after_s=verdict.wake_after_s)
        if not records:
            return
        try:
            self._step(Batch(tuple(self._decoder.arrival(r) for r in records)), ctx)
        except Exception as exc:
            self._failed += 1
            error = AgentStepError(
                self._agent.name,
                f"failed on a batch of {len(records)} values ({topic}[{ctx.partition}] offsets "
                f"{records[0].offset}..{records[-1].offset}, consumed): {exc!r}",
            )
            if at_record:
                raise error from exc
            logger.error("%s", error, exc_info=exc,
                         extra={"agent": self._agent.name, "partition": ctx.partition})  # fmt: skip
            return
        self._yielded += 1


class GroupByOperator(Operator):
    """``stream.group_by(key)``: each record re-keyed by ``key`` of its value, its value bytes
    unchanged (as faust's ``event.forward``), into the repartition topic."""

    def __init__(self, app: Any, agent: AgentPlan, repartition: Repartition) -> None:
        self._agent, self._repartition = agent, repartition
        self._decoder = _Decoder(app, agent.source)
        self._app = app

    def process(self, record: Record, ctx: Context) -> None:
        value = self._decoder.arrival(record).value
        key_of = self._repartition.key
        if isinstance(key_of, FieldDescriptor):
            new_key = key_of.getattr(value)
        else:
            new_key = run_now(self._agent.name, key_of(value))
        channel = self._repartition.topic.channel
        encoded, _ = channel.prepare_key(new_key, None)
        if encoded is not None and not isinstance(encoded, bytes):
            encoded = str(encoded).encode()
        ctx.emit(self._repartition.topic.name, record.value, key=encoded)

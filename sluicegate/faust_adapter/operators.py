"""The operators a faust app becomes: `AgentOperator` runs an agent's body over its records,
`GroupByOperator` re-keys records for ``stream.group_by``.

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
"""

from __future__ import annotations

from typing import Any

from faust.events import Event
from faust.models.fields import FieldDescriptor
from faust.types.tuples import Message

from sluicegate.faust_adapter.binding import AppBinding
from sluicegate.faust_adapter.exceptions import AgentStepError
from sluicegate.faust_adapter.plan import AgentPlan, Repartition, TopicPlan
from sluicegate.faust_adapter.stepping import AgentStepper, Arrival, Failed, run_now
from sluicegate.operators.contract import Context, Operator, Record

__all__ = ["AgentOperator", "GroupByOperator"]


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
        return Arrival(key, value, lambda: self._event(key, value, message))

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
        arrival = self._decoder.arrival(record)
        event = arrival.event() if self._windowed and arrival.event is not None else None
        with self._binding.bound(self._agent.name, ctx.state, event) as outbox:
            step = self._stepper.feed(arrival)
            for reply in step.replies:
                for sink in self._sinks.values():
                    run_now(self._agent.name, sink.send(value=reply))
        if isinstance(step, Failed):
            raise step.error
        for out in outbox:
            if out.topic not in self._outputs:
                raise AgentStepError(
                    self._agent.name,
                    f"sent to {out.topic!r}, which sluicegate did not find among the topics "
                    "and agents its code names (a topic made inside the agent?): name it at "
                    "module level",
                )
            ctx.emit(out.topic, out.value, key=out.key)

    async def close(self) -> None:
        self._stepper.close()


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

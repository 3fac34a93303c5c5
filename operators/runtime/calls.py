"""How a subtask calls its operator: process functions, wake-ups, and what a call emitted.

* A **synchronous** process function is called directly (`OperatorCalls.call_now`): no
  coroutine per record, its outputs appended to the subtask's batches without I/O, shipped
  by the subtask at the end of the fetch cycle.
* An **asynchronous** one runs through the `KeyedExecutor` (one call at a time per key, a
  bounded number at once); what a call emitted is shipped as soon as it returns.
* A call that raises has its input record dead-lettered, and none of its outputs or wake-ups
  count. An emit to a topic that is not an output of the operator is such a failure.
* Wake-ups (`Operator.on_wake`) are queued by key and run once due, between fetches, the same
  way as process calls (directly or through the executor); one that raises fails the subtask.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Protocol, TypeAlias

from aiokafka import ConsumerRecord

from sluicegate.operators.contract import FunctionOperator, Operator, Record
from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.runtime.context import Emitted, RecordContext
from sluicegate.operators.runtime.executor import KeyedExecutor
from sluicegate.operators.runtime.wakes import WakeQueue, WakeUp
from sluicegate.operators.state.store import PartitionState

__all__ = ["Emitter", "OperatorCalls", "record_of"]

Incoming: TypeAlias = ConsumerRecord[bytes, bytes]


def record_of(incoming: Incoming) -> Record:
    """The `Record` a process function gets for ``incoming`` (built by ``tuple.__new__``:
    a named tuple's own ``__new__`` is a Python function, twice the cost, once per record)."""
    value = incoming.value if incoming.value is not None else b""
    return tuple.__new__(Record, (
        incoming.topic, incoming.partition, incoming.offset, incoming.key, value,
        incoming.timestamp,
    ))  # fmt: skip


def _is_async_callable(function: object) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    call = getattr(function, "__call__", None)  # noqa: B004 - its kind, not whether callable
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)


class Emitter(Protocol):
    """Where the calls' outputs go (`operators.runtime.outputs.Outputs`)."""

    def send(
        self, emitted: Sequence[Emitted], input_partition: int, source: Record | None
    ) -> None: ...

    async def ship(self) -> None: ...


class OperatorCalls:
    """The calls of subtask ``name`` (of operator ``uid``) into ``operator``; see the module
    docstring.

    What a call emits goes to ``outputs`` (the subtask's `Outputs`, which stamps it with the
    writer's current interval); ``dead_letter`` sends a failed call's input away.
    """

    def __init__(
        self,
        name: str,
        operator: Operator,
        *,
        uid: str,
        outputs_allowed: Collection[str],
        owned: Collection[TopicPartition],
        states: Callable[[str, int], PartitionState],
        outputs: Emitter,
        dead_letter: Callable[[Incoming, Exception], Awaitable[None]],
        max_in_flight: int,
    ) -> None:
        self._name, self._uid = name, uid
        self._operator = operator
        self._process = (
            operator.function if isinstance(operator, FunctionOperator) else operator.process
        )
        self.direct = not _is_async_callable(self._process)
        """A synchronous process function: records are processed without a coroutine."""
        self.executor = KeyedExecutor(max_in_flight)
        self.wakes = WakeQueue()
        self._allowed = outputs_allowed
        self._owned = owned
        self._states = states
        self._outputs = outputs
        self._dead_letter = dead_letter

    async def process(self, incoming: Incoming) -> None:
        """Process one data record (directly, or submitted to the executor)."""
        if self.direct:
            if (failure := self.call_now(incoming)) is not None:
                await self._dead_letter(incoming, failure)
            return
        record = record_of(incoming)
        ctx = self._context(incoming.topic, incoming.partition, record)
        await self.executor.submit(record.key, lambda: self._call(incoming, record, ctx))

    def call_now(self, incoming: Incoming) -> Exception | None:
        """Process ``incoming`` with the synchronous process function; the exception that
        dead-letters it, if any."""
        record = record_of(incoming)
        ctx = RecordContext(
            incoming.topic, incoming.partition, record, self._states, time.monotonic
        )
        try:
            if self._process(record, ctx) is not None:
                raise TypeError(
                    "the process function returned a value: a plain function returns None, "
                    "one that awaits is declared async def"
                )
            self._check_emits(ctx)
        except Exception as exc:  # noqa: BLE001 - any failure of user code dead-letters
            return exc
        if ctx.emitted or ctx.wakes:
            self._finish(ctx, record)
        return None

    async def _call(self, incoming: Incoming, record: Record, ctx: RecordContext) -> None:
        """One call of the asynchronous process function, in the executor."""
        try:
            result = self._process(record, ctx)
            if result is not None:
                await result
            self._check_emits(ctx)
        except Exception as exc:  # noqa: BLE001 - any failure of user code dead-letters
            await self._dead_letter(incoming, exc)
            return
        if ctx.emitted or ctx.wakes:
            self._finish(ctx, record)
            await self._outputs.ship()  # do not wait for the fetch cycle's end

    def _context(self, topic: str, partition: int, record: Record | None) -> RecordContext:
        return RecordContext(topic, partition, record, self._states, time.monotonic)

    def _finish(self, ctx: RecordContext, source: Record | None) -> None:
        if ctx.emitted:
            self._outputs.send(ctx.emitted, ctx.partition, source)
        for wake in ctx.wakes:
            self.schedule_wake(wake)

    def _check_emits(self, ctx: RecordContext) -> None:
        for emitted in ctx.emitted:
            if emitted.topic not in self._allowed:
                raise ValueError(f"emit to {emitted.topic!r}, not an output of {self._uid}")

    # -- wake-ups -------------------------------------------------------------------------

    def schedule_wake(self, wake: WakeUp) -> None:
        """Queue a call of `Operator.on_wake`; it runs once due, between fetches."""
        if TopicPartition(wake.topic, wake.partition) not in self._owned:
            raise ValueError(f"{self._name} cannot wake {wake.topic}[{wake.partition}]")
        self.wakes.push(wake)

    async def run_due_wakes(self) -> None:
        """Run (or submit) the wake-ups that are due."""
        for wake in self.wakes.pop_due(time.monotonic()):
            if self.direct:
                await self._wake(wake)
            else:
                await self.executor.submit(wake.key, functools.partial(self._wake, wake))

    async def _wake(self, wake: WakeUp) -> None:
        """Run one wake-up; an exception here is the operator's bug and fails the subtask."""
        ctx = self._context(wake.topic, wake.partition, None)
        result = self._operator.on_wake(wake.key, ctx)
        if isinstance(result, Awaitable):
            await result
        self._check_emits(ctx)
        self._finish(ctx, None)
        if ctx.emitted:
            await self._outputs.ship()

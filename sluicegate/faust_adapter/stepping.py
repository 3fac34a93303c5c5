"""Stepping a faust agent one record at a time, sans-IO.

A faust agent is ``async def agent(stream): async for value in stream: ...``, or an async
generator that ``yield``s replies. The adapter never hands it to an event loop as a task:
`AgentStepper` drives its coroutine by hand with ``send``. `FeedStream` is the ``stream`` the
agent iterates; awaiting its next value yields a private marker up to the stepper, which is how
the stepper knows that the agent has finished with a record and waits for the next one. So one
record's processing completes before the next begins, and a barrier between two records is a
consistent cut of the agent's state (its tables; its local variables are not state, see
docs/faust.md).

``stream.take(max_, within=s)`` (and ``take_events``, ``take_with_timestamp``) is recorded in
`FeedStream.takes` as a `TakeCall`; the agent then awaits a `Batch` instead of an `Arrival`,
and the stepper is fed whole batches, which the operator buffers (`batching`, `takes`).

`AgentStepper.feed` performs, in order:

1. start the coroutine if there is none (the first record, or the one after a failure: faust's
   supervisor restarts a crashed agent the same way), running it to its first wait;
2. send the arrival into the coroutine;
3. resume it at once while it yields bare ``None`` (``asyncio.sleep(0)``, which faust's own
   send path awaits);
4. the marker: the agent awaits its next value, so the record is done: `Awaiting`, with the
   replies it ``yield``ed meanwhile;
5. the coroutine returned: `Finished`; it raised: `Failed` with the error; it yielded anything
   else (a future: it awaits real I/O, which would let another record's call interleave with
   this one): the coroutine is closed and `Failed` carries an `AgentStepError` saying so.

Nothing here imports faust or an event loop; `tests/unit/faust_adapter/test_stepping.py` drives
plain ``async def`` functions through it.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, Literal

from sluicegate.faust_adapter.exceptions import AgentStepError, UnsupportedFeatureError

__all__ = [
    "AgentStepper",
    "Arrival",
    "Awaiting",
    "Batch",
    "Failed",
    "FeedStream",
    "Finished",
    "GroupByCall",
    "Step",
    "TakeCall",
    "where_of",
]


@dataclass(frozen=True, slots=True)
class Arrival:
    """One record as the agent sees it: its decoded key and value, and its faust event (built
    on demand, for ``stream.events()`` and ``stream.current_event``)."""

    key: Any
    value: Any
    event: Callable[[], Any] | None = None
    timestamp: float | None = None
    """The record's Kafka timestamp in seconds (``event.message.timestamp`` in faust)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """The records of one ``stream.take(...)`` batch, oldest first (never empty)."""

    arrivals: tuple[Arrival, ...]


@dataclass(frozen=True, slots=True)
class Awaiting:
    """The agent finished the record and awaits the next one; ``replies`` it yielded."""

    replies: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Finished:
    """The agent returned (left its ``async for``); a later record starts it again."""

    replies: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Failed:
    """The agent raised ``error`` (or did something the adapter cannot step through)."""

    error: BaseException
    replies: tuple[Any, ...] = ()


Step = Awaiting | Finished | Failed


@dataclass(frozen=True, slots=True)
class GroupByCall:
    """``stream.group_by(key, name=..., topic=..., partitions=...)`` as the agent called it."""

    key: Any
    name: str | None
    topic: Any
    partitions: int | None
    where: str


TakeKind = Literal["take", "take_events", "take_with_timestamp"]


@dataclass(frozen=True, slots=True)
class TakeCall:
    """``stream.take(max_, within)`` (or ``take_events``, ``take_with_timestamp(max_, within,
    timestamp_field_name)``) as the agent called it; ``within`` in seconds, None for none."""

    kind: TakeKind
    max_: Any
    within: float | None
    timestamp_field: str | None
    where: str


class _Next:
    """Awaited by `FeedStream`: yields the marker, and returns what the stepper sends back."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, Any, Arrival | Batch]:
        sent = yield _NEXT
        if not isinstance(sent, Arrival | Batch):
            raise AgentStepError("?", f"resumed with {type(sent).__name__}, not a record")
        return sent


class _Stopped(BaseException):
    """Thrown into an agent to stop it (a BaseException: ``except Exception`` lets it by)."""


_NEXT = object()
"""What the coroutine yields when it awaits the next record."""


def where_of(depth: int) -> str:
    """``file:line`` of the frame ``depth`` calls above the caller."""
    frame = sys._getframe(depth + 1)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


Mode = Literal["values", "items", "events"]


_SUPPORTED = (
    "supported: async for over the stream, .items(), .events(), .group_by(...), .take(...), "
    ".take_events(...), .take_with_timestamp(...)"
)


class FeedStream:
    """The ``stream`` a stepped agent iterates: ``async for value in stream``,
    ``stream.items()`` (key, value), ``stream.events()`` (faust events), ``stream.group_by``
    (recorded in `calls`; the records it gets are grouped already), ``stream.take(...)``,
    ``take_events`` and ``take_with_timestamp`` (recorded in `takes`; fed `Batch`es) and
    ``stream.current_event`` (in a batch: its last record's). Any other stream method raises
    `UnsupportedFeatureError` naming the agent's line."""

    def __init__(self) -> None:
        self.calls: list[GroupByCall] = []
        self.takes: list[TakeCall] = []
        self.modes: list[tuple[Mode, str]] = []
        self.current: Arrival | None = None

    def __aiter__(self) -> FeedStream:
        return self

    async def __anext__(self) -> Any:
        return (await self._next()).value

    async def _next(self) -> Arrival:
        sent = await _Next()
        if isinstance(sent, Batch):
            raise AgentStepError("?", "iterates the stream itself after calling stream.take")
        self.current = sent
        return sent

    async def _next_batch(self) -> Batch:
        sent = await _Next()
        if not isinstance(sent, Batch):
            raise AgentStepError("?", "iterates stream.take and the stream itself")
        self.current = sent.arrivals[-1]
        return sent

    def take(self, max_: int, within: Any) -> _Batches:
        return self._take(TakeCall("take", max_, _seconds(within), None, where_of(1)))

    def take_events(self, max_: int, within: Any) -> _Batches:
        return self._take(TakeCall("take_events", max_, _seconds(within), None, where_of(1)))

    def take_with_timestamp(self, max_: int, within: Any, timestamp_field_name: str) -> _Batches:
        call = TakeCall("take_with_timestamp", max_, _seconds(within), timestamp_field_name,
                        where_of(1))  # fmt: skip
        return self._take(call)

    def _take(self, call: TakeCall) -> _Batches:
        self.takes.append(call)
        return _Batches(self, call)

    def items(self) -> _View:
        self.modes.append(("items", where_of(1)))
        return _View(self, "items")

    def events(self) -> _View:
        self.modes.append(("events", where_of(1)))
        return _View(self, "events")

    def group_by(
        self,
        key: Any,
        *,
        name: str | None = None,
        topic: Any = None,
        partitions: int | None = None,
    ) -> FeedStream:
        self.calls.append(GroupByCall(key, name, topic, partitions, where_of(1)))
        return self

    @property
    def current_event(self) -> Any:
        if self.current is None or self.current.event is None:
            return None
        return self.current.event()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "noack_take":
            raise UnsupportedFeatureError(
                "stream.noack_take", where_of(1),
                "sluicegate acknowledges by checkpoints, not per event: use stream.take",
            )  # fmt: skip
        raise UnsupportedFeatureError(f"stream.{name}", where_of(1), _SUPPORTED)


def _seconds(within: Any) -> float | None:
    """``within`` as faust reads it (``want_seconds``): seconds, a ``timedelta``; falsy is no
    deadline."""
    if not within:
        return None
    if hasattr(within, "total_seconds"):
        return float(within.total_seconds())
    if isinstance(within, int | float) and not isinstance(within, bool):
        return float(within)
    raise UnsupportedFeatureError(
        f"stream.take(within={within!r})", where_of(2), "within is seconds or a timedelta"
    )


class _Batches:
    """What ``stream.take(...)`` returns: an async iterator of lists, each a `Batch` fed to the
    stepper as the values (``take``), the faust events (``take_events``) or the values with
    their Kafka timestamp (seconds) set under ``timestamp_field_name`` when they are dicts
    (``take_with_timestamp``, as faust does)."""

    def __init__(self, stream: FeedStream, call: TakeCall) -> None:
        self._stream, self._call = stream, call

    def __aiter__(self) -> _Batches:
        return self

    async def __anext__(self) -> list[Any]:
        batch = await self._stream._next_batch()
        kind = self._call.kind
        if kind == "take_events":
            return [a.event() if a.event is not None else None for a in batch.arrivals]
        values = [a.value for a in batch.arrivals]
        field_name = self._call.timestamp_field
        if kind == "take_with_timestamp" and field_name:
            for arrival in batch.arrivals:
                if isinstance(arrival.value, dict):
                    arrival.value[field_name] = arrival.timestamp
        return values

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedFeatureError(
            f"stream.{self._call.kind}(...).{name}", where_of(1),
            "iterate the batches with async for",
        )  # fmt: skip


class _View:
    """``stream.items()`` or ``stream.events()``: the same records, seen otherwise."""

    def __init__(self, stream: FeedStream, mode: Mode) -> None:
        self._stream, self._mode = stream, mode

    def __aiter__(self) -> _View:
        return self

    async def __anext__(self) -> Any:
        arrival = await self._stream._next()
        if self._mode == "items":
            return arrival.key, arrival.value
        return arrival.event() if arrival.event is not None else None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedFeatureError(
            f"stream.{self._mode}().{name}", where_of(1),
            "call group_by on the stream itself, before items() or events()",
        )  # fmt: skip


AgentFunction = Callable[[Any], Any]
"""``async def agent(stream)``, or an async generator function of the stream."""


@dataclass(slots=True)
class AgentStepper:
    """Drives one agent over records fed one at a time; steps in the module docstring.

    ``name`` names the agent in errors; ``make_stream`` makes the `FeedStream` of each (re)start.
    """

    name: str
    function: AgentFunction
    make_stream: Callable[[], FeedStream] = FeedStream
    stream: FeedStream | None = None
    _coroutine: Coroutine[Any, Any, None] | None = None
    _replies: list[Any] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self._coroutine is not None

    def start(self) -> Step:
        """Start the agent and run it to its first wait (or its end)."""
        self.close()
        self.stream = self.make_stream()
        try:
            result = self.function(self.stream)
            if inspect.isasyncgen(result):
                self._coroutine = _drain(result, self._replies)
            elif inspect.iscoroutine(result):
                self._coroutine = result
            else:
                raise AgentStepError(
                    self.name, "is neither an async def function nor an async generator"
                )
        except Exception as exc:  # noqa: BLE001 - the agent's own error, handed back
            return Failed(exc)
        return self._resume(None)

    def feed(self, arrival: Arrival | Batch) -> Step:
        """Run the agent over ``arrival`` (a record, or a batch of them when it takes
        batches) until it awaits the next one."""
        if self._coroutine is None:
            started = self.start()
            if not isinstance(started, Awaiting):
                return started
        return self._resume(arrival)

    def close(self) -> None:
        """Stop the agent: `_Stopped` is thrown to where it waits, which runs its ``finally``
        blocks.

        Not ``coroutine.close()``: ``GeneratorExit`` closes the awaitable a coroutine waits on
        instead of reaching the agent, and for an async-generator agent that is the ``asend``
        of its next reply, whose close leaves the generator marked running (the event loop's
        ``aclose()`` of it at shutdown then fails)."""
        coroutine, self._coroutine = self._coroutine, None
        self._replies.clear()
        if coroutine is None:
            return
        try:
            coroutine.throw(_Stopped())
        except (_Stopped, StopIteration, StopAsyncIteration):
            return
        except Exception:  # noqa: BLE001 - an agent's finally that raises while it stops
            return
        coroutine.close()  # it caught _Stopped and waited again: stop it all the same

    def _resume(self, sent: Arrival | Batch | None) -> Step:
        coroutine = self._coroutine
        assert coroutine is not None
        value: Any = sent
        try:
            while True:
                yielded = coroutine.send(value)
                value = None
                if yielded is _NEXT:
                    return Awaiting(self._take_replies())
                if yielded is not None:
                    raise AgentStepError(
                        self.name,
                        f"awaited {type(yielded).__name__} inside a record; an agent run by "
                        "sluicegate may await only sends (topic.send, agent.send) while it "
                        "handles a record",
                    )
        except StopIteration:
            self._coroutine = None
            return Finished(self._take_replies())
        except Exception as exc:  # noqa: BLE001 - the agent's own error, handed back
            replies = self._take_replies()
            self.close()
            return Failed(exc, replies)

    def _take_replies(self) -> tuple[Any, ...]:
        replies = tuple(self._replies)
        self._replies.clear()
        return replies


async def _drain(generator: Any, replies: list[Any]) -> None:
    """An async-generator agent as a coroutine: what it yields are replies."""
    async for reply in generator:
        replies.append(reply)


def run_now(name: str, awaitable: Any) -> Any:
    """The result of ``awaitable`` (a coroutine that awaits only what completes at once, such
    as faust's send path or an ``async def`` group_by key), without an event loop."""
    if not inspect.isawaitable(awaitable):
        return awaitable
    iterator = awaitable.__await__()
    try:
        while True:
            if iterator.send(None) is not None:
                iterator.close()
                raise AgentStepError(name, "awaited real I/O where only sends may be awaited")
    except StopIteration as done:
        return done.value

"""The sans-IO core of the faust adapter: an agent's coroutine stepped one record at a time,
without faust, a broker or an event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from sluicegate.faust_adapter.exceptions import AgentStepError, UnsupportedFeatureError
from sluicegate.faust_adapter.stepping import (
    AgentStepper,
    Arrival,
    Awaiting,
    Batch,
    Failed,
    FeedStream,
    Finished,
    run_now,
)


def arrival(value: Any, key: Any = None) -> Arrival:
    return Arrival(key, value, lambda: ("event", key, value))


def test_each_record_completes_before_the_next_and_the_agent_waits_between() -> None:
    seen: list[tuple[str, Any]] = []

    async def agent(stream: Any) -> None:
        seen.append(("started", None))
        async for value in stream:
            seen.append(("begin", value))
            seen.append(("end", value))

    stepper = AgentStepper("a", agent)
    assert stepper.feed(arrival(1)) == Awaiting()
    assert seen == [("started", None), ("begin", 1), ("end", 1)]
    assert stepper.feed(arrival(2)) == Awaiting()
    assert seen[-2:] == [("begin", 2), ("end", 2)]
    assert stepper.running


def test_sends_that_complete_at_once_and_bare_yields_stay_inside_the_record() -> None:
    sent: list[Any] = []

    async def send(value: Any) -> None:
        await asyncio.sleep(0)  # faust's send path yields like this: resumed at once
        sent.append(value)

    async def agent(stream: Any) -> None:
        async for line in stream:
            for word in line.split():
                await send(word)

    stepper = AgentStepper("a", agent)
    assert stepper.feed(arrival("a b c")) == Awaiting()
    assert sent == ["a", "b", "c"]


def test_an_async_generator_agent_yields_replies_of_the_record_that_caused_them() -> None:
    async def agent(stream: Any) -> AsyncIterator[int]:
        async for value in stream:
            yield value * 10
            yield value * 100

    stepper = AgentStepper("a", agent)
    assert stepper.feed(arrival(1)) == Awaiting((10, 100))
    assert stepper.feed(arrival(2)) == Awaiting((20, 200))


def test_items_events_and_current_event() -> None:
    got: list[Any] = []

    async def agent(stream: Any) -> None:
        async for key, value in stream.items():
            got.append((key, value, stream.current_event))

    async def by_event(stream: Any) -> None:
        async for event in stream.events():
            got.append(event)

    AgentStepper("a", agent).feed(arrival("v", key="k"))
    AgentStepper("b", by_event).feed(arrival("w", key="j"))
    assert got == [("k", "v", ("event", "k", "v")), ("event", "j", "w")]


def test_a_failing_record_is_reported_and_the_next_one_restarts_the_agent() -> None:
    starts: list[int] = []

    async def agent(stream: Any) -> None:
        starts.append(1)
        async for value in stream:
            if value == "bad":
                raise ValueError("bad value")

    stepper = AgentStepper("a", agent)
    assert stepper.feed(arrival("ok")) == Awaiting()
    failed = stepper.feed(arrival("bad"))
    assert isinstance(failed, Failed)
    assert isinstance(failed.error, ValueError)
    assert not stepper.running
    assert stepper.feed(arrival("ok")) == Awaiting()
    assert len(starts) == 2


def test_an_agent_that_returns_is_finished_and_starts_again() -> None:
    async def agent(stream: Any) -> AsyncIterator[str]:
        async for value in stream:
            yield value
            break

    stepper = AgentStepper("a", agent)
    assert stepper.feed(arrival("x")) == Finished(("x",))
    assert stepper.feed(arrival("y")) == Finished(("y",))


def test_awaiting_real_io_inside_a_record_fails_it_and_closes_the_coroutine() -> None:
    closed: list[bool] = []

    class Pending:
        def __await__(self) -> Any:
            yield self  # what an asyncio future does while it is pending

    async def agent(stream: Any) -> None:
        try:
            async for _ in stream:
                await Pending()
        finally:
            closed.append(True)

    stepper = AgentStepper("slow", agent)
    failed = stepper.feed(arrival(1))
    assert isinstance(failed, Failed)
    assert isinstance(failed.error, AgentStepError)
    assert "awaited Pending inside a record" in str(failed.error)
    assert closed == [True]
    assert not stepper.running


def test_group_by_is_recorded_with_the_agents_line_and_is_the_stream_itself() -> None:
    def key_of(value: str) -> str:
        return value

    async def agent(stream: Any) -> None:
        async for _value in stream.group_by(key_of, name="byword"):
            pass

    stepper = AgentStepper("a", agent)
    assert stepper.start() == Awaiting()
    assert stepper.stream is not None
    (call,) = stepper.stream.calls
    assert (call.key, call.name) == (key_of, "byword")
    assert call.where.endswith(f"test_stepping.py:{agent.__code__.co_firstlineno + 1}")


def test_an_unsupported_stream_method_names_the_feature_and_the_line() -> None:
    async def agent(stream: Any) -> None:
        async for _value in stream.enumerate():
            pass

    failed = AgentStepper("a", agent).start()
    assert isinstance(failed, Failed)
    assert isinstance(failed.error, UnsupportedFeatureError)
    assert failed.error.feature == "stream.enumerate"
    assert failed.error.where.endswith(f":{agent.__code__.co_firstlineno + 1}")


def test_noack_take_is_refused_with_its_line_and_a_hint() -> None:
    async def agent(stream: Any) -> None:
        async for _values in stream.noack_take(10, within=5):
            pass

    failed = AgentStepper("a", agent).start()
    assert isinstance(failed, Failed)
    assert isinstance(failed.error, UnsupportedFeatureError)
    assert failed.error.feature == "stream.noack_take"
    assert "use stream.take" in failed.error.hint
    assert failed.error.where.endswith(f":{agent.__code__.co_firstlineno + 1}")


def test_take_is_recorded_with_its_line_and_the_agent_gets_whole_batches() -> None:
    got: list[Any] = []

    async def agent(stream: Any) -> AsyncIterator[int]:
        async for values in stream.take(3, within=timedelta(seconds=2)):
            got.append((values, stream.current_event))
            yield sum(values)

    stepper = AgentStepper("a", agent)
    assert stepper.start() == Awaiting()
    assert stepper.stream is not None
    (call,) = stepper.stream.takes
    assert (call.kind, call.max_, call.within, call.timestamp_field) == ("take", 3, 2.0, None)
    assert call.where.endswith(f"test_stepping.py:{agent.__code__.co_firstlineno + 1}")
    assert stepper.feed(Batch((arrival(1), arrival(2), arrival(4, key="k")))) == Awaiting((7,))
    assert stepper.feed(Batch((arrival(8),))) == Awaiting((8,))
    # the current event in a batch is its last record's, as faust's after its buffer filled
    assert got == [([1, 2, 4], ("event", "k", 4)), ([8], ("event", None, 8))]


def test_take_events_and_take_with_timestamp_batch_as_faust_does() -> None:
    got: list[Any] = []

    async def events(stream: Any) -> None:
        async for batch in stream.take_events(5, within=1):
            got.append(batch)

    async def stamped(stream: Any) -> None:
        async for batch in stream.take_with_timestamp(5, 1, "at"):
            got.append(batch)

    AgentStepper("a", events).feed(Batch((arrival("x", key="k"), arrival("y"))))
    timed = (Arrival(None, {"n": 1}, None, 12.5), Arrival(None, "plain", None, 13.0))
    AgentStepper("b", stamped).feed(Batch(timed))
    # take_with_timestamp sets the field on dict values only (faust's own rule)
    assert got == [[("event", "k", "x"), ("event", None, "y")], [{"n": 1, "at": 12.5}, "plain"]]


def test_an_agent_iterating_both_the_stream_and_take_fails_at_the_mismatch() -> None:
    async def takes(stream: Any) -> None:
        async for _values in stream.take(2, within=1):
            pass

    async def plain(stream: Any) -> None:
        async for _value in stream:
            pass

    failed = AgentStepper("a", takes).feed(arrival(1))
    assert isinstance(failed, Failed)
    assert "iterates stream.take and the stream itself" in str(failed.error)
    failed = AgentStepper("b", plain).feed(Batch((arrival(1),)))
    assert isinstance(failed, Failed)
    assert "after calling stream.take" in str(failed.error)


@pytest.mark.parametrize("within", ["soon", -1.0])
def test_a_within_that_is_no_duration_is_refused_or_left_to_the_plan(within: Any) -> None:
    async def agent(stream: Any) -> None:
        async for _values in stream.take(2, within=within):
            pass

    stepper = AgentStepper("a", agent)
    step = stepper.start()
    if within == "soon":
        assert isinstance(step, Failed)
        assert isinstance(step.error, UnsupportedFeatureError)
        assert step.error.feature == "stream.take(within='soon')"
        assert step.error.where.endswith(f":{agent.__code__.co_firstlineno + 1}")
    else:  # a negative number is recorded; reading refuses it (test_take)
        assert step == Awaiting()
        assert stepper.stream is not None
        assert stepper.stream.takes[0].within == -1.0


def test_close_runs_the_agents_finally_block() -> None:
    closed: list[bool] = []

    async def agent(stream: Any) -> None:
        try:
            async for _ in stream:
                pass
        finally:
            closed.append(True)

    stepper = AgentStepper("a", agent)
    stepper.feed(arrival(1))
    stepper.close()
    assert closed == [True]


def test_not_an_async_agent_is_a_failure_not_a_crash() -> None:
    def agent(stream: Any) -> None:
        return None

    failed = AgentStepper("a", agent).start()
    assert isinstance(failed, Failed)
    assert "neither an async def function" in str(failed.error)


def test_the_feed_stream_refuses_dunder_lookups_as_attributes() -> None:
    assert not hasattr(FeedStream(), "__len__")
    with pytest.raises(UnsupportedFeatureError):
        _ = FeedStream().filter


def test_closing_an_async_generator_agent_finishes_the_generator_itself() -> None:
    generators: list[Any] = []
    closed: list[bool] = []

    async def agent(stream: Any) -> AsyncIterator[int]:
        try:
            async for value in stream:
                yield value
        finally:
            closed.append(True)

    def started(stream: Any) -> Any:
        generators.append(agent(stream))
        return generators[-1]

    stepper = AgentStepper("a", started)
    stepper.feed(arrival(1))
    stepper.close()
    assert closed == [True]
    assert not generators[0].ag_running  # so a loop's aclose() at shutdown has nothing to do
    assert generators[0].ag_frame is None


def test_run_now_completes_what_completes_at_once_and_refuses_real_io() -> None:
    async def key_of(value: str) -> str:
        await asyncio.sleep(0)
        return value.upper()

    class Pending:
        def __await__(self) -> Any:
            yield self

    async def slow() -> None:
        await Pending()

    assert run_now("a", key_of("x")) == "X"
    assert run_now("a", "not awaitable") == "not awaitable"
    with pytest.raises(AgentStepError, match="awaited real I/O"):
        run_now("a", slow())

"""`EffectDriver` step by step against the in-memory journal, and the journal's own contract."""

from __future__ import annotations

import asyncio
import gc
import http.client
import logging
import urllib.error
from collections.abc import Awaitable, Callable
from email.message import Message
from typing import Any

import httpx
import pytest

from sluicegate.agents.journal import (
    LOOKUP_FAILED,
    OUTCOME_UNKNOWN,
    CallOutcomeUnknownError,
    Deferred,
    Effect,
    EffectDriver,
    EffectKind,
    EffectResult,
    EffectUnknown,
    InMemoryJournal,
    JournalEntry,
    JournalIndex,
    LookupFound,
    LookupNotFound,
    LookupResult,
    OnUnknown,
    all_settled,
    when_all_settled,
)
from sluicegate.agents.journal.transport import leaves_outcome_unknown
from sluicegate.operators.exceptions import RetryableError

KEY = "run-1/3/0"


def entry(status: str, key: str = KEY, run_id: str = "run-1", **fields: Any) -> JournalEntry:
    base = {
        "key": key,
        "run_id": run_id,
        "status": status,
        "kind": "tool",
        "name": "refund",
        "attempt": 1,
        "written_at": 0.0,
    }
    return JournalEntry.model_validate(base | fields)


class Tool:
    """Records what happened to it; ``outcome`` is returned or raised by each call."""

    def __init__(self, outcome: object = "refunded", found: LookupResult | None = None) -> None:
        self.outcome = outcome
        self.found = found
        self.events: list[str] = []

    async def call(self) -> object:
        self.events.append("call")
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    async def lookup(self) -> LookupResult:
        self.events.append("lookup")
        if self.found is None:
            raise ValueError("lookup endpoint gone")
        return self.found

    def fault(self, point: str) -> None:
        self.events.append(point)


async def run(
    journal: InMemoryJournal,
    tool: Tool,
    on_unknown: OnUnknown = OnUnknown.LOOKUP,
    *,
    attempt: int = 2,
    with_lookup: bool = True,
    defer: bool = False,
) -> EffectResult | EffectUnknown | Deferred:
    lookup: Callable[[], Awaitable[LookupResult]] | None = tool.lookup if with_lookup else None
    effect = Effect(
        key=KEY,
        run_id="run-1",
        partition=4,
        kind=EffectKind.TOOL,
        name="refund",
        request={"order": "o-1"},
        on_unknown=on_unknown,
        call=tool.call,
        lookup=lookup,
    )
    driver = EffectDriver(
        journal, attempt=attempt, fault=lambda _, point: tool.fault(point), clock=lambda: 1234.5
    )
    return await (driver.perform_deferred(effect) if defer else driver.perform(effect))


async def test_execute_writes_issued_calls_then_writes_done() -> None:
    journal, tool = InMemoryJournal(), Tool()
    assert await run(journal, tool) == EffectResult("refunded", None, replayed=False)
    assert tool.events == ["effect.before_call", "call", "effect.after_call"]
    (p1, issued), (p2, done) = journal.writes
    assert (p1, p2) == (4, 4)
    assert issued == entry("issued", request={"order": "o-1"}, attempt=2, written_at=1234.5)
    assert done == entry("done", result="refunded", attempt=2, written_at=1234.5)
    assert journal.entries_by_status() == {"issued": 0, "done": 1}


async def test_done_is_replayed_without_calling() -> None:
    journal, tool = InMemoryJournal(), Tool()
    await journal.write(entry("done", result={"id": 7}), partition=4)
    assert await run(journal, tool) == EffectResult({"id": 7}, None, replayed=True)
    assert tool.events == []
    assert len(journal.writes) == 1


async def test_a_permanent_failure_is_recorded_and_replayed() -> None:
    journal, tool = InMemoryJournal(), Tool(outcome=KeyError("o-1"))
    failed = EffectResult(None, "KeyError: 'o-1'", replayed=False)
    assert await run(journal, tool) == failed
    assert journal.get(KEY)[1] == entry(
        "done", error="KeyError: 'o-1'", attempt=2, written_at=1234.5
    )
    assert await run(journal, Tool()) == EffectResult(None, failed.error, replayed=True)


async def test_a_retryable_failure_propagates_and_leaves_issued_without_done() -> None:
    journal, tool = InMemoryJournal(), Tool(outcome=RetryableError("503"))
    with pytest.raises(RetryableError, match="503"):
        await run(journal, tool)
    issued, done = journal.get(KEY)
    assert issued is not None
    assert done is None
    assert journal.entries_by_status() == {"issued": 1, "done": 0}


async def test_lookup_found_records_the_found_value_without_calling() -> None:
    journal, tool = InMemoryJournal(), Tool(found=LookupFound({"refund_id": "r-1"}))
    await journal.write(entry("issued"), partition=4)
    found = EffectResult({"refund_id": "r-1"}, None, replayed=True, settled_by="lookup")
    assert await run(journal, tool) == found
    assert tool.events == ["lookup"]
    assert journal.get(KEY)[1] == entry(
        "done", result={"refund_id": "r-1"}, attempt=2, written_at=1234.5, settled_by="lookup"
    )


async def test_lookup_not_found_calls_again_without_a_second_issued() -> None:
    journal, tool = InMemoryJournal(), Tool(found=LookupNotFound())
    await journal.write(entry("issued"), partition=4)
    called = EffectResult("refunded", None, replayed=False, settled_by="call_after_lookup")
    assert await run(journal, tool) == called
    assert tool.events == ["lookup", "effect.before_call", "call", "effect.after_call"]
    assert [e.status for _, e in journal.writes if e is not None] == ["issued", "done"]
    done = journal.get(KEY)[1]
    assert done is not None
    assert done.settled_by == "call_after_lookup"


async def test_retry_calls_again_with_the_same_key() -> None:
    journal, tool = InMemoryJournal(), Tool()
    await journal.write(entry("issued"), partition=4)
    retried = EffectResult("refunded", None, False, settled_by="retry")
    assert await run(journal, tool, OnUnknown.RETRY) == retried
    assert "lookup" not in tool.events
    assert [e.status for _, e in journal.writes if e is not None] == ["issued", "done"]


@pytest.mark.parametrize(
    ("on_unknown", "found", "settled_by"),
    [
        (OnUnknown.RETRY, None, "retry"),
        (OnUnknown.LOOKUP, LookupFound("refunded"), "lookup"),
        (OnUnknown.LOOKUP, LookupNotFound(), "call_after_lookup"),
    ],
    ids=["retry", "lookup", "call-after-lookup"],
)
async def test_how_an_unknown_outcome_was_settled_survives_a_crash_before_the_safe_point(
    on_unknown: OnUnknown, found: LookupResult | None, settled_by: str
) -> None:
    journal = InMemoryJournal()
    await journal.write(entry("issued"), partition=4)
    first = await run(journal, Tool(found=found), on_unknown)
    assert isinstance(first, EffectResult)
    assert first.settled_by == settled_by
    # The worker dies after done, before the run's safe point: the replay still says it.
    tool = Tool()
    again = await run(journal, tool, on_unknown)
    assert again == EffectResult("refunded", None, replayed=True, settled_by=settled_by)
    assert tool.events == []


async def test_a_first_call_is_not_marked_as_settled() -> None:
    journal = InMemoryJournal()
    outcome = await run(journal, Tool(), OnUnknown.RETRY, defer=True)
    assert isinstance(outcome, Deferred)
    assert outcome.provisional.settled_by is None
    assert (await outcome.settled).settled_by is None
    done = journal.get(KEY)[1]
    assert done is not None
    assert done.settled_by is None


@pytest.mark.parametrize(
    ("on_unknown", "with_lookup"),
    [(OnUnknown.FAIL, True), (OnUnknown.LOOKUP, False)],
    ids=["fail", "lookup-without-a-lookup"],
)
async def test_an_unknown_outcome_fails_closed(
    on_unknown: OnUnknown, with_lookup: bool, caplog: pytest.LogCaptureFixture
) -> None:
    journal, tool = InMemoryJournal(), Tool()
    await journal.write(entry("issued"), partition=4)
    with caplog.at_level(logging.WARNING, logger="sluicegate.agents.journal.effects"):
        outcome = await run(journal, tool, on_unknown, with_lookup=with_lookup)
    assert outcome == EffectUnknown(KEY, OUTCOME_UNKNOWN)
    assert tool.events == []
    assert len(journal.writes) == 1
    assert f"effect {KEY} (tool refund) fails closed" in caplog.text


async def test_a_lookup_that_fails_for_good_fails_closed() -> None:
    journal, tool = InMemoryJournal(), Tool(found=None)
    await journal.write(entry("issued"), partition=4)
    outcome = await run(journal, tool)
    assert isinstance(outcome, EffectUnknown)
    assert outcome.reason == f"{LOOKUP_FAILED}: ValueError: lookup endpoint gone"
    assert tool.events == ["lookup"]
    assert len(journal.writes) == 1


async def test_an_issued_write_that_fails_prevents_the_call() -> None:
    def refuse(written: JournalEntry | None) -> None:
        raise RetryableError("broker away")

    journal, tool = InMemoryJournal(before_write=refuse), Tool()
    with pytest.raises(RetryableError, match="broker away"):
        await run(journal, tool)
    assert tool.events == []
    assert journal.get(KEY) == (None, None)


async def test_forget_run_drops_only_that_run_in_that_partition() -> None:
    journal = InMemoryJournal()
    await journal.write(entry("issued", key="run-1/0/0"), partition=4)
    await journal.write(entry("done", key="run-1/0/0"), partition=4)
    await journal.write(entry("issued", key="run-1/1/0"), partition=4)
    await journal.write(entry("done", key="run-2/0/0", run_id="run-2"), partition=4)
    await journal.write(entry("done", key="run-1/9/0"), partition=5)
    assert journal.entries_by_status() == {"issued": 1, "done": 3}

    assert await journal.forget_run("run-1", partition=4) == 4
    assert journal.get("run-1/0/0") == (None, None)
    assert journal.get("run-1/1/0") == (None, None)
    assert journal.get("run-2/0/0")[1] is not None
    assert journal.get("run-1/9/0")[1] is not None
    assert await journal.forget_run("run-1", partition=4) == 0
    assert journal.entries_by_status() == {"issued": 0, "done": 2}


def test_the_index_keeps_issued_and_done_apart() -> None:
    index = JournalIndex()
    index.put(entry("done", result=1), 0)
    index.put(entry("issued", attempt=7), 0)  # a late issued, e.g. from a zombie
    issued, done = index.get(KEY)
    assert issued is not None
    assert issued.attempt == 7
    assert done is not None
    assert done.result == 1
    index.drop(KEY, "issued")
    assert index.get(KEY) == (None, done)
    assert index.keys_of_run("run-1", 0) == [KEY]
    index.drop(KEY, "done")
    index.drop(KEY, "done")
    assert len(index) == 0
    assert index.keys_of_run("run-1", 0) == []


def test_the_first_done_of_a_key_stays_in_the_index() -> None:
    index = JournalIndex()
    index.put(entry("done", result="refunded"), 0)
    index.put(entry("done", error="ValueError: 409", attempt=3), 0)  # a retry's, a zombie's
    assert index.get(KEY)[1] == entry("done", result="refunded")
    index.drop(KEY, "done")  # a tombstone: a done written after it is the key's first
    index.put(entry("done", result="again"), 0)
    assert index.get(KEY)[1] == entry("done", result="again")


async def test_a_second_done_is_not_written() -> None:
    journal = InMemoryJournal()
    await journal.write(entry("done", result="refunded"), partition=4)
    await journal.write(entry("done", error="ValueError: 409"), partition=4)
    assert len(journal.writes) == 1
    assert journal.get(KEY)[1] == entry("done", result="refunded")


async def test_a_done_whose_write_raised_is_written_again_without_calling() -> None:
    lost: list[JournalEntry] = []

    def lose_the_first_done(written: JournalEntry | None) -> None:
        if written is not None and written.status == "done" and not lost:
            lost.append(written)
            raise RetryableError("acknowledgement lost")

    journal, tool = InMemoryJournal(before_write=lose_the_first_done), Tool()
    with pytest.raises(RetryableError):
        await run(journal, tool, OnUnknown.RETRY)
    assert journal.unacknowledged(KEY) == lost[0]
    tool.outcome = ValueError("409: key already used")  # what calling again would give
    assert await run(journal, tool, OnUnknown.RETRY) == EffectResult("refunded", None, True)
    assert tool.events == ["effect.before_call", "call", "effect.after_call"]  # called once
    assert journal.get(KEY)[1] == lost[0]
    assert journal.unacknowledged(KEY) is None


class SlowIssue(InMemoryJournal):
    """An ``issued`` write is acknowledged only when ``acked`` is set; records the order of
    the call and the writes in ``events`` (shared with the tool)."""

    def __init__(self, events: list[str], fail_issue: bool = False) -> None:
        super().__init__()
        self.events = events
        self.acked = asyncio.Event()
        self.fail_issue = fail_issue

    async def write(self, entry: JournalEntry, *, partition: int) -> None:
        if entry.status == "issued":
            self.events.append("issued sent")
            await self.acked.wait()
            if self.fail_issue:
                raise RetryableError("issued not acknowledged")
        await super().write(entry, partition=partition)
        self.events.append(f"{entry.status} durable")


@pytest.mark.parametrize("policy", [OnUnknown.FAIL, OnUnknown.LOOKUP])
async def test_an_effect_that_may_not_be_repeated_is_issued_durably_before_the_call(
    policy: OnUnknown,
) -> None:
    tool = Tool()
    journal = SlowIssue(tool.events)
    performing = asyncio.ensure_future(run(journal, tool, policy))
    await asyncio.sleep(0.01)
    assert tool.events == ["issued sent"]  # no call while issued is unacknowledged
    journal.acked.set()
    assert await performing == EffectResult("refunded", None, replayed=False)
    assert tool.events[:3] == ["issued sent", "issued durable", "effect.before_call"]


async def test_a_retryable_effect_is_called_beside_its_issued_write_done_sent_behind_it() -> None:
    tool = Tool()
    journal = SlowIssue(tool.events)
    performing = asyncio.ensure_future(run(journal, tool, OnUnknown.RETRY))
    await asyncio.sleep(0.01)
    # Called while issued is unacknowledged; done is sent behind it, not after its ack...
    # (A call that does not yield runs before the issued write's task starts.)
    assert tool.events == [
        "effect.before_call", "call", "effect.after_call", "issued sent", "done durable",
    ]  # fmt: skip
    # ... and the outcome waits for both.
    assert not performing.done()
    journal.acked.set()
    assert await performing == EffectResult("refunded", None, replayed=False)
    assert tool.events[-1] == "issued durable"
    issued = entry("issued", request={"order": "o-1"}, written_at=1234.5, attempt=2)
    done = entry("done", result="refunded", written_at=1234.5, attempt=2)
    assert journal.get(KEY) == (issued, done)


async def test_a_permanent_failure_beside_an_unacknowledged_issued_waits_for_it() -> None:
    tool = Tool(outcome=ValueError("card declined"))
    journal = SlowIssue(tool.events)
    performing = asyncio.ensure_future(run(journal, tool, OnUnknown.RETRY))
    await asyncio.sleep(0.01)
    assert not performing.done()
    journal.acked.set()
    assert await performing == EffectResult(None, "ValueError: card declined", replayed=False)
    assert tool.events[-1] == "issued durable"


async def test_a_retryable_effect_whose_issued_write_fails_is_retried_then_replayed() -> None:
    tool = Tool()
    journal = SlowIssue(tool.events, fail_issue=True)
    journal.acked.set()
    with pytest.raises(RetryableError):
        await run(journal, tool, OnUnknown.RETRY)
    # Its done was durable all the same: the next try replays it instead of calling again.
    done = entry("done", result="refunded", written_at=1234.5, attempt=2)
    assert journal.get(KEY) == (None, done)
    assert await run(journal, tool, OnUnknown.RETRY) == EffectResult("refunded", None, True)
    assert tool.events.count("call") == 1


async def test_a_retryable_call_failing_retryably_waits_for_its_issued_and_writes_no_done() -> None:
    tool = Tool(outcome=RetryableError("model overloaded"))
    journal = SlowIssue(tool.events)
    journal.acked.set()
    with pytest.raises(RetryableError):
        await run(journal, tool, OnUnknown.RETRY)
    assert tool.events[-1] == "issued durable"
    assert journal.get(KEY)[1] is None


async def test_deferred_returns_the_call_before_its_writes_are_durable() -> None:
    gate = asyncio.Event()

    class Gated(InMemoryJournal):
        """Writes are handed over (``begun``) at once and stored when ``gate`` opens."""

        def __init__(self) -> None:
            super().__init__()
            self.begun: list[str] = []

        async def write(self, entry: JournalEntry, *, partition: int) -> None:
            self.begun.append(entry.status)
            await gate.wait()
            await super().write(entry, partition=partition)

    journal, tool = Gated(), Tool()
    deferred = await run(journal, tool, OnUnknown.RETRY, defer=True)
    assert isinstance(deferred, Deferred)
    assert deferred.key == KEY
    assert deferred.provisional == EffectResult("refunded", None, replayed=False)
    assert tool.events == ["effect.before_call", "call", "effect.after_call"]
    for _ in range(10):  # let the writes be handed over
        await asyncio.sleep(0)
    assert (journal.writes, deferred.settled.done()) == ([], False)
    assert journal.begun == ["issued", "done"]  # handed over in order, neither stored yet
    gate.set()
    assert await deferred.settled == EffectResult("refunded", None, replayed=False)
    assert sorted(e.status for _, e in journal.writes if e) == ["done", "issued"]


async def test_deferred_settles_with_the_error_of_a_lost_done_and_holds_it() -> None:
    def lose_done(entry: JournalEntry | None) -> None:
        if entry is not None and entry.status == "done":
            raise RetryableError("acknowledgement lost")

    journal = InMemoryJournal(before_write=lose_done)
    deferred = await run(journal, Tool(), OnUnknown.RETRY, defer=True)
    assert isinstance(deferred, Deferred)
    with pytest.raises(RetryableError, match="acknowledgement lost"):
        await deferred.settled
    held = journal.unacknowledged(KEY)
    assert held is not None
    assert held.result == "refunded"


async def test_all_settled_waits_for_every_future_and_retrieves_each_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.get_running_loop()
    failing, cancelled, ok = loop.create_future(), loop.create_future(), loop.create_future()
    settled = all_settled([failing, cancelled, ok])
    failing.set_exception(RetryableError("lost"))
    cancelled.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not settled.done()  # ``ok`` is still in flight
    ok.set_result(None)
    await settled
    assert settled.done()
    assert not settled.cancelled()
    del failing, cancelled, ok, settled  # each error was retrieved: nothing logged on collection
    gc.collect()
    assert "never retrieved" not in caplog.text
    assert all_settled([]).done()  # nothing to wait for: done at once
    called: list[str] = []
    when_all_settled([], lambda: called.append("then"))
    assert called == ["then"]  # no future to wait for: called at once, not from the loop


async def test_cancelling_all_settled_cancels_none_of_its_futures() -> None:
    loop = asyncio.get_running_loop()
    write: asyncio.Future[None] = loop.create_future()
    waiter = asyncio.ensure_future(asyncio.wait_for(all_settled([write]), timeout=0.01))
    with pytest.raises(TimeoutError):
        await waiter
    assert not write.done()  # its writer settles it, later
    write.set_result(None)


async def test_deferred_is_only_for_effects_that_may_be_called_again() -> None:
    journal, tool = InMemoryJournal(), Tool()
    outcome = await run(journal, tool, OnUnknown.LOOKUP, defer=True)
    assert outcome == EffectResult("refunded", None, replayed=False)
    journal = InMemoryJournal()
    await journal.write(entry("done", result={"id": 7}), partition=4)
    replayed = await run(journal, Tool(), OnUnknown.RETRY, defer=True)
    assert replayed == EffectResult({"id": 7}, None, replayed=True)


@pytest.mark.parametrize(
    "transport_error",
    [
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError("read timed out"),
        http.client.RemoteDisconnected("Remote end closed connection without response"),
        http.client.IncompleteRead(b"{"),
        urllib.error.URLError(ConnectionRefusedError(111, "refused")),
        httpx.ReadError("reset"),
    ],
    ids=["reset", "timeout", "remote-disconnected", "incomplete-read", "url-error", "httpx"],
)
@pytest.mark.parametrize("on_unknown", list(OnUnknown))
async def test_a_transport_error_escaping_the_call_leaves_the_outcome_unknown(
    transport_error: Exception, on_unknown: OnUnknown
) -> None:
    """A connection reset after the request was sent: the call may have happened, so no
    failure is recorded; the retried step settles it by the tool's ``on_unknown``."""
    journal, tool = InMemoryJournal(), Tool(outcome=transport_error, found=LookupFound("sent"))
    with pytest.raises(CallOutcomeUnknownError, match="outcome unknown") as raised:
        await run(journal, tool, on_unknown)
    assert raised.value.key == KEY
    assert raised.value.__cause__ is transport_error
    issued, done = journal.get(KEY)
    assert issued is not None
    assert done is None

    tool.outcome = "sent again"
    settled = await run(journal, tool, on_unknown)
    match on_unknown:
        case OnUnknown.FAIL:
            assert settled == EffectUnknown(KEY, OUTCOME_UNKNOWN)
            assert tool.events.count("call") == 1
        case OnUnknown.RETRY:
            assert settled == EffectResult("sent again", None, replayed=False, settled_by="retry")
            assert tool.events.count("call") == 2
        case OnUnknown.LOOKUP:
            assert settled == EffectResult("sent", None, replayed=True, settled_by="lookup")
            assert tool.events.count("call") == 1


def test_an_answer_from_the_service_is_a_known_failure() -> None:
    answered = urllib.error.HTTPError("http://svc/write", 409, "not pending", Message(), None)
    assert not leaves_outcome_unknown(answered)
    assert not leaves_outcome_unknown(ValueError("bad argument"))
    assert not leaves_outcome_unknown(httpx.HTTPStatusError("409", request=None, response=None))  # type: ignore[arg-type]


async def test_an_http_error_answer_is_recorded_as_a_permanent_failure() -> None:
    answered = urllib.error.HTTPError("http://svc/write", 409, "not pending", Message(), None)
    journal, tool = InMemoryJournal(), Tool(outcome=answered)
    outcome = await run(journal, tool, OnUnknown.RETRY)
    assert isinstance(outcome, EffectResult)
    assert outcome.error is not None
    assert "409" in outcome.error


async def test_a_transport_error_in_the_lookup_asks_again_later() -> None:
    journal = InMemoryJournal()
    await journal.write(entry("issued"), partition=4)

    class ResetLookup(Tool):
        async def lookup(self) -> LookupResult:
            self.events.append("lookup")
            raise ConnectionResetError(104, "Connection reset by peer")

    tool = ResetLookup()
    with pytest.raises(CallOutcomeUnknownError):
        await run(journal, tool)
    assert tool.events == ["lookup"]
    assert journal.get(KEY)[1] is None
    assert await run(journal, Tool(found=LookupFound("sent"))) == EffectResult(
        "sent", None, replayed=True, settled_by="lookup"
    )

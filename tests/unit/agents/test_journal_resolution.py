"""The journal's decisions, sans-IO, and a model of crashes around one effect.

The model drives :func:`perform` against a journal that, like :class:`KafkaJournal`, keeps a
durable log and a process-local index: a crash (a simulated SIGKILL) loses the index, which is
then rebuilt from the log. Crashes and retryable failures are injected at every point of the
effect's life, any number of times, and the effect is re-driven with the same key until it
settles. The outside world counts how often it really performed the effect.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import event, given, settings, strategies as st

from sluicegate.agents.journal import (
    OUTCOME_UNKNOWN,
    TRANSITIONS,
    Effect,
    EffectDriver,
    EffectEvent,
    EffectKind,
    EffectResolution,
    EffectResult,
    EffectState,
    EffectUnknown,
    Execute,
    FailClosed,
    JournalEntry,
    JournalIndex,
    JournalTransitionError,
    JournalUnavailableError,
    Lookup,
    LookupFound,
    LookupNotFound,
    LookupResult,
    OnUnknown,
    RecordFound,
    Replay,
    Retry,
    Rewrite,
    after_lookup,
    decide,
)
from sluicegate.operators.exceptions import RetryableError

KEY = "run-1/0/0"


def entry(status: str, **fields: Any) -> JournalEntry:
    return JournalEntry.model_validate(
        {
            "key": KEY,
            "run_id": "run-1",
            "status": status,
            "kind": "tool",
            "name": "refund",
            "attempt": 1,
            "written_at": 0.0,
        }
        | fields
    )


ISSUED = entry("issued", request={"amount": 5})
DONE = entry("done", result={"refund_id": "r-1"})


# --- the decision table -------------------------------------------------------------------


@pytest.mark.parametrize("policy", list(OnUnknown))
def test_nothing_journalled_means_execute(policy: OnUnknown) -> None:
    assert decide(None, None, policy) == Execute()


@pytest.mark.parametrize("policy", list(OnUnknown))
@pytest.mark.parametrize("issued", [ISSUED, None], ids=["issued", "no-issued"])
def test_done_means_replay_whatever_else(policy: OnUnknown, issued: JournalEntry | None) -> None:
    assert decide(issued, DONE, policy) == Replay(DONE)


@pytest.mark.parametrize(
    ("policy", "decision"),
    [
        (OnUnknown.LOOKUP, Lookup()),
        (OnUnknown.RETRY, Retry()),
        (OnUnknown.FAIL, FailClosed(OUTCOME_UNKNOWN)),
    ],
)
def test_issued_without_done_is_resolved_by_the_declaration(
    policy: OnUnknown, decision: object
) -> None:
    assert decide(ISSUED, None, policy) == decision


@pytest.mark.parametrize("policy", list(OnUnknown))
def test_a_done_not_acknowledged_is_written_again_whatever_the_declaration(
    policy: OnUnknown,
) -> None:
    assert decide(ISSUED, None, policy, unacknowledged=DONE) == Rewrite(DONE)
    assert decide(ISSUED, DONE, policy, unacknowledged=entry("done")) == Replay(DONE)
    assert EffectState.of(None, None, DONE) is EffectState.ISSUED


def test_after_a_lookup() -> None:
    assert after_lookup(found=True) == RecordFound()
    assert after_lookup(found=False) == Retry()


def test_the_state_the_entries_show() -> None:
    assert EffectState.of(None, None) is EffectState.ABSENT
    assert EffectState.of(ISSUED, None) is EffectState.ISSUED
    assert EffectState.of(ISSUED, DONE) is EffectState.DONE
    assert EffectState.of(None, DONE) is EffectState.DONE


def test_the_transitions_are_exactly_the_table() -> None:
    resolution = EffectResolution(KEY)
    assert resolution.apply(EffectEvent.ISSUE) is EffectState.ISSUED
    assert resolution.apply(EffectEvent.COMPLETE) is EffectState.DONE
    assert EffectResolution(KEY, EffectState.ISSUED).apply(EffectEvent.FAIL_CLOSED) is (
        EffectState.UNKNOWN
    )
    for state, effect_event in itertools.product(EffectState, EffectEvent):
        if (state, effect_event) in TRANSITIONS:
            continue
        resolution = EffectResolution(KEY, state)
        with pytest.raises(JournalTransitionError) as caught:
            resolution.apply(effect_event)
        assert (caught.value.key, caught.value.state, caught.value.event) == (
            KEY,
            state.value,
            effect_event.value,
        )
        assert resolution.state is state


# --- the crash model ----------------------------------------------------------------------


class Crash(BaseException):
    """A simulated SIGKILL: nothing catches it but the model's driver."""


CRASH_POINTS = [
    "before_issue",  # killed before the issued write
    "issued_ack_lost",  # issued is durable, but the write raised: the index does not show it
    "before_call",  # killed after issued, before the call
    "retryable_before",  # the call failed retryably before the effect
    "retryable_after",  # the call failed retryably after the effect happened (a timeout)
    "after_call",  # killed after the call, before the done write
    "done_ack_lost",  # done is durable, but the write raised: the index does not show it
    "after_done",  # killed after the done write
    "lookup_retryable",  # the tool's lookup failed retryably
]


@dataclass
class Plan:
    """Where the current drive is interrupted: at ``point``, once."""

    point: str | None
    fired: bool = False

    def hit(self, point: str) -> bool:
        if self.point == point and not self.fired:
            self.fired = True
            return True
        return False


class ModelJournal:
    """A durable log plus a process-local index, like :class:`KafkaJournal`: ``log`` keeps every
    record sent, in order, as a topic does before compaction."""

    def __init__(self) -> None:
        self.log: list[tuple[int, JournalEntry]] = []
        self.index = JournalIndex()
        self.plan = Plan(None)

    def get(self, key: str) -> tuple[JournalEntry | None, JournalEntry | None]:
        return self.index.get(key)

    def unacknowledged(self, key: str) -> JournalEntry | None:
        return self.index.unacknowledged(key)

    async def write(self, entry: JournalEntry, *, partition: int) -> None:
        if entry.status == "done" and self.index.has_done(entry.key):
            return
        if entry.status == "issued" and self.plan.hit("before_issue"):
            raise Crash
        self.log.append((partition, entry))
        if self.plan.hit(f"{entry.status}_ack_lost"):
            self.index.hold(entry)
            raise JournalUnavailableError("write", partition, "acknowledgement lost")
        self.index.put(entry, partition)
        if entry.status == "done" and self.plan.hit("after_done"):
            raise Crash

    async def forget_run(self, run_id: str, *, partition: int) -> int:
        raise NotImplementedError("the crash model forgets no run")

    def entries_by_status(self) -> dict[str, int]:
        return self.index.counts()

    def dones(self) -> list[tuple[Any, str | None]]:
        """The outcome of every ``done`` in the log, in order."""
        return [(e.result, e.error) for _, e in self.log if e.status == "done"]

    async def restart(self) -> None:
        """A new process: the index is rebuilt from the durable log."""
        self.index = JournalIndex()
        for partition, written in self.log:
            self.index.put(written, partition)


@dataclass
class World:
    """The outside world: performs effects by idempotency key, and counts them."""

    dedup: bool
    fails_for_good: bool
    plan: Plan = field(default_factory=lambda: Plan(None))
    executions: Counter[str] = field(default_factory=Counter)
    results: dict[str, str] = field(default_factory=dict)

    async def call(self, key: str) -> str:
        if self.plan.hit("retryable_before"):
            raise RetryableError("connection refused")
        if self.fails_for_good:
            raise ValueError("order not found")
        if not (self.dedup and key in self.results):
            self.executions[key] += 1
            self.results[key] = f"refund of {key} #{self.executions[key]}"
        if self.plan.hit("retryable_after"):
            raise RetryableError("read timeout")
        return self.results[key]

    async def lookup(self, key: str) -> LookupResult:
        if self.plan.hit("lookup_retryable"):
            raise RetryableError("lookup timed out")
        return LookupFound(self.results[key]) if key in self.results else LookupNotFound()


@dataclass
class Observed:
    final: EffectResult | EffectUnknown
    replays: list[EffectResult | EffectUnknown]
    left_unknown: bool
    """An interrupted drive left issued without done in the index."""
    executions: int
    """How often the world really performed the effect."""


async def drive(journal: ModelJournal, world: World, policy: OnUnknown) -> Any:
    def fault(point: str) -> None:
        if journal.plan.hit(point.removeprefix("effect.")):
            raise Crash

    effect = Effect(
        key=KEY,
        run_id="run-1",
        partition=0,
        kind=EffectKind.TOOL,
        name="refund",
        request={"amount": 5},
        on_unknown=policy,
        call=lambda: world.call(KEY),
        lookup=lambda: world.lookup(KEY),
    )
    driver = EffectDriver(journal, attempt=1, fault=lambda _, point: fault(point), clock=lambda: 0)
    return await driver.perform(effect)


async def scenario(policy: OnUnknown, fails_for_good: bool, points: list[str]) -> Observed:
    journal = ModelJournal()
    world = World(dedup=policy is OnUnknown.RETRY, fails_for_good=fails_for_good)
    left_unknown = False
    final: EffectResult | EffectUnknown | None = None
    for point in [*points, None]:
        journal.plan = world.plan = Plan(point)
        try:
            final = await drive(journal, world, policy)
        except Crash:
            await journal.restart()
        except RetryableError:
            pass
        else:
            break
        issued, done = journal.get(KEY)
        unknown = issued is not None and done is None and journal.unacknowledged(KEY) is None
        left_unknown = left_unknown or unknown
    assert final is not None
    journal.plan = world.plan = Plan(None)
    replays = [await drive(journal, world, policy) for _ in range(2)]
    if isinstance(final, EffectResult):
        await journal.restart()
        replays.append(await drive(journal, world, policy))
    # A done may be sent twice (written again after a lost acknowledgement), never changed.
    assert len(set(journal.dones())) <= 1
    return Observed(final, replays, left_unknown, world.executions[KEY])


@settings(max_examples=400, deadline=None)
@given(
    policy=st.sampled_from(OnUnknown),
    fails_for_good=st.booleans(),
    points=st.lists(st.sampled_from(CRASH_POINTS), max_size=8),
)
def test_every_effect_happens_effectively_once_across_crashes(
    policy: OnUnknown, fails_for_good: bool, points: list[str]
) -> None:
    observed = asyncio.run(scenario(policy, fails_for_good, points))
    final = observed.final
    event(f"{policy.value}: {type(final).__name__}")

    assert observed.executions <= 1
    if policy is OnUnknown.FAIL:
        # Fail closed exactly when an interruption left the outcome unknown.
        assert isinstance(final, EffectUnknown) == observed.left_unknown
        if isinstance(final, EffectUnknown):
            assert final == EffectUnknown(KEY, OUTCOME_UNKNOWN)
            assert observed.replays == [final, final]
            return
    assert isinstance(final, EffectResult)
    if fails_for_good:
        assert observed.executions == 0
        assert (final.value, final.error) == (None, "ValueError: order not found")
    else:
        assert observed.executions == 1
        assert (final.value, final.error) == (f"refund of {KEY} #1", None)
    for replay in observed.replays:
        assert isinstance(replay, EffectResult)
        assert (replay.value, replay.error, replay.replayed) == (final.value, final.error, True)


# --- the first completed result is the one recorded ---------------------------------------


@dataclass
class Conflicting:
    """A tool that did its effect once and, called again with the same key, fails for good
    (an API answering 409 to a reused idempotency key)."""

    calls: int = 0

    async def call(self) -> str:
        self.calls += 1
        if self.calls > 1:
            raise ValueError("409: idempotency key already used")
        return "refund r-1"

    async def lookup(self) -> LookupResult:
        return LookupFound("refund r-1") if self.calls else LookupNotFound()


async def drive_conflicting(journal: ModelJournal, tool: Conflicting, policy: OnUnknown) -> Any:
    effect = Effect(
        key=KEY,
        run_id="run-1",
        partition=0,
        kind=EffectKind.TOOL,
        name="refund",
        request={"amount": 5},
        on_unknown=policy,
        call=tool.call,
        lookup=tool.lookup,
    )
    return await EffectDriver(journal, attempt=1, clock=lambda: 0.0).perform(effect)


@pytest.mark.parametrize("policy", list(OnUnknown))
async def test_a_done_whose_acknowledgement_was_lost_is_not_replaced_by_a_later_error(
    policy: OnUnknown,
) -> None:
    journal, tool = ModelJournal(), Conflicting()
    journal.plan = Plan("done_ack_lost")
    with pytest.raises(JournalUnavailableError):
        await drive_conflicting(journal, tool, policy)
    journal.plan = Plan(None)
    first = EffectResult("refund r-1", None, replayed=True)
    assert await drive_conflicting(journal, tool, policy) == first
    assert tool.calls == 1  # the done in doubt is written again; nothing is called
    await journal.restart()
    assert journal.get(KEY)[1] == entry("done", result="refund r-1", attempt=1)
    assert await drive_conflicting(journal, tool, policy) == first

"""Performing one effect through the journal, effectively once: the I/O driver.

An effect is one value, :class:`Effect`: its key, what the journal records of it, and how to
call it (and look it up). :class:`EffectDriver` performs effects for one attempt, through two
entry points: :meth:`~EffectDriver.perform` returns once the outcome is durable;
:meth:`~EffectDriver.perform_deferred` lets an effect that may be called again return as soon
as it was called, its journal writes in flight (:class:`Deferred`). Either reads the journal,
lets :func:`~agents.journal.resolution.decide` choose, and carries the decision out, moving an
:class:`~agents.journal.resolution.EffectResolution` through its table as the journal's entries
become durable.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sluicegate.agents.journal.entries import EffectKind, JournalEntry, SettledBy
from sluicegate.agents.journal.exceptions import CallOutcomeUnknownError
from sluicegate.agents.journal.resolution import (
    EffectEvent,
    EffectResolution,
    EffectState,
    Execute,
    FailClosed,
    Lookup,
    OnUnknown,
    RecordFound,
    Replay,
    Retry,
    Rewrite,
    after_lookup,
    decide,
)
from sluicegate.agents.journal.store import Journal
from sluicegate.agents.journal.transport import leaves_outcome_unknown
from sluicegate.operators.exceptions import RetryableError

__all__ = [
    "LOOKUP_FAILED",
    "Deferred",
    "Effect",
    "EffectDriver",
    "EffectResult",
    "EffectUnknown",
    "LookupFound",
    "LookupNotFound",
    "LookupResult",
    "all_settled",
    "no_fault",
    "when_all_settled",
]

logger = logging.getLogger(__name__)
_VALIDATE = JournalEntry.__pydantic_validator__.validate_python

LOOKUP_FAILED = "lookup_failed"
"""The :attr:`EffectUnknown.reason` when the tool's lookup itself failed for good."""


@dataclass(frozen=True, slots=True)
class EffectResult:
    """The outcome of an effect: its ``value``, or the ``error`` it failed with for good.

    ``replayed`` is true when this call did not execute the effect (a dedup hit): the outcome
    came from the journal's ``done``, or from the tool's lookup. ``settled_by`` is the ``done``
    entry's (:data:`~agents.journal.entries.SettledBy`): how an outcome a crash left unknown
    was settled, None when nothing was unknown.
    """

    value: Any
    error: str | None
    replayed: bool
    settled_by: SettledBy | None = None


@dataclass(frozen=True, slots=True)
class Deferred:
    """An effect that may be called again, called, whose journal writes are still in flight.

    ``provisional`` is what the call returned. ``settled`` completes when the writes are
    durable, with the outcome the journal keeps (the first ``done`` of the key: the
    provisional one unless another writer got there first), or raises what a write raised
    (a :class:`~operators.exceptions.RetryableError`; the ``done`` is then held as
    unacknowledged, as when :func:`perform` awaits it).
    """

    key: str
    provisional: EffectResult
    settled: asyncio.Future[EffectResult]


@dataclass(frozen=True, slots=True)
class EffectUnknown:
    """The effect was issued and its outcome cannot be found out: fail closed."""

    key: str
    reason: str


@dataclass(frozen=True, slots=True)
class LookupFound:
    """The tool's lookup found the effect; ``value`` is what it gave."""

    value: Any


@dataclass(frozen=True, slots=True)
class LookupNotFound:
    """The tool's lookup found no effect under the key: it never happened."""


LookupResult = LookupFound | LookupNotFound


@dataclass(frozen=True, slots=True, kw_only=True)
class Effect:
    """One model or tool call of a run, as the journal records and performs it.

    ``key`` is its idempotency key (:func:`~agents.journal.entries.effect_key`), kept in journal
    ``partition`` (the run's); ``request`` is recorded with ``issued``; ``on_unknown`` settles an
    outcome left unknown by a crash, with ``lookup`` when it is ``LOOKUP``.
    """

    key: str
    run_id: str
    partition: int
    kind: EffectKind
    name: str
    request: dict[str, Any]
    on_unknown: OnUnknown
    call: Callable[[], Awaitable[Any]]
    lookup: Callable[[], Awaitable[LookupResult]] | None = None

    @property
    def policy(self) -> OnUnknown:
        """``on_unknown`` as it applies: ``LOOKUP`` without a ``lookup`` counts as ``FAIL``."""
        if self.on_unknown is OnUnknown.LOOKUP and self.lookup is None:
            return OnUnknown.FAIL
        return self.on_unknown


Fault = Callable[[Effect, str], None]
"""A fault hook: called with the effect at ``effect.before_call`` and ``effect.after_call``."""


def no_fault(effect: Effect, point: str) -> None:
    """The default fault hook: injects nothing."""


def _outcome(done: JournalEntry, *, replayed: bool) -> EffectResult:
    """The outcome a ``done`` entry records."""
    return EffectResult(done.result, done.error, replayed, done.settled_by)


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


async def _all_durable(*writes: Awaitable[None]) -> None:
    """Await every write, in flight together; once all have settled, raise the first error.

    Writes are started in argument order (a journal hands them to its log in that order).
    """
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def _error_of(write: asyncio.Future[Any]) -> BaseException | None:
    """What a settled write failed with (a cancelled one: `CancelledError`), or None."""
    return asyncio.CancelledError() if write.cancelled() else write.exception()


def when_all_settled(futures: Sequence[asyncio.Future[Any]], then: Callable[[], None]) -> None:
    """Call ``then()`` once every one of ``futures`` is done (at once if there are none), from
    the last one's callback; ``then`` reads their outcomes (so none is logged as never
    retrieved). No future or task of its own: the per-step path counts its calls."""
    left = len(futures)

    def one(_: asyncio.Future[Any]) -> None:
        nonlocal left
        left -= 1
        if not left:
            then()

    if not left:
        then()
    for future in futures:
        future.add_done_callback(one)


def all_settled(futures: Sequence[asyncio.Future[Any]]) -> asyncio.Future[None]:
    """A future done (with None) once every one of ``futures`` is (`when_all_settled`), each
    one's exception retrieved: what ``asyncio.gather(*futures, return_exceptions=True)``
    waits for, without its gathering future and list of outcomes, which cost a step as much
    as its deferred effects' own callbacks. Cancelling it cancels none of ``futures``: their
    writers settle them in any case."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def finish() -> None:
        for future in futures:
            _error_of(future)  # retrieved: the awaiter reads what it needs
        if not done.done():  # its awaiter may have given up
            done.set_result(None)

    when_all_settled(futures, finish)
    return done


class EffectDriver:
    """Performs effects through ``journal`` for attempt ``attempt``, each at most once more.

    For an effect :func:`decide` chooses, from ``(issued, done)`` and the unacknowledged
    ``done`` of its key:

    1. ``Replay``: return the recorded outcome, ``replayed=True``. ``Rewrite``: write the
       unacknowledged ``done`` again, return its outcome, ``replayed=True``; nothing is called.
    2. ``Execute``: write ``issued`` (durably), ``fault(effect, "effect.before_call")``, call,
       ``fault(effect, "effect.after_call")``, write ``done``, return. With ``on_unknown=RETRY``
       the ``issued`` write runs beside the call (an effect that may be called again needs no
       durable trace before it is called) and ``done`` is sent behind it without waiting for
       its acknowledgement; both are awaited before the outcome is returned. A quick call's
       ``issued`` and ``done`` then share one produce request (one round trip, not two).
    3. ``Lookup``: look it up; found → write ``done`` with the found value and return it
       (``replayed=True``); not found → go on as ``Retry``. A lookup failing for good (not
       with a ``RetryableError``) fails closed with :data:`LOOKUP_FAILED`.
    4. ``Retry``: as ``Execute`` without writing ``issued`` again.
    5. ``FailClosed``: return :class:`EffectUnknown`; nothing is called or written.

    The ``done`` a ``Lookup`` or ``Retry`` writes says how it settled the unknown outcome
    (``settled_by``: ``lookup``, ``call_after_lookup``, ``retry``), so that the mark survives a
    crash before the run's next safe point: every replay of the ``done`` returns it.

    The call raising a :class:`~operators.exceptions.RetryableError` propagates with no
    ``done`` written: the step is retried later and finds ``issued`` without ``done``. So does
    a transport error escaping the call or the lookup (a connection reset, a read timeout:
    `agents.journal.transport`), as a `CallOutcomeUnknownError`: the call may have happened,
    and the tool's ``on_unknown`` settles it on the retry, as after a crash. Any other
    exception is a permanent failure of the effect, recorded as ``done`` with ``error`` so
    that every replay sees the same failure. The outcome returned after a ``done`` write is
    the one the journal keeps: the first ``done`` of the key.

    Both entry points raise `RetryableError` from the call, the lookup or the journal: retry
    the step later.
    """

    def __init__(
        self,
        journal: Journal,
        *,
        attempt: int,
        fault: Fault = no_fault,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.journal, self.attempt, self.fault, self.clock = journal, attempt, fault, clock

    async def perform(self, effect: Effect) -> EffectResult | EffectUnknown:
        """Perform ``effect``; its outcome, durable in the journal."""
        outcome = await _Performance(self, effect, deferring=False).run()
        assert not isinstance(outcome, Deferred)
        return outcome

    async def perform_deferred(self, effect: Effect) -> EffectResult | EffectUnknown | Deferred:
        """As `perform`, except that an ``Execute`` or ``Retry`` of an effect that may be
        called again (``on_unknown=RETRY``) returns as soon as the call has returned and its
        writes are handed to the journal: a :class:`Deferred`, whose ``settled`` the caller
        awaits before anything depends on the outcome being durable. The caller may go on
        meanwhile with other such effects, so that the writes of several share one round
        trip. Every other decision returns as `perform` does."""
        deferring = effect.policy is OnUnknown.RETRY
        return await _Performance(self, effect, deferring=deferring).run()


class _Performance:
    """One effect being performed by ``driver``: the decision carried out, step by step."""

    def __init__(self, driver: EffectDriver, effect: Effect, *, deferring: bool) -> None:
        self.driver, self.effect, self.deferring = driver, effect, deferring
        journal = driver.journal
        self.issued, self.done = journal.get(effect.key)
        self.unacknowledged = journal.unacknowledged(effect.key)
        state = EffectState.of(self.issued, self.done, self.unacknowledged)
        self.resolution = EffectResolution(effect.key, state)
        self.settled_by: SettledBy | None = None
        """What the ``done`` this performance writes says settled an unknown outcome."""

    async def run(self) -> EffectResult | EffectUnknown | Deferred:
        effect, journal = self.effect, self.driver.journal
        policy = effect.policy
        match decide(self.issued, self.done, policy, self.unacknowledged):
            case Replay(done=recorded):
                return _outcome(recorded, replayed=True)
            case Rewrite(done=recorded):
                await journal.write(recorded, partition=effect.partition)
                self.resolution.apply(EffectEvent.COMPLETE)
                return _outcome(recorded, replayed=True)
            case Execute() if policy is OnUnknown.RETRY:
                # Calling again is safe, so ``issued`` need not be durable before the call,
                # only before ``done``: one round trip fewer per model call and read-only call.
                write = self._write(self._entry("issued", request=effect.request))
                return await self._call_and_complete(asyncio.ensure_future(write))
            case Execute():
                await self._write(self._entry("issued", request=effect.request))
                self.resolution.apply(EffectEvent.ISSUE)
                return await self._call_and_complete()
            case Retry():
                self.settled_by = "retry"
                return await self._call_and_complete()
            case FailClosed(reason=reason):
                return self._fail_closed(reason)
            case Lookup():
                return await self._look_up()

    async def _look_up(self) -> EffectResult | EffectUnknown | Deferred:
        lookup = self.effect.lookup
        assert lookup is not None  # the policy is LOOKUP only with a lookup
        try:
            found = await lookup()
        except RetryableError:
            raise
        except Exception as exc:
            if leaves_outcome_unknown(exc):  # the lookup could not ask: ask again later
                raise CallOutcomeUnknownError(self.effect.key, _describe(exc)) from exc
            return self._fail_closed(f"{LOOKUP_FAILED}: {_describe(exc)}")
        match after_lookup(isinstance(found, LookupFound)):
            case RecordFound():
                assert isinstance(found, LookupFound)
                self.settled_by = "lookup"
                return await self._settle(self._done(found.value, None), True, None)
            case Retry():
                self.settled_by = "call_after_lookup"
                return await self._call_and_complete()

    def _entry(self, status: str, **fields: Any) -> JournalEntry:
        effect = self.effect
        entry: JournalEntry = _VALIDATE(  # `model_validate` less its Python wrapper
            {
                "key": effect.key,
                "run_id": effect.run_id,
                "status": status,
                "kind": effect.kind,
                "name": effect.name,
                "attempt": self.driver.attempt,
                "written_at": self.driver.clock(),
                **fields,
            }
        )
        return entry

    def _done(self, value: Any, error: str | None) -> JournalEntry:
        return self._entry("done", result=value, error=error, settled_by=self.settled_by)

    def _write(self, entry: JournalEntry) -> Awaitable[None]:
        return self.driver.journal.write(entry, partition=self.effect.partition)

    async def _call_and_complete(
        self, issuing: Awaitable[None] | None = None
    ) -> EffectResult | Deferred:
        """Call, then write ``done``; ``issuing``, the ``issued`` write started beside the
        call, is awaited with ``done`` (and before a retryable error goes up)."""
        effect, fault = self.effect, self.driver.fault
        fault(effect, "effect.before_call")
        try:
            value = await effect.call()
        except RetryableError:
            if issuing is not None:
                await asyncio.gather(issuing, return_exceptions=True)
            raise
        except Exception as exc:
            if leaves_outcome_unknown(exc):
                if issuing is not None:
                    await asyncio.gather(issuing, return_exceptions=True)
                raise CallOutcomeUnknownError(effect.key, _describe(exc)) from exc
            fault(effect, "effect.after_call")
            return await self._complete(None, _describe(exc), issuing)
        fault(effect, "effect.after_call")
        return await self._complete(value, None, issuing)

    async def _complete(
        self, value: Any, error: str | None, issuing: Awaitable[None] | None
    ) -> EffectResult | Deferred:
        """Write ``done``; return the outcome the journal keeps (the first ``done``), or,
        when deferring, the call's own outcome and the writes in flight.

        ``issuing``, the ``issued`` write started beside the call, is awaited together with
        the ``done`` write, which begins after it and so lands after it in the partition."""
        written = self._done(value, error)
        writing = self._write(written)  # handed over now, behind ``issuing``
        if not self.deferring:
            return await self._settle(written, False, issuing, writing)
        settled = self._settle_later(written, issuing, writing)
        provisional = _outcome(written, replayed=False)
        return Deferred(self.effect.key, provisional, settled)

    async def _settle(
        self,
        written: JournalEntry,
        replayed: bool,
        issuing: Awaitable[None] | None,
        writing: Awaitable[None] | None = None,
    ) -> EffectResult:
        """Await the ``done`` write (``writing``, begun here if None; with ``issuing``); the
        outcome the journal keeps."""
        if writing is None:
            writing = self._write(written)
        if issuing is None:
            await writing
        else:
            await _all_durable(issuing, writing)
        return self._durable(written, replayed, issued=issuing is not None)

    def _settle_later(
        self, written: JournalEntry, issuing: Awaitable[None] | None, writing: Awaitable[None]
    ) -> asyncio.Future[EffectResult]:
        """As `_settle` without a task of its own: the future completes once every write has
        settled (`when_all_settled`; each write's error is retrieved here), with the first
        one's error (in argument order) if any failed. No ``gather``: a step defers two
        effects and twenty runs step at once, and a gathering future and its callbacks cost as
        much again as the writes'."""
        settled: asyncio.Future[EffectResult] = asyncio.get_running_loop().create_future()
        writes = [asyncio.ensure_future(w) for w in (issuing, writing) if w is not None]

        def on_writes() -> None:
            if settled.done():  # its awaiter gave up
                return
            failed = [e for e in map(_error_of, writes) if e is not None]  # each retrieved
            if failed:
                settled.set_exception(failed[0])
                return
            try:
                settled.set_result(self._durable(written, False, issued=issuing is not None))
            except Exception as exc:  # noqa: BLE001 - handed to the awaiter, as a task would
                settled.set_exception(exc)

        when_all_settled(writes, on_writes)
        return settled

    def _durable(self, written: JournalEntry, replayed: bool, *, issued: bool) -> EffectResult:
        """The writes are durable: the resolution moves on; the outcome the journal keeps."""
        effect = self.effect
        if issued:
            self.resolution.apply(EffectEvent.ISSUE)
        self.resolution.apply(EffectEvent.COMPLETE)
        kept = self.driver.journal.get(effect.key)[1] or written
        earlier = kept is not written and kept != written  # the index holds what was written
        if earlier:
            what = f"{effect.key} ({effect.kind.value} {effect.name})"
            logger.warning("effect %s: an earlier done is kept", what)
        return _outcome(kept, replayed=replayed or earlier)

    def _fail_closed(self, reason: str) -> EffectUnknown:
        effect = self.effect
        self.resolution.apply(EffectEvent.FAIL_CLOSED)
        what = f"{effect.key} ({effect.kind.value} {effect.name})"
        logger.warning("effect %s fails closed: %s", what, reason)
        return EffectUnknown(key=effect.key, reason=reason)

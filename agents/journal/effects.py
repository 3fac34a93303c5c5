"""Performing one effect through the journal, effectively once: the I/O driver.

The agent runtime sends every model call and tool call through :func:`perform`. It reads the
journal, lets :func:`~agents.journal.resolution.decide` choose, and carries the decision out,
moving an :class:`~agents.journal.resolution.EffectResolution` through its table as the
journal's entries become durable.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sluicegate.agents.journal.entries import EffectKind, JournalEntry
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
from sluicegate.operators.exceptions import RetryableError

__all__ = [
    "LOOKUP_FAILED",
    "Deferred",
    "EffectResult",
    "EffectUnknown",
    "LookupFound",
    "LookupNotFound",
    "LookupResult",
    "no_fault",
    "perform",
]

logger = logging.getLogger(__name__)

LOOKUP_FAILED = "lookup_failed"
"""The :attr:`EffectUnknown.reason` when the tool's lookup itself failed for good."""


@dataclass(frozen=True, slots=True)
class EffectResult:
    """The outcome of an effect: its ``value``, or the ``error`` it failed with for good.

    ``replayed`` is true when this call did not execute the effect (a dedup hit): the outcome
    came from the journal's ``done``, or from the tool's lookup.
    """

    value: Any
    error: str | None
    replayed: bool


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


def no_fault(point: str) -> None:
    """The default fault hook: injects nothing."""


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


async def perform(
    journal: Journal,
    *,
    key: str,
    run_id: str,
    partition: int,
    kind: EffectKind,
    name: str,
    request: dict[str, Any],
    attempt: int,
    on_unknown: OnUnknown,
    call: Callable[[], Awaitable[Any]],
    lookup: Callable[[], Awaitable[LookupResult]] | None = None,
    fault: Callable[[str], None] = no_fault,
    clock: Callable[[], float] = time.time,
    defer: bool = False,
) -> EffectResult | EffectUnknown | Deferred:
    """Perform effect ``key`` at most once more, and return its outcome.

    1. Read ``(issued, done)`` and the unacknowledged ``done`` for ``key``; :func:`decide`
       with ``on_unknown`` (``LOOKUP`` without a ``lookup`` counts as ``FAIL``).
    2. ``Replay``: return the recorded outcome, ``replayed=True``. ``Rewrite``: write the
       unacknowledged ``done`` again, return its outcome, ``replayed=True``; nothing is called.
    3. ``Execute``: write ``issued`` (durably), ``fault("effect.before_call")``, ``call()``,
       ``fault("effect.after_call")``, write ``done``, return. With ``on_unknown=RETRY`` the
       ``issued`` write runs beside the call (an effect that may be called again needs no
       durable trace before it is called) and ``done`` is sent behind it without waiting for
       its acknowledgement; both are awaited before the outcome is returned. A quick call's
       ``issued`` and ``done`` then share one produce request (one round trip, not two).
    4. ``Lookup``: ``lookup()``; found → write ``done`` with the found value and return it
       (``replayed=True``); not found → go on as ``Retry``. A lookup failing for good (not
       with a ``RetryableError``) fails closed with :data:`LOOKUP_FAILED`.
    5. ``Retry``: as ``Execute`` without writing ``issued`` again.
    6. ``FailClosed``: return :class:`EffectUnknown`; nothing is called or written.

    With ``defer`` and ``on_unknown=RETRY``, an ``Execute`` or ``Retry`` returns as soon as the
    call has returned and its writes are handed to the journal: a :class:`Deferred`, whose
    ``settled`` the caller awaits before anything depends on the outcome being durable. The
    caller may go on meanwhile with other effects that may be called again, so that the
    writes of several effects share one round trip. Every other decision returns as without
    ``defer``.

    ``call`` raising a :class:`~operators.exceptions.RetryableError` propagates with no
    ``done`` written: the step is retried later and finds ``issued`` without ``done``. Any
    other exception is a permanent failure of the effect, recorded as ``done`` with ``error``
    so that every replay sees the same failure. The outcome returned after a ``done`` write is
    the one the journal keeps: the first ``done`` of ``key``.

    Raises:
        RetryableError: from ``call``, ``lookup`` or the journal; retry the step later.
    """
    issued, done = journal.get(key)
    unacknowledged = journal.unacknowledged(key)
    policy = OnUnknown.FAIL if on_unknown is OnUnknown.LOOKUP and lookup is None else on_unknown
    decision = decide(issued, done, policy, unacknowledged)
    resolution = EffectResolution(key, EffectState.of(issued, done, unacknowledged))
    deferring = defer and policy is OnUnknown.RETRY

    def entry(status: str, **fields: Any) -> JournalEntry:
        return JournalEntry.model_validate(
            {
                "key": key,
                "run_id": run_id,
                "status": status,
                "kind": kind,
                "name": name,
                "attempt": attempt,
                "written_at": clock(),
                **fields,
            }
        )

    async def settle(
        written: JournalEntry, replayed: bool, issuing: Awaitable[None] | None
    ) -> EffectResult:
        """Await the ``done`` write (with ``issuing``); the outcome the journal keeps."""
        if issuing is None:
            await journal.write(written, partition=partition)
        else:
            await _all_durable(issuing, journal.write(written, partition=partition))
            resolution.apply(EffectEvent.ISSUE)
        resolution.apply(EffectEvent.COMPLETE)
        kept = journal.get(key)[1] or written
        if kept != written:
            logger.warning("effect %s (%s %s): an earlier done is kept", key, kind.value, name)
        return EffectResult(
            value=kept.result, error=kept.error, replayed=replayed or kept != written
        )

    async def complete(
        value: Any, error: str | None, replayed: bool, issuing: Awaitable[None] | None = None
    ) -> EffectResult | Deferred:
        """Write ``done``; return the outcome the journal keeps (the first ``done``), or,
        when deferring, the call's own outcome and the writes in flight.

        ``issuing``, the ``issued`` write started beside the call, is awaited together with
        the ``done`` write, which begins after it and so lands after it in the partition."""
        written = entry("done", result=value, error=error)
        if not deferring:
            return await settle(written, replayed, issuing)
        settled = asyncio.ensure_future(settle(written, replayed, issuing))
        return Deferred(key, EffectResult(value=value, error=error, replayed=replayed), settled)

    async def call_and_complete(issuing: Awaitable[None] | None = None) -> EffectResult | Deferred:
        """Call, then write ``done``; ``issuing``, the ``issued`` write started beside the
        call, is awaited with ``done`` (and before a retryable error goes up)."""
        fault("effect.before_call")
        try:
            value = await call()
        except RetryableError:
            if issuing is not None:
                await asyncio.gather(issuing, return_exceptions=True)
            raise
        except Exception as exc:  # noqa: BLE001 - a permanent failure is recorded, not raised
            fault("effect.after_call")
            return await complete(None, _describe(exc), replayed=False, issuing=issuing)
        fault("effect.after_call")
        return await complete(value, None, replayed=False, issuing=issuing)

    def fail_closed(reason: str) -> EffectUnknown:
        resolution.apply(EffectEvent.FAIL_CLOSED)
        logger.warning("effect %s (%s %s) fails closed: %s", key, kind.value, name, reason)
        return EffectUnknown(key=key, reason=reason)

    match decision:
        case Replay(done=recorded):
            return EffectResult(value=recorded.result, error=recorded.error, replayed=True)
        case Rewrite(done=recorded):
            await journal.write(recorded, partition=partition)
            resolution.apply(EffectEvent.COMPLETE)
            return EffectResult(value=recorded.result, error=recorded.error, replayed=True)
        case Execute() if policy is OnUnknown.RETRY:
            # Calling again is safe, so ``issued`` need not be durable before the call, only
            # before ``done``: one round trip fewer per model call and read-only tool call.
            write = journal.write(entry("issued", request=request), partition=partition)
            return await call_and_complete(asyncio.ensure_future(write))
        case Execute():
            await journal.write(entry("issued", request=request), partition=partition)
            resolution.apply(EffectEvent.ISSUE)
            return await call_and_complete()
        case Retry():
            return await call_and_complete()
        case FailClosed(reason=reason):
            return fail_closed(reason)
        case Lookup():
            assert lookup is not None
            try:
                found = await lookup()
            except RetryableError:
                raise
            except Exception as exc:  # noqa: BLE001 - the outcome stays unknown: fail closed
                return fail_closed(f"{LOOKUP_FAILED}: {_describe(exc)}")
            match after_lookup(isinstance(found, LookupFound)):
                case RecordFound():
                    assert isinstance(found, LookupFound)
                    return await settle(entry("done", result=found.value), True, None)
                case Retry():
                    return await call_and_complete()

"""What to do about one effect, given what the journal holds for its key: sans-IO.

An effect's journal state follows one table (:data:`TRANSITIONS`)::

    absent ──issue──▶ issued ──complete──▶ done
                        │
                        └──fail_closed──▶ unknown

``done`` is final: a replay returns the recorded result (:class:`Replay`), and the first
``done`` of a key is the one kept (the journal never replaces it, so a retry's later error
cannot overwrite a recorded success). A ``done`` whose write raised may be durable: it is
written again as it was (:class:`Rewrite`), nothing is called. ``issued`` without ``done``
means a call may or may not have happened; what resolves it is the tool's
:class:`OnUnknown` declaration:

* ``LOOKUP`` — ask the tool by key (:class:`Lookup`), then :func:`after_lookup`;
* ``RETRY`` — call again with the same key, which the tool deduplicates (:class:`Retry`);
* ``FAIL`` — neither is possible: fail closed (:class:`FailClosed`), a person decides.

Nothing here does I/O; :mod:`agents.journal.effects` performs the decisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from sluicegate.agents.journal.entries import JournalEntry
from sluicegate.agents.journal.exceptions import JournalTransitionError

__all__ = [
    "OUTCOME_UNKNOWN",
    "TRANSITIONS",
    "Decision",
    "EffectEvent",
    "EffectResolution",
    "EffectState",
    "Execute",
    "FailClosed",
    "Lookup",
    "OnUnknown",
    "RecordFound",
    "Replay",
    "Retry",
    "Rewrite",
    "after_lookup",
    "decide",
]

OUTCOME_UNKNOWN = "outcome_unknown"
"""The :attr:`FailClosed.reason` when an issued effect can be neither looked up nor retried."""


class OnUnknown(StrEnum):
    """How a tool lets an ``issued`` effect without ``done`` be resolved."""

    LOOKUP = "lookup"
    """The tool can tell, by idempotency key, whether the effect happened and what it gave."""
    RETRY = "retry"
    """Calling again with the same idempotency key is safe: the tool deduplicates by key."""
    FAIL = "fail"
    """Neither: the outcome is unknown and the run fails closed."""


class EffectState(StrEnum):
    """Where an effect stands in the journal."""

    ABSENT = "absent"
    ISSUED = "issued"
    DONE = "done"
    UNKNOWN = "unknown"

    @classmethod
    def of(
        cls,
        issued: JournalEntry | None,
        done: JournalEntry | None,
        unacknowledged: JournalEntry | None = None,
    ) -> EffectState:
        """The state the journal's entries show; ``done`` wins over anything else, and a
        ``done`` not acknowledged means the effect was issued."""
        if done is not None:
            return cls.DONE
        if issued is not None or unacknowledged is not None:
            return cls.ISSUED
        return cls.ABSENT


class EffectEvent(StrEnum):
    """What happens to an effect's journal state."""

    ISSUE = "issue"
    """``issued`` was written, durably."""
    COMPLETE = "complete"
    """``done`` was written, durably."""
    FAIL_CLOSED = "fail_closed"
    """The outcome of an issued effect cannot be found out."""


TRANSITIONS: Mapping[tuple[EffectState, EffectEvent], EffectState] = {
    (EffectState.ABSENT, EffectEvent.ISSUE): EffectState.ISSUED,
    (EffectState.ISSUED, EffectEvent.COMPLETE): EffectState.DONE,
    (EffectState.ISSUED, EffectEvent.FAIL_CLOSED): EffectState.UNKNOWN,
}
"""Every allowed transition; any other (state, event) pair is a bug of the caller."""


class EffectResolution:
    """The state of one effect as its driver moves it through :data:`TRANSITIONS`."""

    def __init__(self, key: str, state: EffectState = EffectState.ABSENT) -> None:
        self._key = key
        self._state = state

    @property
    def key(self) -> str:
        """The effect's idempotency key."""
        return self._key

    @property
    def state(self) -> EffectState:
        """Where the effect stands."""
        return self._state

    def apply(self, event: EffectEvent) -> EffectState:
        """Move to the state ``event`` leads to, and return it.

        Raises:
            JournalTransitionError: the table has no transition for ``event`` from here.
        """
        target = TRANSITIONS.get((self._state, event))
        if target is None:
            raise JournalTransitionError(self._key, self._state.value, event.value)
        self._state = target
        return target


@dataclass(frozen=True, slots=True)
class Replay:
    """The effect is done: return the recorded result (or error) without calling."""

    done: JournalEntry


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A ``done`` was written but not acknowledged: write it again, as it was, and return its
    outcome without calling (the call completed; calling again could record another)."""

    done: JournalEntry


@dataclass(frozen=True, slots=True)
class Execute:
    """The effect never started: write ``issued``, call, write ``done``."""


@dataclass(frozen=True, slots=True)
class Lookup:
    """The outcome is unknown: ask the tool by key, then follow :func:`after_lookup`."""


@dataclass(frozen=True, slots=True)
class Retry:
    """Call again with the same key (``issued`` is already written), then write ``done``."""


@dataclass(frozen=True, slots=True)
class RecordFound:
    """The lookup found the effect: write ``done`` with the found result and return it."""


@dataclass(frozen=True, slots=True)
class FailClosed:
    """The outcome cannot be found out: perform nothing, park the run for a person."""

    reason: str


Decision = Replay | Rewrite | Execute | Lookup | Retry | FailClosed


def decide(
    issued: JournalEntry | None,
    done: JournalEntry | None,
    on_unknown: OnUnknown,
    unacknowledged: JournalEntry | None = None,
) -> Decision:
    """What to do about an effect, given its journal entries (``unacknowledged``: a ``done``
    whose write raised) and the tool's declaration."""
    if done is not None:
        return Replay(done)
    if unacknowledged is not None:
        return Rewrite(unacknowledged)
    if issued is None:
        return Execute()
    match on_unknown:
        case OnUnknown.LOOKUP:
            return Lookup()
        case OnUnknown.RETRY:
            return Retry()
        case OnUnknown.FAIL:
            return FailClosed(OUTCOME_UNKNOWN)


def after_lookup(found: bool) -> RecordFound | Retry:
    """What follows a lookup: found → the effect happened, record it; not found → it never
    happened, so call it (with the same key, ``issued`` being written already)."""
    return RecordFound() if found else Retry()

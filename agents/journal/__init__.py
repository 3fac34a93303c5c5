"""The effect journal: the durable, never-rolled-back record of an agent run's effects.

Every model call and tool call of a run goes through an :class:`EffectDriver` under a deterministic
idempotency key (:func:`effect_key`). ``issued`` is written, durably, before the call and
``done`` with the result after it, so that across crashes every effect happens effectively
once: a replay returns the recorded result, and an effect issued but not done is resolved by
the tool's :class:`OnUnknown` declaration (look it up, retry it with the same key, or fail
closed).

Modules: :mod:`~agents.journal.entries` (what is stored), :mod:`~agents.journal.resolution`
(the sans-IO decisions), :mod:`~agents.journal.store` (the contract and an in-memory
journal), :mod:`~agents.journal.kafka` (the compacted-topic journal; import `KafkaJournal` from
there, so that the sans-IO parts load no Kafka client), :mod:`~agents.journal.effects` (the
driver), :mod:`~agents.journal.exceptions`.
"""

from __future__ import annotations

from sluicegate.agents.journal.effects import (
    LOOKUP_FAILED,
    Deferred,
    Effect,
    EffectDriver,
    EffectResult,
    EffectUnknown,
    LookupFound,
    LookupNotFound,
    LookupResult,
    all_settled,
    no_fault,
    when_all_settled,
)
from sluicegate.agents.journal.entries import (
    SCHEMA_VERSION,
    EffectKind,
    EntryStatus,
    JournalEntry,
    SettledBy,
    effect_key,
    record_key,
)
from sluicegate.agents.journal.exceptions import (
    CallOutcomeUnknownError,
    JournalCorruptError,
    JournalTransitionError,
    JournalUnavailableError,
)
from sluicegate.agents.journal.resolution import (
    OUTCOME_UNKNOWN,
    TRANSITIONS,
    Decision,
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
from sluicegate.agents.journal.store import InMemoryJournal, Journal, JournalIndex, StatusCounts

__all__ = [
    "LOOKUP_FAILED",
    "OUTCOME_UNKNOWN",
    "SCHEMA_VERSION",
    "TRANSITIONS",
    "CallOutcomeUnknownError",
    "Decision",
    "Deferred",
    "Effect",
    "EffectDriver",
    "EffectEvent",
    "EffectKind",
    "EffectResolution",
    "EffectResult",
    "EffectState",
    "EffectUnknown",
    "EntryStatus",
    "Execute",
    "FailClosed",
    "InMemoryJournal",
    "Journal",
    "JournalCorruptError",
    "JournalEntry",
    "JournalIndex",
    "JournalTransitionError",
    "JournalUnavailableError",
    "Lookup",
    "LookupFound",
    "LookupNotFound",
    "LookupResult",
    "OnUnknown",
    "RecordFound",
    "Replay",
    "Retry",
    "Rewrite",
    "SettledBy",
    "StatusCounts",
    "after_lookup",
    "all_settled",
    "decide",
    "effect_key",
    "no_fault",
    "record_key",
    "when_all_settled",
]

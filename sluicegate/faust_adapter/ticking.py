"""When ``app.timer`` and ``app.crontab`` fire, sans-IO: each tick fires once, across crashes.

A schedule is a fixed series of wall-clock instants, its *ticks*: `Interval` (``app.timer``:
every multiple of the interval since the Unix epoch) or `Cron` (``app.crontab``: croniter's
times in the crontab's timezone). Ticks are named by their instant, so a restarted process
finds the same ones, whenever it starts.

The timer's operator keeps one number in its keyed state, ``passed``: the last tick done,
fired or (for a new job) passed before it started (`TickRule` is fed it and the clock, and
returns a `Verdict`). That number is in the same checkpoint as
what the firing sent, which the exactly-once sinks publish only when that checkpoint completes.
So a tick fired, then lost in a crash before its checkpoint completed, is neither published
nor recorded, and is fired again after the restore: its effect happens once.

Transitions (``passed`` from state, None when the job is new; ``now`` the clock;
``next(t)`` the first tick after ``t``, ``latest(t)`` the last one at or before ``t``)::

    event    condition                      verdict
    -------  -----------------------------  -------------------------------------------------
    open     passed is None (a new job)     passed = latest(now); wake at next(passed)
    open     next(passed) > now             wake at next(passed)
    open     next(passed) <= now (overdue)  wake at once
    wake     due = next(passed) > now       nothing (woken early); wake again at due
    wake     due <= now                     fire latest(now); passed = it; wake at next(it)

The last row is where ticks *coalesce*: when several are due at once (the job was down, or the
subtask too busy to wake in time), only the latest fires, once, and `Verdict.skipped` says
how many were passed over, as Kafka Streams' wall-clock punctuation and faust's own timers do
(faust never runs a missed interval). A new job's first tick is the first one after it opens:
ticks before the job existed never fire; nor do those before the job's first checkpoint if it
crashes before that checkpoint completes (its state, the baseline included, is then empty).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Protocol

from croniter import croniter

__all__ = ["Cron", "Interval", "Schedule", "TickRule", "Verdict"]

_COUNT_CAP = 10_000
"""`Cron.count_between` stops counting here (a downtime of weeks over a per-minute crontab)."""


class Schedule(Protocol):
    """A series of wall-clock ticks (seconds since the epoch)."""

    def next_after(self, t: float) -> float:
        """The first tick strictly after ``t``."""
        ...

    def latest_at(self, t: float) -> float:
        """The last tick at or before ``t``."""
        ...

    def count_between(self, start: float, end: float) -> int:
        """How many ticks lie strictly between ``start`` and ``end`` (at most a cap)."""
        ...


@dataclass(frozen=True, slots=True)
class Interval:
    """``app.timer(interval=seconds)``: ticks at every multiple of ``seconds`` since the
    epoch (faust counts from the worker's start instead, which a restart would move)."""

    seconds: float

    def __post_init__(self) -> None:
        if not self.seconds > 0 or math.isinf(self.seconds):
            raise ValueError(f"a timer's interval is a positive number, not {self.seconds}")

    def next_after(self, t: float) -> float:
        return (math.floor(t / self.seconds) + 1) * self.seconds

    def latest_at(self, t: float) -> float:
        return math.floor(t / self.seconds) * self.seconds

    def count_between(self, start: float, end: float) -> int:
        k0, k1 = round(start / self.seconds), math.ceil(end / self.seconds)
        return max(0, min(_COUNT_CAP, k1 - k0 - 1))


@dataclass(frozen=True, slots=True)
class Cron:
    """``app.crontab(spec, timezone=...)``: croniter's times for ``spec`` in ``timezone``."""

    spec: str
    timezone: tzinfo = UTC

    def __post_init__(self) -> None:
        if not croniter.is_valid(self.spec):
            raise ValueError(f"{self.spec!r} is not a crontab schedule")

    def next_after(self, t: float) -> float:
        return float(croniter(self.spec, self._at(t)).get_next(float))

    def latest_at(self, t: float) -> float:
        following = self.next_after(t)
        # croniter's get_prev is strictly before its start: start it from the tick after t.
        return float(croniter(self.spec, self._at(following)).get_prev(float))

    def count_between(self, start: float, end: float) -> int:
        found, tick = 0, self.next_after(start)
        while tick < end and found < _COUNT_CAP:
            found, tick = found + 1, self.next_after(tick)
        return found

    def _at(self, t: float) -> datetime:
        return datetime.fromtimestamp(t, self.timezone)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do: fire the tick ``fire`` (None: nothing), having passed over ``skipped``
    earlier due ones; store ``passed`` as the last tick done (None: unchanged); be woken after
    ``wake_after_s`` seconds."""

    wake_after_s: float
    fire: float | None = None
    passed: float | None = None
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class TickRule:
    """The transitions of the module docstring for ``schedule``."""

    schedule: Schedule

    def opened(self, passed: float | None, now: float) -> Verdict:
        """The subtask opened over state whose last tick done is ``passed``."""
        if passed is None:
            start = self.schedule.latest_at(now)
            return Verdict(self.schedule.next_after(start) - now, passed=start)
        return Verdict(max(0.0, self.schedule.next_after(passed) - now))

    def woken(self, passed: float, now: float) -> Verdict:
        """The wake-up armed by the previous verdict ran."""
        due = self.schedule.next_after(passed)
        if due > now:
            return Verdict(due - now)
        tick = self.schedule.latest_at(now)
        return Verdict(
            self.schedule.next_after(tick) - now, fire=tick, passed=tick,
            skipped=self.schedule.count_between(passed, tick),
        )  # fmt: skip

"""The batching rule of ``stream.take(max_, within=s)``, sans-IO: when a buffer of values is
yielded to the agent as a batch, and when a wake-up must be armed for its deadline.

The buffer of one input partition is a `Pending` value (how many values, and the wall-clock
deadline of the oldest one); `TakeRule` is fed what happens to it and returns a `Verdict`:
the buffer after, how many of its first values to yield now, and after how many seconds to
be woken. The buffer itself (rows of keyed state) and the clock are the caller's
(`takes.TakeBuffer`, the operator).

Transitions (``n`` values buffered, ``max`` = ``max_``, ``d`` the deadline, ``now`` the wall
clock; *yield k* leaves ``n - k`` values, which keep ``d``)::

    event      condition                       verdict
    ---------  ------------------------------  ----------------------------------------------
    value      n + 1 >= max, or d <= now       yield min(n + 1, max); leftovers: wake at once
    value      n == 0, within set              buffer 1, d = now + within; wake after within
    value      otherwise                       buffer n + 1 (d unchanged); nothing to arm
    wake       n == 0                          nothing (an earlier buffer was yielded full)
    wake       n >= max, or d <= now           yield min(n, max); leftovers: wake at once
    wake       d > now                         wake again after d - now (the clock moved back)
    wake       no within                       nothing (only a full buffer is yielded)
    restore    n == 0, or no within and n<max  nothing
    restore    n >= max, or d set              wake after max(0, d - now) (0 when full)

A deadline is the oldest buffered value's arrival plus ``within``: no value waits longer than
``within`` (faust restarts its timer after each batch, which bounds the wait the same way). A
value that arrives after the deadline, before its wake-up ran (a busy subtask runs wake-ups
between fetches), yields the batch at once, itself included.
Leftovers exist only when a buffer was restored larger than ``max`` (a savepoint of an app
whose ``max_`` was lowered since): they are yielded ``max`` at a time, never more.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Pending", "TakeRule", "Verdict"]


@dataclass(frozen=True, slots=True)
class Pending:
    """A partition's buffer: ``count`` values, the oldest due at ``deadline`` (wall-clock
    seconds; None when empty or without ``within``)."""

    count: int = 0
    deadline: float | None = None


EMPTY = Pending()


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do: yield the first ``flush`` buffered values as one batch (0: none), keep
    ``pending`` as the buffer after it, and arm a wake-up after ``wake_after_s`` seconds
    (None: none)."""

    pending: Pending
    flush: int = 0
    wake_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class TakeRule:
    """``stream.take(max_, within=within_s)``; ``within_s`` None (or 0, as faust reads it):
    only a full buffer is yielded. Transitions in the module docstring."""

    max_: int
    within_s: float | None

    def __post_init__(self) -> None:
        if self.max_ < 1:
            raise ValueError(f"take's max_ is at least 1, not {self.max_}")
        if self.within_s is not None and self.within_s < 0:
            raise ValueError(f"take's within is not negative, not {self.within_s}")

    def value_added(self, pending: Pending, now: float) -> Verdict:
        """A value was appended to the buffer ``pending``."""
        count = pending.count + 1
        deadline = pending.deadline
        if pending.count == 0 and self.within_s:
            deadline = now + self.within_s
        after = Pending(count, deadline)
        if count >= self.max_ or (pending.count > 0 and _due(pending, now)):
            return self._yield(after)
        if pending.count == 0 and self.within_s:
            return Verdict(after, wake_after_s=self.within_s)
        return Verdict(after)

    def woken(self, pending: Pending, now: float) -> Verdict:
        """The wake-up armed for the buffer's deadline ran."""
        if pending.count == 0:
            return Verdict(EMPTY)
        if pending.count >= self.max_ or _due(pending, now):
            return self._yield(pending)
        if pending.deadline is not None:
            return Verdict(pending, wake_after_s=pending.deadline - now)
        return Verdict(pending)

    def restored(self, pending: Pending, now: float) -> Verdict:
        """The buffer was restored from a checkpoint or savepoint: re-arm its deadline."""
        if pending.count >= self.max_:
            return Verdict(pending, wake_after_s=0.0)
        if pending.count == 0 or pending.deadline is None:
            return Verdict(pending)
        return Verdict(pending, wake_after_s=max(0.0, pending.deadline - now))

    def _yield(self, pending: Pending) -> Verdict:
        flush = min(pending.count, self.max_)
        left = pending.count - flush
        if left == 0:
            return Verdict(EMPTY, flush=flush)
        return Verdict(Pending(left, pending.deadline), flush=flush, wake_after_s=0.0)


def _due(pending: Pending, now: float) -> bool:
    return pending.deadline is not None and pending.deadline <= now

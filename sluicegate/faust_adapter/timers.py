"""``@app.timer`` and ``@app.crontab`` as operators: each tick fires once (`ticking`).

Each timer is an operator of parallelism 1 reading the job's clock topic
(`plan.FaustPlan.clock_topic`, one partition that nothing writes). Its partition holds the
timer's state, one row, and its wake-ups; its barriers are taken at the trigger like any
source's, so the timer's state and what it sent are in every checkpoint.

`TimerOperator.on_wake`, at each wake-up, in order:

1. read ``passed`` (the last tick done) from state, and ask `ticking.TickRule` what is due;
2. store the new ``passed`` and arm the next wake-up;
3. if a tick is due, call the timer (with the app if it takes an argument, as faust does) with
   the app's producer bound (`binding.AppBinding.bound`, no table: the reader refused timers
   that name one), `scheduled_tick` telling it which tick it runs for;
4. emit what it sent, in order, through the context: to topics between operators, or to
   exactly-once sinks, published when the checkpoint holding this tick's ``passed`` completes.

A timer that raises (or awaits real I/O) consumes its tick, as in faust, where the next tick
runs anyway: what it sent is dropped, the error is logged and counted (``sluicegate status``:
``ticks``, ``failed``), and the job goes on. Records that appear in the clock topic are not
the timers': they are ignored.

State row of the clock partition: ``faust-timer/passed``, the tick as a big-endian double.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sluicegate.faust_adapter.binding import AppBinding, check_sends
from sluicegate.faust_adapter.exceptions import AgentStepError
from sluicegate.faust_adapter.plan import TimerPlan
from sluicegate.faust_adapter.stepping import run_now
from sluicegate.faust_adapter.ticking import TickRule, Verdict
from sluicegate.operators.contract import Context, OpenContext, Operator, Record
from sluicegate.operators.state.store import PartitionState

__all__ = ["TIMER_WAKE_KEY", "TimerOperator", "scheduled_tick"]

logger = logging.getLogger(__name__)

TIMER_WAKE_KEY = b"faust-timer"
_PASSED = b"faust-timer/passed"
_DOUBLE = struct.Struct(">d")
_TICK: ContextVar[float | None] = ContextVar("sluicegate_faust_tick", default=None)


def scheduled_tick() -> float | None:
    """The tick (seconds since the epoch) of the timer or crontab now running: the instant it
    was scheduled for, not when it ran (which is later, and after a crash may be much later).
    A timer can label what it sends with it. None outside a timer."""
    return _TICK.get()


@contextmanager
def _ticking(tick: float) -> Iterator[None]:
    token = _TICK.set(tick)
    try:
        yield
    finally:
        _TICK.reset(token)


class TimerOperator(Operator):
    """The one subtask of a timer (module docstring); ``clock`` is the wall clock its ticks
    are on."""

    def __init__(
        self, app: Any, timer: TimerPlan, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._app, self._timer = app, timer
        self._binding = AppBinding.install(app)
        self._rule = TickRule(timer.schedule)
        self._clock = clock
        self._outputs = frozenset(timer.sends)
        self._fired = self._failed = self._skipped = 0

    async def open(self, ctx: OpenContext) -> None:
        """Store a new job's starting point, and arm the wake-up of the next tick."""
        for topic, partition in ctx.input_partitions:
            state = ctx.state(topic, partition)
            verdict = self._rule.opened(self._passed(state), self._clock())
            self._store(state, verdict)
            ctx.wake(topic, partition, TIMER_WAKE_KEY, after_s=verdict.wake_after_s)

    def process(self, record: Record, ctx: Context) -> None:
        """A record in the clock topic: not the timers' (nothing of theirs is written there)."""

    def on_wake(self, key: bytes, ctx: Context) -> None:
        """Steps 1-4 of the module docstring."""
        if key != TIMER_WAKE_KEY:
            return
        now = self._clock()
        passed = self._passed(ctx.state)
        verdict = self._rule.opened(None, now) if passed is None else self._rule.woken(passed, now)
        self._store(ctx.state, verdict)
        ctx.wake(TIMER_WAKE_KEY, after_s=verdict.wake_after_s)
        if verdict.fire is not None:
            self._fire(verdict.fire, verdict.skipped, ctx)

    def status_counts(self) -> Mapping[str, Mapping[str, int]]:
        return {"ticks": {"fired": self._fired, "failed": self._failed,
                          "skipped": self._skipped}}  # fmt: skip

    def _fire(self, tick: float, skipped: int, ctx: Context) -> None:
        name = self._timer.name
        if skipped:
            self._skipped += skipped
            logger.warning(
                "%s %s: %d earlier due ticks passed over, firing the latest (%.3f) once",
                self._timer.kind, name, skipped, tick, extra={"timer": name, "tick": tick},
            )  # fmt: skip
        try:
            with _ticking(tick), self._binding.bound(name, None) as outbox:
                run_now(name, self._timer.call(self._app))
            check_sends(name, outbox, self._outputs, "timer")
        except Exception as exc:
            self._failed += 1
            logger.error(
                "%s %s failed at its tick %.3f (consumed; the next tick runs): %r",
                self._timer.kind, name, tick, exc, exc_info=exc,
                extra={"timer": name, "tick": tick},
            )  # fmt: skip
            return
        self._fired += 1
        for out in outbox:
            ctx.emit(out.topic, out.value, key=out.key)

    def _passed(self, state: PartitionState) -> float | None:
        raw = state.get(_PASSED)
        if raw is None:
            return None
        if len(raw) != _DOUBLE.size:
            raise AgentStepError(
                self._timer.name, f"its state holds a tick of {len(raw)} bytes, not 8"
            )
        (passed,) = _DOUBLE.unpack(raw)
        return float(passed)

    @staticmethod
    def _store(state: PartitionState, verdict: Verdict) -> None:
        if verdict.passed is not None:
            state.put(_PASSED, _DOUBLE.pack(verdict.passed))

"""``app.timer`` and ``app.crontab`` through the adapter, in memory with a clock set here
(`tests.faust_apps.ticks`: a timer every second to a topic, a crontab every second to an agent
that counts its ticks): ticks after the job starts fire once each, labelled by
`scheduled_tick`; a tick lost in a crash before its checkpoint fires again after the restore;
ticks due while the job was down fire once together; failing timers consume their tick."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust
import pytest

from sluicegate.cli.main import main
from sluicegate.faust_adapter import build_pipeline, read_app
from sluicegate.faust_adapter.exceptions import AgentStepError
from sluicegate.faust_adapter.ticking import Cron, Interval
from sluicegate.faust_adapter.timers import TIMER_WAKE_KEY, TimerOperator
from sluicegate.operators.specs import TopicKind
from tests.faust_apps import ticks
from tests.unit.faust_adapter.runner import MemoryRun
from tests.unit.faust_adapter.test_take import Clock, line_of

T0 = 1_700_000_000.0
TIMER = "tests.faust_apps.ticks.make_app.every_interval"
CRON = "tests.faust_apps.ticks.make_app.every_second"


async def opened(app: Any, clock: Clock) -> MemoryRun:
    """A new job of ``app``, its operators opened at ``clock``'s time."""
    plan = read_app(app, modules=[ticks])
    assert plan.refusals == ()
    pipeline = build_pipeline(plan, clock=clock)
    return await MemoryRun(pipeline, clock).restored(pipeline)


def timer_ticks(run: MemoryRun, tag: str) -> list[float]:
    return [ticks.Tick.loads(v).tick for _, v in run.sinks[f"ticks-{tag}"]]


def counted(run: MemoryRun, tag: str) -> list[tuple[float, int]]:
    found = [ticks.Counted.loads(v) for _, v in run.sinks[f"cron-counts-{tag}"]]
    return [(c.tick, c.n) for c in found]


def advance(run: MemoryRun, clock: Clock, until: float, step: float = 0.25) -> None:
    while clock.now < until:
        clock.now = min(until, clock.now + step)
        run.tick()


def test_the_plan_reads_each_timer_with_its_schedule_line_and_sends() -> None:
    plan = read_app(ticks.make_app("p"), modules=[ticks])
    timer, cron = plan.timers
    assert (timer.kind, timer.uid, timer.schedule, timer.sends) == (
        "app.timer", TIMER, Interval(1.0), ("ticks-p",),
    )  # fmt: skip
    assert (cron.kind, cron.uid, cron.sends) == ("app.crontab", CRON, ("cron-p",))
    assert isinstance(cron.schedule, Cron)
    assert cron.schedule.spec == ticks.CRON
    assert (
        timer.where
        == f"{ticks.__file__}:{line_of(ticks.__file__, '@app.timer(interval=interval)')}"
    )
    assert cron.where == f"{ticks.__file__}:{line_of(ticks.__file__, '@app.crontab(cron)')}"
    pipeline = build_pipeline(plan)
    clock_topic = pipeline.topics["sluicegate.faust-ticks-p.clock"]
    assert (clock_topic.kind, clock_topic.partitions) == (TopicKind.SOURCE, 1)
    assert pipeline.topics["cron-p"].kind is TopicKind.TOPIC  # written by the crontab
    spec = pipeline.operators[TIMER]
    assert (spec.inputs, spec.outputs, spec.parallelism) == (
        ("sluicegate.faust-ticks-p.clock",), ("ticks-p",), 1,
    )  # fmt: skip
    assert isinstance(spec.factory(), TimerOperator)
    pipeline.build()


def test_faust_check_shows_each_timer_and_its_operator(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["faust", "check", "tests.faust_apps.ticks:app"]) == 0
    out = capsys.readouterr().out
    assert f"operator {TIMER}: sluicegate.faust-ticks-demo.clock -> ticks-demo, once per tick " \
           "of every 1 s since the epoch" in out  # fmt: skip
    assert "crontab '* * * * * *' in UTC" in out


async def test_ticks_after_the_start_fire_once_each_labelled_by_their_instant() -> None:
    clock = Clock(T0 + 0.4)
    run = await opened(ticks.make_app("t1"), clock)
    assert {(round(due - clock.now, 6), uid, key) for due, uid, key in run.wakes} == {
        (0.6, CRON, TIMER_WAKE_KEY), (0.6, TIMER, TIMER_WAKE_KEY),
    }  # fmt: skip
    advance(run, clock, T0 + 0.9)
    assert timer_ticks(run, "t1") == []  # T0 came before the job: it never fires
    advance(run, clock, T0 + 10.1)
    assert timer_ticks(run, "t1") == [T0 + k for k in range(1, 11)]
    assert counted(run, "t1") == [(T0 + k, k) for k in range(1, 11)]
    assert run.operators[TIMER].status_counts() == {
        "ticks": {"fired": 10, "failed": 0, "skipped": 0}
    }


async def test_a_tick_lost_in_a_crash_before_its_checkpoint_fires_once_after_the_restore(
) -> None:  # fmt: skip
    clock = Clock(T0 + 0.5)
    run = await opened(ticks.make_app("t2"), clock)
    advance(run, clock, T0 + 3.5)
    checkpoint = {uid: dict(state.rows) for uid, state in run.states.items()}
    advance(run, clock, T0 + 4.5)  # tick T0+4 fires, then the worker dies before a checkpoint
    assert timer_ticks(run, "t2")[-1] == T0 + 4
    crashed = MemoryRun(run.pipeline, clock)
    for uid, rows in checkpoint.items():
        crashed.states[uid].rows = dict(rows)
    clock.now = T0 + 4.7
    restored = await crashed.restored(run.pipeline)
    assert sorted(due for due, _, _ in restored.wakes) == [T0 + 4.7, T0 + 4.7]  # overdue
    advance(restored, clock, T0 + 6.2)
    # what the crashed attempt sent for T0+4 was never published; the restored one sends it
    assert timer_ticks(restored, "t2") == [T0 + 4, T0 + 5, T0 + 6]
    assert counted(restored, "t2") == [(T0 + 4, 4), (T0 + 5, 5), (T0 + 6, 6)]


async def test_ticks_due_while_the_job_was_down_fire_once_together(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(T0 + 0.5)
    run = await opened(ticks.make_app("t3"), clock)
    advance(run, clock, T0 + 2.5)
    clock.now = T0 + 30.5  # down for 28 s
    restored = await run.restored(run.pipeline)
    with caplog.at_level(logging.WARNING):
        advance(restored, clock, T0 + 31.5)
    assert timer_ticks(restored, "t3") == [T0 + 30, T0 + 31]
    counts = restored.operators[TIMER].status_counts()["ticks"]
    assert (counts["fired"], counts["skipped"]) == (2, 27)
    assert "27 earlier due ticks passed over, firing the latest" in caplog.text


def flaky_app(tag: str, calls: list[float]) -> Any:
    app = faust.App(f"faust-flaky-{tag}", broker="kafka://127.0.0.1:1", topic_partitions=1)
    out = app.topic(f"out-{tag}", value_type=str)

    @app.timer(interval=1.0)  # type: ignore[untyped-decorator]
    async def flaky() -> None:
        calls.append(1.0)
        await out.send(value="sent before it failed")
        if len(calls) % 2:
            raise RuntimeError("the report service said no")

    @app.timer(interval=1.0)  # type: ignore[untyped-decorator]
    async def sleepy() -> None:
        await asyncio.sleep(0.5)

    return app


async def test_a_failing_timer_consumes_its_tick_and_its_sends_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(T0 + 0.5)
    calls: list[float] = []
    run = await opened(flaky_app("f", calls), clock)
    with caplog.at_level(logging.ERROR):
        advance(run, clock, T0 + 4.5)
    assert len(calls) == 4
    assert run.sinks["out-f"] == [(None, b'"sent before it failed"')] * 2  # ticks 2 and 4
    (flaky, sleepy) = [run.operators[u] for u in run.pipeline.operators]
    assert flaky.status_counts()["ticks"] == {"fired": 2, "failed": 2, "skipped": 0}
    assert sleepy.status_counts()["ticks"] == {"fired": 0, "failed": 4, "skipped": 0}
    assert "the report service said no" in caplog.text
    assert "awaited real I/O where only sends may be awaited" in caplog.text


async def test_a_timers_state_that_does_not_parse_is_an_error_not_a_guess() -> None:
    clock = Clock(T0)
    run = await opened(ticks.make_app("t4"), clock)
    run.states[TIMER].rows[b"faust-timer/passed"] = b"\x00\x01"
    with pytest.raises(AgentStepError, match="a tick of 2 bytes, not 8"):
        await run.restored(run.pipeline)

"""``stream.take(max_, within=s)`` through the adapter, in memory with a clock set here
(`tests.faust_apps.batches`: sums of up to 10 numbers within 1 s): full batches at the record
that fills them, partial ones at their deadline, a buffer restored from state yielded once at
its re-armed deadline, failing batches consumed, and what is refused with its line."""

from __future__ import annotations

import json
import logging
from typing import Any

import faust
import pytest

from sluicegate.cli.main import main
from sluicegate.faust_adapter import AgentStepError, build_pipeline, read_app
from sluicegate.faust_adapter.operators import TAKE_WAKE_KEY, TakeOperator
from sluicegate.faust_adapter.plan import Take
from sluicegate.faust_adapter.takes import TAKE_PREFIX
from tests.faust_apps import batches
from tests.unit.faust_adapter.runner import MemoryRun

AGENT = "tests.faust_apps.batches.sum_batches"


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def batches_run(tag: str, clock: Clock) -> MemoryRun:
    plan = read_app(batches.make_app(tag), modules=[batches])
    assert plan.refusals == ()
    return MemoryRun(build_pipeline(plan, clock=clock), clock)


def sums(run: MemoryRun, tag: str) -> list[tuple[int, int, list[int]]]:
    found = [batches.BatchSum.loads(v) for _, v in run.sinks[f"batch-sums-{tag}"]]
    return [(s.count, s.total, s.numbers) for s in found]


def feed(run: MemoryRun, tag: str, numbers: range) -> None:
    for n in numbers:
        run.feed(f"numbers-{tag}", json.dumps(n).encode())


def line_of(path: str, text: str) -> int:
    with open(path, encoding="utf-8") as source:
        return next(i for i, line in enumerate(source, 1) if text in line)


def buffered(run: MemoryRun) -> int:
    rows = run.states[AGENT].rows
    return sum(1 for k in rows if k.startswith(TAKE_PREFIX + b"values/"))


async def test_the_plan_records_the_take_with_its_line_and_runs_it_as_a_take_operator() -> None:
    plan = read_app(batches.make_app("t0"), modules=[batches])
    (agent,) = plan.agents
    assert agent.take is not None
    assert (agent.take.kind, agent.take.max_, agent.take.within_s) == ("take", 10, 1.0)
    assert agent.take.where == f"{batches.__file__}:{line_of(batches.__file__, 'stream.take(')}"
    operator = build_pipeline(plan).operators[AGENT].factory()
    assert isinstance(operator, TakeOperator)


async def test_full_batches_at_the_tenth_value_and_the_rest_at_its_deadline() -> None:
    clock = Clock()
    run = batches_run("t1", clock)
    feed(run, "t1", range(1, 26))
    assert run.failures == []
    assert sums(run, "t1") == [(10, 55, list(range(1, 11))), (10, 155, list(range(11, 21)))]
    assert buffered(run) == 5
    # the deadline is 1 s after the oldest buffered value (21) arrived
    assert [(due - clock.now, key) for due, _, key in run.wakes] == [
        (1.0, TAKE_WAKE_KEY), (1.0, TAKE_WAKE_KEY), (1.0, TAKE_WAKE_KEY),
    ]  # fmt: skip
    clock.now += 0.75
    run.tick()
    assert len(sums(run, "t1")) == 2
    clock.now += 0.25
    run.tick()
    assert sums(run, "t1")[2:] == [(5, 115, list(range(21, 26)))]
    assert buffered(run) == 0
    assert run.states[AGENT].rows.get(TAKE_PREFIX + b"pending") is None
    assert run.wakes == []
    operator = run.operators[AGENT]
    assert operator.status_counts() == {"batches": {"yielded": 3, "failed": 0}}


async def test_a_value_after_the_deadline_yields_at_once_before_its_wake_up_runs() -> None:
    clock = Clock()
    run = batches_run("t2", clock)
    feed(run, "t2", range(1, 4))
    clock.now += 5.0  # the subtask was busy: the wake-up has not run
    feed(run, "t2", range(4, 5))
    assert sums(run, "t2") == [(4, 10, [1, 2, 3, 4])]
    run.tick()  # the stale wake-up finds the buffer empty
    assert sums(run, "t2") == [(4, 10, [1, 2, 3, 4])]


async def test_a_restored_buffer_is_yielded_once_at_its_rearmed_deadline() -> None:
    clock = Clock()
    run = batches_run("t3", clock)
    feed(run, "t3", range(1, 14))  # one full batch; 11, 12, 13 buffered
    clock.now += 0.25
    # a crash: the buffer is in the checkpointed state, the armed wake-up is lost
    restored = await run.restored(build_pipeline(read_app(batches.make_app("t3")), clock=clock))
    assert sums(restored, "t3") == []
    assert [(due - clock.now, key) for due, _, key in restored.wakes] == [(0.75, TAKE_WAKE_KEY)]
    clock.now += 0.5
    restored.tick()
    assert sums(restored, "t3") == []
    clock.now += 0.25
    restored.tick()
    assert sums(restored, "t3") == [(3, 36, [11, 12, 13])]
    # restored after the deadline passed (a long outage): yielded at once
    feed(restored, "t3", range(14, 16))
    clock.now += 30.0
    again = await restored.restored(build_pipeline(read_app(batches.make_app("t3")), clock=clock))
    assert [(due - clock.now, key) for due, _, key in again.wakes] == [(0.0, TAKE_WAKE_KEY)]
    again.tick()
    assert sums(again, "t3") == [(2, 29, [14, 15])]


def failing_app(tag: str) -> Any:
    app = faust.App(f"take-failing-{tag}", broker="kafka://127.0.0.1:1", topic_partitions=1)
    numbers = app.topic(f"n-{tag}")
    out = app.topic(f"o-{tag}")

    @app.agent(numbers)
    async def sum_unless_13(stream: Any) -> None:
        async for batch in stream.take(3, within=1.0):
            if 13 in batch:
                raise ValueError("thirteen")
            await out.send(value=sum(batch))

    return app


async def test_a_failing_batch_is_consumed_and_reported_where_it_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    run = MemoryRun(build_pipeline(read_app(failing_app("f1")), clock=clock), clock)
    uid = next(iter(run.operators))
    for n in (11, 12, 13, 14, 15, 16, 13):
        run.feed("n-f1", json.dumps(n).encode())
    # at the record that filled it: that record is dead-lettered, naming the batch
    ((_, error),) = run.failures
    assert isinstance(error, AgentStepError)
    assert "failed on a batch of 3 values (n-f1[0] offsets 1..3, consumed)" in str(error)
    assert isinstance(error.__cause__, ValueError)
    # at a deadline: no record to dead-letter; logged and counted, the job goes on
    clock.now += 1.0
    with caplog.at_level(logging.ERROR, logger="sluicegate.faust_adapter.operators"):
        run.tick()
    assert "failed on a batch of 1 values (n-f1[0] offsets 7..7, consumed)" in caplog.text
    assert json.loads(run.sinks["o-f1"][0][1]) == 45
    assert len(run.sinks["o-f1"]) == 1
    assert run.operators[uid].status_counts() == {"batches": {"yielded": 1, "failed": 2}}
    assert not any(k.startswith(TAKE_PREFIX) for k in run.states[uid].rows)
    run.feed("n-f1", json.dumps(1).encode())
    clock.now += 1.0
    run.tick()
    assert [json.loads(v) for _, v in run.sinks["o-f1"]] == [45, 1]  # the agent started again


async def test_take_after_group_by_and_take_with_timestamp() -> None:
    app = faust.App("take-grouped", broker="kafka://127.0.0.1:1", topic_partitions=1)
    readings = app.topic("readings-g")
    out = app.topic("stamped-g")

    stamp_line = line_of(__file__, "take_with" + "_timestamp(2, 1")  # not this line

    @app.agent(readings)
    async def stamp(stream: Any) -> None:
        async for batch in stream.group_by(room_of, name="room").take_with_timestamp(2, 1, "at"):
            await out.send(value={"batch": batch})

    clock = Clock()
    plan = read_app(app)
    (agent,) = plan.agents
    assert agent.repartition is not None
    assert agent.take == Take("take_with_timestamp", 2, 1.0, f"{__file__}:{stamp_line}")
    run = MemoryRun(build_pipeline(plan, clock=clock), clock)
    for i, room in enumerate(["a", "b", "a"]):
        run.feed("readings-g", json.dumps({"room": room, "i": i}).encode(),
                 timestamp_ms=1_700_000_000_000 + i * 250)  # fmt: skip
    assert run.failures == []
    (sent,) = [json.loads(v)["batch"] for _, v in run.sinks["stamped-g"]]
    # the Kafka timestamp of each value, in seconds (MemoryRun keeps a source record's
    # timestamp through the repartition; on the engine it is the repartition's, as in faust)
    assert sent == [{"room": "a", "i": 0, "at": 1_700_000_000.0},
                    {"room": "b", "i": 1, "at": 1_700_000_000.25}]  # fmt: skip


def room_of(reading: dict[str, Any]) -> Any:
    return reading["room"]


def refused_app(body: str) -> Any:
    app = faust.App(f"take-refused-{abs(hash(body))}", broker="kafka://127.0.0.1:1")
    numbers = app.topic("n-refused")
    scope: dict[str, Any] = {}
    exec(f"async def agent(stream):\n    {body}\n        pass\n", scope)
    app.agent(numbers, name="refused")(scope["agent"])
    return app


@pytest.mark.parametrize(
    ("body", "feature"),
    [
        ("async for b in stream.take(0, within=1):", "stream.take(0, ...)"),
        ("async for b in stream.take(2.5, within=1):", "stream.take(2.5, ...)"),
        ("async for b in stream.take(2, within=-1):", "stream.take(within=-1.0)"),
        ("async for b in stream.noack_take(2, within=1):", "stream.noack_take"),
        ("async for b in stream.filter(bool):", "stream.filter"),
    ],
)
def test_what_take_cannot_run_is_refused_with_its_line(body: str, feature: str) -> None:
    plan = read_app(refused_app(body))
    assert [(r.feature, r.where.rsplit(":", 1)[1]) for r in plan.refusals] == [(feature, "2")]
    assert plan.agents == ()


def test_two_takes_in_one_agent_are_refused_at_the_second() -> None:
    app = faust.App("take-twice", broker="kafka://127.0.0.1:1")
    numbers = app.topic("n-twice")

    @app.agent(numbers)
    async def twice(stream: Any) -> None:
        first = stream.take(2, within=1)
        second = stream.take(3, within=1)
        async for b in first:
            async for c in second:
                print(b, c)

    plan = read_app(app)
    line = line_of(__file__, "second = stream.take(")
    assert [(r.feature, r.where) for r in plan.refusals] == [
        ("stream.take twice in one agent", f"{__file__}:{line}")
    ]


def test_faust_check_shows_the_take(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["faust", "check", "tests.faust_apps.batches:app"]) == 0
    out = capsys.readouterr().out
    line = line_of(batches.__file__, "stream.take(")
    assert (
        "    stream.take: up to 10 values per batch, within 1 s, per input partition, buffered "
        f"in keyed state rows faust-take/ ({batches.__file__}:{line})"
    ) in out

"""One wake-up: a model call and the read-only tool calls it asks for share their journal writes.

Neither call waits for the acknowledgement of the writes before it; the safe points are saved
only once every write is durable, and an unacknowledged write saves nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sluicegate.agents.journal import InMemoryJournal, JournalEntry, JournalUnavailableError
from sluicegate.agents.runs.encoding import encode_run
from sluicegate.agents.runs.state import run_key
from tests.unit.agents.test_agent_operator import TOPICS, Desk, opened


class GatedJournal(InMemoryJournal):
    """Writes wait for ``gate``; ``waiting`` counts the writes begun and not yet stored."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.waiting = 0

    async def write(self, entry: JournalEntry, *, partition: int) -> None:
        self.waiting += 1
        await self.gate.wait()
        self.waiting -= 1
        await super().write(entry, partition=partition)


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never: {what}")


async def test_the_tool_is_called_before_the_reply_is_durable_and_nothing_is_saved_before() -> None:
    desk = Desk([[("look", {"x": 1})], "done"])
    journal = desk.journal = GatedJournal()
    desk.op = desk._operator()
    await desk.open()
    await desk.task()
    before = dict(desk.world.state(TOPICS.tasks).rows)
    (wake,) = desk.world.wakes
    waking = asyncio.ensure_future(desk.fire(wake))
    # The model answered and the tool ran; four writes (issued, done of each) are in flight.
    await until(lambda: desk.calls["look"] == 1 and journal.waiting == 4, "look called")
    assert dict(desk.world.state(TOPICS.tasks).rows) == before
    assert [e["type"] for e in desk.world.events()] == ["started"]
    journal.gate.set()
    await waking
    assert [e["type"] for e in desk.world.events()] == ["started", "model", "tool"]
    run = desk.world.run()
    assert (run.step, run.messages[-1].role) == (1, "tool")
    statuses = [(e.key.rsplit("/", 1)[-1], e.status) for _, e in journal.writes if e]
    assert sorted(statuses) == sorted(
        [("model", "issued"), ("model", "done"), ("0", "issued"), ("0", "done")]
    )


async def test_an_unacknowledged_done_saves_nothing_and_the_next_wake_replays_the_calls() -> None:
    failed: list[str] = []

    def lose_the_first_model_done(entry: JournalEntry | None) -> None:
        if entry is not None and entry.status == "done" and entry.kind == "model" and not failed:
            failed.append(entry.key)
            raise JournalUnavailableError("write of done", 0, "timed out")

    desk = Desk([[("look", {"x": 1})], "done"])
    desk.journal = InMemoryJournal(before_write=lose_the_first_model_done)
    desk.op = desk._operator()
    await desk.open()
    await desk.task()
    before = dict(desk.world.state(TOPICS.tasks).rows)
    emitted = len(desk.world.emitted)
    await desk.step()
    assert len(failed) == 1
    assert (desk.model.calls, desk.calls["look"]) == (1, 1)
    assert dict(desk.world.state(TOPICS.tasks).rows) == before
    assert len(desk.world.emitted) == emitted
    (later,) = desk.world.wakes
    assert later.after_s > 0
    await desk.fire(later)
    await desk.drain()
    # The held done is written again (not called again), the tool's done replayed.
    assert (desk.model.calls, desk.calls["look"]) == (2, 1)  # 2: the final answer
    (result,) = desk.world.results()
    assert (result.status, result.steps) == ("done", 2)
    model_events = [e for e in desk.world.events() if e["type"] == "model"]
    assert [e["replayed"] for e in model_events] == [True, False]


async def test_an_effect_is_not_called_in_the_same_wake_up_as_the_reply_that_asked_for_it() -> None:
    desk = await opened([[("look", {"x": 1}), ("refund", {"amount": 5.0})], "done"])
    await desk.task()
    await desk.step()
    # The read-only look ran with the model call; the refund waits for its own safe point.
    assert (desk.model.calls, desk.calls["look"], desk.calls["refund"]) == (1, 1, 0)
    run = desk.world.run()
    assert encode_run(run).document == run.encode()
    assert [c.name for c in run.pending_calls] == ["refund"]


async def test_a_wake_up_writes_the_run_once_with_every_safe_point_in_history() -> None:
    desk = await opened([[("look", {"x": 1}), ("look", {"x": 2})], "done"])
    await desk.task()
    tasks = desk.world.state(TOPICS.tasks)
    writes: list[bytes] = []
    put = tasks.put

    def counting_put(key: bytes, value: bytes) -> None:
        writes.append(key)
        put(key, value)

    tasks.put = counting_put  # type: ignore[method-assign]
    await desk.step()
    # One wake-up: the model call and both read-only calls, three safe points.
    assert [e["type"] for e in desk.world.events()] == ["started", "model", "tool", "tool"]
    run = desk.world.run()
    assert writes.count(run_key(run.run_id)) == 1
    history = [k for k in writes if k.startswith(b"history/")]
    assert len(history) == 3
    # What was written is the last safe point's run, as its own encoding gives it.
    assert tasks.rows[run_key(run.run_id)] == run.encode()
    assert (run.step, [m.role for m in run.messages[-3:]]) == (1, ["assistant", "tool", "tool"])

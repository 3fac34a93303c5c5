"""`agents.history.replay`: a run's events rebuild the state the operator stored, calling
nothing."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sluicegate.agents.exceptions import HistoryError
from sluicegate.agents.history.replay import replay, settled_at
from sluicegate.agents.runs import machine
from sluicegate.agents.runs.state import Budget, RunState, RunStatus
from tests.unit.agents.test_agent_operator import Desk, Turn

CALLS = {
    "look": {"x": 1},
    "reserve": {"x": 2},
    "tag": {"label": "vip"},
    "refund": {"amount": 5.0},
    "nope": {},  # an unknown tool: rejected
    "look ": {"x": "not a number"},  # bad arguments: rejected
}


async def drive(desk: Desk, decisions: list[bool], limit: int = 60) -> RunState:
    """Run r1 to its end, deciding each approval request with the next of ``decisions``."""
    for _ in range(limit):
        await desk.drain()
        state = desk.world.run()
        if state.status is RunStatus.WAITING_APPROVAL:
            await desk.decide(decisions.pop(0) if decisions else True)
            continue
        return state
    raise AssertionError("the run did not end")


async def finished_run(
    turns: list[Turn], decisions: list[bool] | None = None, **agent: Any
) -> tuple[Desk, RunState]:
    desk = Desk(turns, **agent)
    await desk.open()
    await desk.task(metadata={"tenant": "eu"})
    return desk, await drive(desk, list(decisions or []))


def events_of(desk: Desk, run_id: str = "r1") -> list[dict[str, Any]]:
    return [e for e in desk.world.events() if e["run_id"] == run_id]


turn = st.one_of(
    st.text(min_size=1, max_size=10),
    st.lists(
        st.sampled_from(sorted(CALLS)).map(lambda name: (name.strip(), CALLS[name])),
        min_size=1,
        max_size=3,
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(turn, min_size=1, max_size=5),
    decisions=st.lists(st.booleans(), max_size=6),
    max_steps=st.integers(min_value=1, max_value=6),
)
def test_the_replayed_state_is_the_stored_state(
    turns: list[Turn], decisions: list[bool], max_steps: int
) -> None:
    desk, stored = asyncio.run(finished_run(turns, decisions, budget=Budget(max_steps=max_steps)))
    history = replay(events_of(desk))
    assert history[-1].state == stored
    assert [r.state.events for r in history] == list(range(1, len(history) + 1))


async def test_each_event_carries_what_the_run_did() -> None:
    desk, stored = await finished_run([[("look", {"x": 1}), ("reserve", {"x": 2})], "done"])
    started, model, look, intent, reserve, answer = events_of(desk)
    assert started["instructions"] == "Settle."
    assert started["metadata"] == {"tenant": "eu"}
    assert model["message"]["tool_calls"][0]["name"] == "look"
    assert model["usage"]["prompt_tokens"] == model["prompt_tokens"] > 0
    assert model["usage"]["cost_usd"] == model["cost_usd"] > 0
    assert model["duration_ms"] >= 0
    assert model["replayed"] is False
    assert (look["call_id"], look["arguments"], look["result"]) == ("c0-0", {"x": 1}, {"x": 1})
    assert look["error"] is None
    assert "duration_ms" in look
    assert (intent["kind"], intent["compensate"]) == ("reversible", "release")
    assert reserve["result"] == "held 2"
    assert answer["status"] == "done"
    assert answer["at"] == stored.updated_at


async def test_replay_calls_no_tool_and_no_model() -> None:
    desk, _ = await finished_run([[("look", {"x": 1}), ("reserve", {"x": 2})], "done"])
    calls, model_calls = dict(desk.calls), desk.model.calls
    assert calls == {"look": 1, "reserve": 1}
    assert model_calls == 2
    replay(events_of(desk))
    assert (dict(desk.calls), desk.model.calls) == (calls, model_calls)


async def test_settled_at_is_the_state_before_the_next_model_call() -> None:
    desk, _ = await finished_run([[("look", {"x": 1})], [("look", {"x": 2})], "done"])
    history = replay(events_of(desk))
    first = settled_at(history, 1)
    assert first is not None
    assert first.step == 1
    assert not first.pending_calls
    assert [m.role for m in first.messages] == ["system", "user", "assistant", "tool"]
    zero = settled_at(history, 0)
    assert zero is not None
    assert len(zero.messages) == 2
    assert settled_at(history, 3) is None  # the run answered at step 3: it ended there
    assert settled_at(history, 9) is None


@pytest.mark.parametrize(
    ("tamper", "seq", "reason"),
    [
        (lambda es: es.pop(2), 2, "a gap"),
        (lambda es: es[1].update(type="teleport"), 1, "unknown event type"),
        (lambda es: es[3].update(run_id="other"), 3, "event of run 'other'"),
        (lambda es: es[2].update(call_id="c9"), 2, "the pending call is 'c0-0'"),
        (lambda es: es[1].pop("message"), 1, "lacks 'message'"),
        (lambda es: es.pop(0), 0, "a model event at seq 0|expected seq 0"),
        (lambda es: es[4].update(status="cancelled"), 4, "status"),
    ],
)
async def test_a_history_that_does_not_hold_together_is_refused(
    tamper: Any, seq: int, reason: str
) -> None:
    desk, _ = await finished_run([[("look", {"x": 1})], [("look", {"x": 2})], "done"])
    events = copy.deepcopy(events_of(desk))
    tamper(events)
    with pytest.raises(HistoryError, match=reason) as caught:
        replay(events)
    assert (caught.value.run_id, caught.value.seq) == ("r1", seq)


async def test_an_effect_whose_outcome_is_unknown_replays_as_unknown() -> None:
    desk, _ = await finished_run([[("reserve", {"x": 2})], "done"])
    events = events_of(desk)
    assert [e["type"] for e in events[:3]] == ["started", "model", "effect_issued"]
    parked = replay(events[:3])[-1].state
    failed = machine.fail(parked, "outcome_unknown", 2000.0, unknown_key=events[2]["key"])
    history = replay([*events[:3], json.loads(json.dumps(failed.event))])
    assert history[-1].state == failed.state
    assert history[-1].state.effects[0].status == "unknown"

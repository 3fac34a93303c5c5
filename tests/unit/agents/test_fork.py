"""Forks: the command built from a parent's history, the agent starting it, hostile seeds."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from sluicegate.agents.exceptions import ForkRefusedError
from sluicegate.agents.fork.patch import (
    ForkSeedError,
    GoalChange,
    apply_patch,
    check_seed,
    parse_patch,
)
from sluicegate.agents.fork.request import fork_request, new_fork_id
from sluicegate.agents.history.replay import replay
from sluicegate.agents.messages import MAX_COMMAND_BYTES, ApprovalDecision, ForkRun, parse_command
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.runs.state import Budget, RunState, RunStatus, run_key
from tests.unit.agents.test_agent_operator import TOPICS, Desk, Turn
from tests.unit.agents.test_replay import drive, events_of

# Step 1 looks, step 2 reserves (an effect), step 3 answers.
TURNS: list[Turn] = [[("look", {"x": 1})], [("reserve", {"x": 2})], "done"]


def state_of(desk: Desk, run_id: str) -> RunState:
    raw = desk.world.state(TOPICS.tasks).get(run_key(run_id))
    assert raw is not None, f"no run {run_id}"
    return RunState.decode(raw)


async def parent(turns: list[Turn] = TURNS, **agent: Any) -> Desk:
    desk = Desk(turns, **agent)
    await desk.open()
    await desk.task(budget=Budget(max_steps=8), metadata={"tenant": "eu"})
    await drive(desk, [])
    return desk


async def forked(desk: Desk, command: ForkRun) -> RunState:
    await desk.send(TOPICS.approvals, command)
    await desk.drain()
    return state_of(desk, command.run_id)


async def test_a_fork_goes_on_from_the_step_with_the_parent_s_usage_and_new_keys() -> None:
    desk = await parent()
    history = events_of(desk)
    patch = parse_patch('{"tool_result": {"call_id": "c0-0", "result": {"x": 7}}}')
    command = fork_request(history, 1, run_id="r1.fork", patch=patch, by="ann")
    assert command.usage == replay(history)[1].state.usage  # after model call 1
    fork = await forked(desk, command)
    parent_state = state_of(desk, "r1")
    assert fork.status is RunStatus.DONE
    assert fork.answer == "done"
    assert fork.step == parent_state.step == 3
    assert fork.messages[3].content == '{"x": 7}'  # the patched result
    assert fork.usage.model_calls == parent_state.usage.model_calls == 3
    assert fork.forked_from is not None
    assert (fork.forked_from.run_id, fork.forked_from.step) == ("r1", 1)
    assert fork.metadata == {"tenant": "eu"}
    assert fork.budget == Budget(max_steps=8)
    (effect,) = fork.effects
    assert effect.key.startswith("r1.fork/")
    assert effect.key != parent_state.effects[0].key
    assert desk.calls["reserve"] == 2  # the fork's own effect, under its own key
    assert desk.calls["look"] == 1  # step 1 was not run again
    fork_events = events_of(desk, "r1.fork")
    assert fork_events[0]["type"] == "forked"
    assert fork_events[0]["by"] == "ann"
    assert replay(fork_events)[-1].state == fork


async def test_a_recorded_only_fork_executes_no_effect() -> None:
    desk = await parent()
    command = fork_request(events_of(desk), 1, run_id="r1.dry", recorded_only=True)
    assert [(c.step, c.tool) for c in command.recorded] == [(2, "reserve")]
    fork = await forked(desk, command)
    assert fork.status is RunStatus.DONE
    assert desk.calls["reserve"] == 1  # the parent's only
    assert fork.effects == ()
    assert fork.messages[5].content == json.dumps("held 2")  # the parent's recorded result
    tool_events = [e for e in events_of(desk, "r1.dry") if e["type"] == "tool"]
    assert tool_events[0]["recorded"] is True
    assert replay(events_of(desk, "r1.dry"))[-1].state == fork


async def test_a_recorded_only_fork_answers_an_unrecorded_call_with_an_error() -> None:
    desk = await parent()
    patch = GoalChange(goal="reserve something else")
    command = fork_request(events_of(desk), 0, run_id="r1.dry", recorded_only=True, patch=patch)
    command = command.model_copy(update={"recorded": ()})
    fork = await forked(desk, command)
    assert desk.calls["reserve"] == 1
    assert "error: not executed: recorded-only fork" in [m.content for m in fork.messages]


async def test_a_fork_of_an_existing_run_id_is_ignored() -> None:
    desk = await parent()
    command = fork_request(events_of(desk), 1, run_id="r1")
    before = state_of(desk, "r1")
    await desk.send(TOPICS.approvals, command)
    assert state_of(desk, "r1") == before


async def test_a_fork_s_budget_is_capped_by_the_agent_s_ceiling() -> None:
    desk = await parent(budget=Budget(max_steps=4), budget_ceiling=Budget(max_steps=8))
    command = fork_request(events_of(desk), 1, run_id="r1.fork")
    command = command.model_copy(update={"budget": Budget(max_steps=50)})
    fork = await forked(desk, command)
    assert fork.budget.max_steps == 8


async def test_a_fork_from_a_step_the_run_never_settled_at_is_refused() -> None:
    desk = await parent()
    with pytest.raises(ForkRefusedError, match=r"never settled.*") as caught:
        fork_request(events_of(desk), 3, run_id="r1.fork")  # the answer: the run ended
    assert "[0, 1, 2]" in caught.value.what_to_do
    patch = parse_patch('{"message": {"index": 9, "content": "x"}}')
    with pytest.raises(ForkRefusedError, match="no message 9"):
        fork_request(events_of(desk), 1, run_id="r1.fork", patch=patch)


@pytest.mark.parametrize(
    "text",
    [
        '{"goal": "a", "instructions": "b"}',
        "{}",
        '{"goal": "a", "rm -rf": true}',
        '{"goal": ""}',
        '{"message": {"index": -1, "content": "x"}}',
        '{"tool_result": {"result": 1}}',
        "[]",
        "not json",
    ],
)
def test_a_patch_makes_exactly_one_well_formed_change(text: str) -> None:
    with pytest.raises(ValidationError):
        parse_patch(text)


def test_a_patch_of_each_kind_applies() -> None:
    messages = conversation("system", "user", "call", "result")
    for text, index, content in [
        ('{"instructions": "be brief"}', 0, "be brief"),
        ('{"goal": "refund 9"}', 1, "refund 9"),
        ('{"message": {"index": 1, "content": "refund 8"}}', 1, "refund 8"),
        ('{"tool_result": {"call_id": "c2", "error": "timeout"}}', 3, "error: timeout"),
        ('{"tool_result": {"call_id": "c2", "result": [1]}}', 3, "[1]"),
    ]:
        goal, patched = apply_patch("refund 7", messages, parse_patch(text))
        assert patched[index].content == content
        assert goal == (content if index == 1 else "refund 7")
        assert [m for i, m in enumerate(patched) if i != index] == [
            m for i, m in enumerate(messages) if i != index
        ]


def conversation(*roles: str) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i, role in enumerate(roles):
        if role == "call":
            call = ToolCall(id=f"c{i}", name="look", arguments="{}")
            out.append(ChatMessage(role="assistant", tool_calls=(call,)))
        elif role == "result":
            out.append(ChatMessage(role="tool", content="1", tool_call_id=f"c{i - 1}"))
        else:
            out.append(ChatMessage(role=role, content="x"))  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize(
    ("roles", "step", "reason"),
    [
        (("user", "system"), 0, "start with a system and a user"),
        (("system",), 0, "start with a system and a user"),
        (("system", "user", "call"), 1, "has no result: not settled"),
        (("system", "user", "assistant"), 1, "final answer"),
        (("system", "user", "call", "result", "user"), 1, "message 4 is a user message"),
        (("system", "user", "call", "result"), 2, "holds 1 replies, not 2"),
        (("system", "user", "result"), 0, "message 2 is a tool message"),
    ],
)
def test_a_seed_that_is_not_a_settled_conversation_is_refused(
    roles: tuple[str, ...], step: int, reason: str
) -> None:
    with pytest.raises(ForkSeedError, match=reason):
        check_seed("f", conversation(*roles), step)


def test_a_seed_answering_another_call_is_refused() -> None:
    messages = conversation("system", "user", "call", "result")
    messages[3] = messages[3].model_copy(update={"tool_call_id": "c9"})
    with pytest.raises(ForkSeedError, match="not the result of call 'c2'"):
        check_seed("f", messages, 1)


async def test_the_agent_dead_letters_a_fork_whose_seed_does_not_check_out() -> None:
    desk = await parent()
    command = fork_request(events_of(desk), 1, run_id="r1.fork")
    bad = command.model_copy(update={"messages": command.messages[:3]})  # a call, no result
    with pytest.raises(ForkSeedError, match="not settled"):
        await desk.send(TOPICS.approvals, bad)
    assert desk.world.state(TOPICS.tasks).get(run_key("r1.fork")) is None


def test_parse_command_reads_decisions_old_and_new_and_forks() -> None:
    old = b'{"schema_version": 1, "run_id": "r", "approved": true, "by": "ann"}'
    assert parse_command(old) == ApprovalDecision(run_id="r", approved=True, by="ann")
    new = ApprovalDecision(run_id="r", approved=False).model_dump_json().encode()
    assert "command" not in json.loads(new)  # readers that predate commands still read it
    assert parse_command(new) == ApprovalDecision(run_id="r", approved=False)
    decision = b'{"command": "decision", "run_id": "r", "approved": true}'
    assert isinstance(parse_command(decision), ApprovalDecision)
    fork = ForkRun(
        run_id="f", parent_run_id="r", from_step=0, goal="g",
        messages=tuple(conversation("system", "user")),
    )  # fmt: skip
    assert parse_command(fork.model_dump_json().encode()) == fork


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "no value"),
        (b"x" * (MAX_COMMAND_BYTES + 1), "bytes; expected JSON of at most"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "a JSON list, not an object"),
        (b'{"command": "rollback!", "run_id": "r"}', "unknown command 'rollback!'"),
        (b'{"command": ["fork"], "run_id": "r"}', "unknown command"),
        (b'{"run_id": "r", "approved": "perhaps"}', "approved"),
        (b'{"command": "fork", "run_id": "../../etc", "parent_run_id": "r"}', "run_id"),
        (b'{"command": "fork", "run_id": "f", "parent_run_id": "r", "from_step": -1}', "from_step"),
    ],
)
def test_parse_command_refuses_hostile_records(value: bytes | None, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_command(value)


def test_a_fork_carries_at_most_so_many_messages() -> None:
    doc = {
        "command": "fork", "run_id": "f", "parent_run_id": "r", "from_step": 0, "goal": "g",
        "messages": [{"role": "user", "content": "x"}] * 2001,
    }  # fmt: skip
    with pytest.raises(ValidationError, match="at most 2000"):
        parse_command(json.dumps(doc).encode())


def test_new_fork_ids_are_valid_run_ids_and_fresh() -> None:
    first, second = new_fork_id("r" * 300), new_fork_id("r" * 300)
    assert first != second
    assert ForkRun(
        run_id=first, parent_run_id="r", from_step=0, goal="g",
        messages=tuple(conversation("system", "user")),
    ).run_id == first  # fmt: skip

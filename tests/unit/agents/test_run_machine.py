"""The sans-IO run state machine: its decision table, and runs driven to the end at random."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from sluicegate.agents.models.contract import ChatMessage, ModelResponse, ToolCall, Usage
from sluicegate.agents.runs.machine import (
    ALLOWED,
    AskApproval,
    CallModel,
    CallTool,
    Event,
    Fail,
    Idle,
    RecordIntent,
    RejectCall,
    Transition,
    after_model,
    after_tool,
    ask_approval,
    budget_exceeded,
    decide_approval,
    fail,
    next_action,
    record_intent,
    reject_call,
    start_run,
)
from sluicegate.agents.runs.state import Budget, RunState, RunStatus
from sluicegate.agents.tools import ToolContext, ToolKind, tool


@tool()
async def lookup(ctx: ToolContext, x: int) -> int:
    """Read something."""
    return x


@tool(kind=ToolKind.REVERSIBLE, compensate="release")
async def reserve(ctx: ToolContext, x: int) -> int:
    """Reserve something."""
    return x


@tool(kind=ToolKind.IRREVERSIBLE)
async def pay(ctx: ToolContext, x: int) -> int:
    """Pay something."""
    return x


@tool(kind=ToolKind.IDEMPOTENT_WRITE)
async def upsert(ctx: ToolContext, x: int) -> int:
    """Write something under the call's idempotency key."""
    return x


TOOLS = {t.name: t for t in (lookup, reserve, pay, upsert)}


def call(name: str, arguments: str = '{"x": 1}', call_id: str = "c0") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def started(budget: Budget | None = None) -> RunState:
    return start_run("r1", "do it", "be brief", budget or Budget(), 0.0).state


def reply(state: RunState, *calls: ToolCall, usage: Usage | None = None) -> RunState:
    message = ChatMessage(
        role="assistant", content=None if calls else "the answer", tool_calls=calls
    )
    return after_model(state, ModelResponse(message=message, usage=usage or Usage()), 1.0).state


# -- decision table --------------------------------------------------------------------------


def test_no_pending_calls_calls_the_model_for_the_next_step() -> None:
    state = started()
    assert next_action(state, TOOLS) == CallModel("r1/1/model")
    state = reply(state, call("lookup"))
    action = next_action(state, TOOLS)
    assert isinstance(action, CallTool)
    state = after_tool(state, action, 1, None, 2.0).state
    assert next_action(state, TOOLS) == CallModel("r1/2/model")


@pytest.mark.parametrize(
    ("budget", "usage", "what"),
    [
        (Budget(max_steps=1), Usage(), "max_steps 1"),
        (Budget(max_cost_usd=0.01), Usage(cost_usd=0.02), "cost"),
        (Budget(max_tokens=10), Usage(prompt_tokens=6, completion_tokens=5), "tokens"),
    ],
)
def test_an_exceeded_budget_fails_instead_of_calling_the_model(
    budget: Budget, usage: Usage, what: str
) -> None:
    state = reply(started(budget), call("lookup"), usage=usage)
    # The calls of the last reply are settled first, whatever the budget.
    action = next_action(state, TOOLS)
    assert isinstance(action, CallTool)
    state = after_tool(state, action, 1, None, 2.0).state
    failed = next_action(state, TOOLS)
    assert isinstance(failed, Fail)
    assert failed.reason.startswith("budget_exceeded")
    assert what in failed.reason
    assert failed.reason == budget_exceeded(state)
    ended = fail(state, failed.reason, 3.0)
    assert (ended.state.status, ended.state.reason) == (RunStatus.FAILED, failed.reason)


def test_an_unknown_tool_is_rejected_and_the_model_told() -> None:
    state = reply(started(), call("ghost"))
    action = next_action(state, TOOLS)
    assert isinstance(action, RejectCall)
    assert "unknown tool 'ghost'" in action.error
    after = reject_call(state, action, 2.0)
    assert after.state.messages[-1] == ChatMessage(
        role="tool", content=f"error: {action.error}", tool_call_id="c0"
    )
    assert after.event["type"] == "tool_rejected"
    assert next_action(after.state, TOOLS) == CallModel("r1/2/model")


@pytest.mark.parametrize("arguments", ['{"x": "no"}', '{"x": 1, "y": 2}', "{}", "not json"])
@pytest.mark.parametrize("name", ["lookup", "reserve", "pay", "upsert"])
def test_bad_arguments_are_rejected_before_anything_else(name: str, arguments: str) -> None:
    action = next_action(reply(started(), call(name, arguments)), TOOLS)
    assert isinstance(action, RejectCall)
    assert f"invalid arguments for {name}" in action.error


def test_an_irreversible_call_asks_for_approval_then_records_intent_then_calls() -> None:
    state = reply(started(), call("pay", '{"x": 7}'))
    ask = next_action(state, TOOLS)
    assert ask == AskApproval(call("pay", '{"x": 7}'), pay, {"x": 7}, "r1/1/0")
    assert isinstance(ask, AskApproval)
    waiting = ask_approval(state, ask, 2.0).state
    assert waiting.status is RunStatus.WAITING_APPROVAL
    assert next_action(waiting, TOOLS) == Idle()
    assert decide_approval(waiting, "another-call", True, "ann", None, 3.0) is None
    decided = decide_approval(waiting, "c0", True, "ann", None, 3.0)
    assert decided is not None
    intent = next_action(decided.state, TOOLS)
    assert isinstance(intent, RecordIntent)
    assert intent.key == "r1/1/0"
    recorded = record_intent(decided.state, intent, 4.0).state
    assert [(e.key, e.kind, e.status) for e in recorded.effects] == [
        ("r1/1/0", "irreversible", "issued")
    ]
    assert next_action(recorded, TOOLS) == CallTool(intent.call, pay, {"x": 7}, "r1/1/0")


def test_a_rejected_approval_tells_the_model_and_moves_to_the_next_call() -> None:
    state = reply(started(), call("pay"), call("lookup", call_id="c1"))
    ask = next_action(state, TOOLS)
    assert isinstance(ask, AskApproval)
    waiting = ask_approval(state, ask, 2.0).state
    decided = decide_approval(waiting, "", False, "ann", "too much", 3.0)
    assert decided is not None
    assert decided.state.status is RunStatus.RUNNING
    assert decided.state.messages[-1].content == "rejected by ann: too much"
    assert decided.state.effects == ()
    # The second call of the reply keeps its own index: keys never depend on what was skipped.
    assert next_action(decided.state, TOOLS) == CallTool(
        call("lookup", call_id="c1"), lookup, {"x": 1}, "r1/1/1"
    )


def test_a_reversible_call_records_intent_then_calls_with_the_same_key() -> None:
    state = reply(started(), call("reserve", '{"x": 3}'))
    intent = next_action(state, TOOLS)
    assert isinstance(intent, RecordIntent)
    recorded = record_intent(state, intent, 2.0)
    assert recorded.event["type"] == "effect_issued"
    (effect,) = recorded.state.effects
    assert (effect.kind, effect.compensate, effect.arguments) == ("reversible", "release", {"x": 3})
    action = next_action(recorded.state, TOOLS)
    assert action == CallTool(intent.call, reserve, {"x": 3}, intent.key)
    assert isinstance(action, CallTool)
    done = after_tool(recorded.state, action, {"held": 3}, None, 3.0).state
    assert [(e.status, e.result) for e in done.effects] == [("done", {"held": 3})]


def test_an_idempotent_write_records_intent_then_calls_without_approval() -> None:
    state = reply(started(), call("upsert", '{"x": 4}'))
    intent = next_action(state, TOOLS)
    # An effect: the safe point before it, but no person asked first.
    assert intent == RecordIntent(call("upsert", '{"x": 4}'), upsert, {"x": 4}, "r1/1/0")
    assert isinstance(intent, RecordIntent)
    recorded = record_intent(state, intent, 2.0).state
    (effect,) = recorded.effects
    assert (effect.kind, effect.compensate, effect.status) == ("idempotent_write", None, "issued")
    assert RunState.decode(recorded.encode()) == recorded
    action = next_action(recorded, TOOLS)
    assert action == CallTool(intent.call, upsert, {"x": 4}, intent.key)
    assert isinstance(action, CallTool)
    done = after_tool(recorded, action, {"rows": 1}, None, 3.0).state
    assert [(e.status, e.result) for e in done.effects] == [("done", {"rows": 1})]
    assert done.approved_calls == ()


def test_a_read_only_call_runs_at_once_without_an_effect_record() -> None:
    state = reply(started(), call("lookup", '{"x": 2}'))
    action = next_action(state, TOOLS)
    assert action == CallTool(call("lookup", '{"x": 2}'), lookup, {"x": 2}, "r1/1/0")
    assert isinstance(action, CallTool)
    after = after_tool(state, action, None, "boom", 2.0)
    assert after.state.effects == ()
    assert after.state.messages[-1].content == "error: boom"
    assert after.event["error"] == "boom"


def test_finished_and_waiting_runs_are_idle_and_finished_runs_change_only_by_a_rollback() -> None:
    done = reply(started())
    assert (done.status, done.answer) == (RunStatus.DONE, "the answer")
    failed = fail(started(), "stop", 1.0).state
    state = reply(started(), call("pay"))
    ask = next_action(state, TOOLS)
    assert isinstance(ask, AskApproval)
    waiting = ask_approval(state, ask, 1.0).state
    for state in (done, failed, waiting):
        assert next_action(state, TOOLS) == Idle()
    assert ALLOWED[RunStatus.DONE] == frozenset({RunStatus.ROLLING_BACK})
    with pytest.raises(ValueError, match="done -> failed not allowed"):
        fail(done, "late", 2.0)


def test_an_approval_does_not_carry_over_to_a_later_call_with_the_same_id() -> None:
    state = reply(started(), call("pay", '{"x": 1}', call_id="call_0"))
    ask = next_action(state, TOOLS)
    assert isinstance(ask, AskApproval)
    decided = decide_approval(ask_approval(state, ask, 1.0).state, "", True, "ann", None, 2.0)
    assert decided is not None
    intent = next_action(decided.state, TOOLS)
    assert isinstance(intent, RecordIntent)
    recorded = record_intent(decided.state, intent, 3.0).state
    tool_call = next_action(recorded, TOOLS)
    assert isinstance(tool_call, CallTool)
    state = after_tool(recorded, tool_call, 1, None, 4.0).state
    # Step 2: the model asks to pay 1000 under the id it used before.
    state = reply(state, call("pay", '{"x": 1000}', call_id="call_0"))
    assert isinstance(next_action(state, TOOLS), AskApproval)


# -- runs driven to the end at random --------------------------------------------------------

BAD_ARGUMENTS = ('{"x": "no"}', '{"y": 1}', "{}", "not json")


def random_reply(data: st.DataObject, step: int) -> ModelResponse:
    """A final answer, or 1-3 calls of known and unknown tools with good or bad arguments."""
    n = data.draw(st.integers(0, 3), label=f"calls of step {step}")
    calls = []
    for i in range(n):
        name = data.draw(st.sampled_from(["lookup", "reserve", "pay", "upsert", "ghost"]))
        good = json.dumps({"x": data.draw(st.integers(-1000, 1000))})
        valid = data.draw(st.integers(0, 3), label="arguments valid") > 0
        arguments = good if valid else data.draw(st.sampled_from(BAD_ARGUMENTS))
        calls.append(ToolCall(id=f"s{step}c{i}", name=name, arguments=arguments))
    usage = Usage(
        prompt_tokens=data.draw(st.integers(0, 100)),
        completion_tokens=data.draw(st.integers(0, 100)),
        cost_usd=data.draw(st.floats(0.0, 0.02, allow_nan=False)),
    )
    content = None if calls else f"answer {step}"
    return ModelResponse(
        message=ChatMessage(role="assistant", content=content, tool_calls=tuple(calls)), usage=usage
    )


def assert_calls_answered(messages: tuple[ChatMessage, ...]) -> None:
    """Each assistant message's calls are answered, in order, by the tool messages after it."""
    answered = 0
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        ids = [c.id for c in message.tool_calls]
        answers = [m.tool_call_id for m in messages[i + 1 : i + 1 + len(ids)]]
        assert answers == ids
        assert all(m.role == "tool" for m in messages[i + 1 : i + 1 + len(ids)])
        answered += len(ids)
    assert answered == sum(1 for m in messages if m.role == "tool")


class Checked:
    """Applies transitions and asserts the invariants that hold at every safe point."""

    def __init__(self, transition: Transition) -> None:
        self.state = transition.state
        self.events: list[Event] = [transition.event]
        assert transition.event["seq"] == 0
        self._check()

    def apply(self, transition: Transition) -> None:
        old, new = self.state.status, transition.state.status
        assert not old.finished
        if new is not old:
            assert new in ALLOWED[old]
        assert transition.event["seq"] == len(self.events)
        assert transition.event["run_id"] == "r1"
        self.events.append(transition.event)
        self.state = transition.state
        self._check()

    def _check(self) -> None:
        state = self.state
        assert state.events == len(self.events)
        assert state.step <= state.budget.max_steps
        keys = [e.key for e in state.effects]
        assert len(set(keys)) == len(keys)
        assert RunState.decode(state.encode()) == state


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_runs_keep_every_invariant_and_end(data: st.DataObject) -> None:
    budget = Budget(
        max_steps=data.draw(st.integers(1, 6), label="max_steps"),
        max_cost_usd=data.draw(st.none() | st.floats(0.001, 0.05), label="max_cost_usd"),
        max_tokens=data.draw(st.none() | st.integers(1, 400), label="max_tokens"),
    )
    run = Checked(start_run("r1", "goal", "instructions", budget, 0.0))
    approved: set[str] = set()
    intended: str | None = None  # the key a RecordIntent promised a CallTool for
    bound = budget.max_steps * (1 + 3 * 4) + 2
    for n in range(bound + 1):
        assert n < bound, "the run did not end within its bound of actions"
        now = float(n + 1)
        state = run.state
        action = next_action(state, TOOLS)
        if intended is not None:
            assert isinstance(action, CallTool)
            assert action.key == intended
            intended = None
        match action:
            case Idle() if state.status.finished:
                break
            case Idle():
                assert state.status is RunStatus.WAITING_APPROVAL
                assert state.pending_approval is not None
                call_id = state.pending_approval.call.id
                effect = state.pending_approval.key
                if data.draw(st.booleans(), label="stray decision"):
                    assert decide_approval(state, "stray", True, "bob", None, now) is None
                yes = data.draw(st.booleans(), label="approve")
                target = data.draw(st.sampled_from(["", call_id]))
                decided = decide_approval(state, target, yes, "ann", None, now)
                assert decided is not None
                if yes:
                    approved.add(effect)
                run.apply(decided)
            case Fail(reason=reason):
                assert reason.startswith("budget_exceeded")
                assert reason == budget_exceeded(state)
                run.apply(fail(state, reason, now))
            case CallModel(key=key):
                assert budget_exceeded(state) is None
                assert key == f"r1/{state.step + 1}/model"
                assert_calls_answered(state.messages)
                run.apply(after_model(state, random_reply(data, state.step + 1), now))
            case RejectCall():
                assert action.call.name not in TOOLS or action.error.startswith("invalid")
                run.apply(reject_call(state, action, now))
            case AskApproval():
                assert action.tool is pay
                assert action.key not in approved
                run.apply(ask_approval(state, action, now))
            case RecordIntent():
                assert action.tool is not lookup
                if action.tool is pay:
                    assert action.key in approved
                intended = action.key
                run.apply(record_intent(state, action, now))
            case CallTool():
                if action.tool is pay:
                    assert action.key in approved
                if action.tool is not lookup:
                    assert any(e.key == action.key for e in state.effects)
                error = data.draw(st.sampled_from([None, None, "boom"]), label="tool error")
                run.apply(after_tool(state, action, {"ok": action.key}, error, now))
    final = run.state
    assert final.status in {RunStatus.DONE, RunStatus.FAILED}
    assert final.pending_calls == ()
    assert final.pending_approval is None
    assert_calls_answered(final.messages)
    assert all(e.key in approved for e in final.effects if e.kind == "irreversible")
    assert all(e.status in {"done", "failed"} for e in final.effects)
    assert [e["seq"] for e in run.events] == list(range(len(run.events)))

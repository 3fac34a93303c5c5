"""`encode_run`: byte for byte `RunState.encode`, encoding only what a transition changed."""

from __future__ import annotations

import json

from sluicegate.agents.models.contract import ChatMessage, ModelResponse, ToolCall, Usage
from sluicegate.agents.runs import machine
from sluicegate.agents.runs.encoding import encode_run
from sluicegate.agents.runs.state import Budget, RunState
from tests.unit.agents.seat_tools import seat_tools


def reply(*calls: tuple[str, dict[str, object]]) -> ModelResponse:
    tool_calls = tuple(
        ToolCall(id=f"c{i}", name=name, arguments=json.dumps(args))
        for i, (name, args) in enumerate(calls)
    )
    message = ChatMessage(role="assistant", tool_calls=tool_calls)
    return ModelResponse(message=message, usage=Usage(prompt_tokens=7, completion_tokens=3))


def test_each_document_of_a_run_with_effects_is_its_encoding() -> None:
    tools = {t.name: t for t in seat_tools([])}
    state = machine.start_run("r1", "book", "Book seats.", Budget(), 1.0, metadata={"k": [1]})
    encoded = encode_run(state.state)
    assert encoded.document == state.state.encode()
    run: RunState = state.state
    for n in range(3):
        run = machine.after_model(run, reply(("hold", {"seat": f"{n}A"})), 2.0 + n).state
        while not isinstance(action := machine.next_action(run, tools), machine.CallModel):
            if isinstance(action, machine.RecordIntent):
                run = machine.record_intent(run, action, 3.0).state
            else:
                assert isinstance(action, machine.CallTool)
                run = machine.after_tool(run, action, {"hold_id": n}, None, 4.0).state
            previous, encoded = encoded, encode_run(run, encoded)
            assert encoded.document == run.encode()
            assert RunState.decode(encoded.document) == run
            # Messages the transition kept are not encoded again: the same bytes object.
            kept = min(len(previous.messages), len(encoded.messages)) - 1
            assert encoded.messages[kept - 1] is previous.messages[kept - 1]
    assert len(run.effects) == 3


def test_a_replaced_message_is_encoded_again() -> None:
    run = machine.start_run("r1", "book", "Book seats.", Budget(), 1.0).state
    encoded = encode_run(run)
    changed = run.model_copy(
        update={"messages": (run.messages[0], ChatMessage(role="user", content="other"))}
    )
    again = encode_run(changed, encoded)
    assert again.document == changed.encode()
    assert again.messages[0] is encoded.messages[0]
    assert json.loads(again.messages[1])["content"] == "other"

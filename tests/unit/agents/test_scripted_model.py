"""ScriptedModel: deterministic answers, usage from text length, priced; wrong roles refused."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import pytest

from sluicegate.agents.models import Price, ScriptedModel, estimate_tokens
from sluicegate.agents.models.contract import ChatMessage, ToolCall, ToolSchema

LOOKUP = ToolSchema(name="lookup", description="Find an order.", parameters={"type": "object"})


def echo(messages: Sequence[ChatMessage]) -> ChatMessage:
    """Answers with the last message's content, prefixed."""
    return ChatMessage(role="assistant", content=f"echo: {messages[-1].content}")


def conversation() -> list[ChatMessage]:
    call = ToolCall(id="c1", name="lookup", arguments='{"a":1}')  # 7 characters
    return [
        ChatMessage(role="user", content="abcdefgh"),  # 8
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", content="ok", tool_call_id="c1"),  # 2
    ]


async def test_the_same_messages_give_the_same_response() -> None:
    first = await ScriptedModel(echo).complete(conversation(), [LOOKUP], idempotency_key="a")
    again = await ScriptedModel(echo).complete(conversation(), [LOOKUP], idempotency_key="b")
    assert first == again
    assert first.message == ChatMessage(role="assistant", content="echo: ok")
    assert first.model == "scripted"


async def test_usage_is_a_quarter_token_per_character_and_priced() -> None:
    model = ScriptedModel(
        lambda _: ChatMessage(role="assistant", content="hello"),  # 5 characters
        name="tiny",
        price=Price(input_per_mtok_usd=1.0, output_per_mtok_usd=2.0),
    )
    response = await model.complete(conversation(), [], idempotency_key="k")
    # 8 + 7 + 2 = 17 characters -> ceil(17 / 4) = 5; 5 characters -> 2
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (5, 2)
    assert response.usage.cost_usd == pytest.approx((5 * 1.0 + 2 * 2.0) / 1_000_000)
    assert response.model == "tiny"


def test_tool_call_arguments_count_and_nothing_counts_as_one_token() -> None:
    call = ToolCall(id="c1", name="lookup", arguments="x" * 9)
    assert estimate_tokens([ChatMessage(role="assistant", tool_calls=(call,))]) == 3
    assert estimate_tokens([ChatMessage(role="assistant")]) == 1
    assert estimate_tokens([]) == 1


def test_price_is_per_million_tokens() -> None:
    price = Price(input_per_mtok_usd=3.0, output_per_mtok_usd=15.0)
    assert price.cost(1_000_000, 0) == pytest.approx(3.0)
    assert price.cost(2_000, 1_000) == pytest.approx(0.006 + 0.015)
    assert Price().cost(10**9, 10**9) == 0.0


@pytest.mark.parametrize("role", ["user", "system", "tool"])
async def test_a_policy_answering_in_another_role_is_refused(role: str) -> None:
    model = ScriptedModel(lambda _: ChatMessage.model_validate({"role": role, "content": "x"}))
    with pytest.raises(ValueError, match=f"returned a '{role}' message"):
        await model.complete(conversation(), [], idempotency_key="k")


async def test_calls_are_counted_and_the_policy_cannot_change_the_conversation() -> None:
    seen: list[Sequence[ChatMessage]] = []

    def record(messages: Sequence[ChatMessage]) -> ChatMessage:
        seen.append(messages)
        return echo(messages)

    model = ScriptedModel(record)
    messages = conversation()
    await model.complete(messages, [], idempotency_key="k1")
    await model.complete(messages, [], idempotency_key="k2")
    assert model.calls == 2
    assert all(isinstance(s, tuple) for s in seen)
    assert messages == conversation()


async def test_latency_is_waited_out() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    await ScriptedModel(echo, latency_s=0.05).complete(conversation(), [], idempotency_key="k")
    assert loop.time() - started >= 0.05


def test_a_negative_latency_is_refused() -> None:
    with pytest.raises(ValueError, match="latency_s"):
        ScriptedModel(echo, latency_s=-1)


async def test_a_growing_conversation_is_counted_as_a_whole_one_would_be() -> None:
    """Only the messages after the previous call's are measured: a conversation that grows,
    one whose earlier message was replaced by another object, and one cut short still count
    exactly."""
    model = ScriptedModel(echo)
    messages = conversation()
    for n in range(5):
        messages.append(ChatMessage(role="user", content="x" * (n * 7)))
        response = await model.complete(list(messages), [], idempotency_key=f"k{n}")
        assert response.usage.prompt_tokens == estimate_tokens(messages)
    messages[1] = messages[1].model_copy(update={"content": "y" * 400})
    response = await model.complete(messages, [], idempotency_key="changed")
    assert response.usage.prompt_tokens == estimate_tokens(messages)
    assert response.usage.prompt_tokens > 100
    response = await model.complete(messages[:2], [], idempotency_key="shorter")
    assert response.usage.prompt_tokens == estimate_tokens(messages[:2])


async def test_random_conversations_count_exactly_whatever_was_counted_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Several conversations, interleaved, each grown, cut, edited in place or begun again,
    with a memory of 2 conversations (forgotten and measured again): every call's prompt
    tokens are those of the whole conversation measured afresh."""
    monkeypatch.setattr("sluicegate.agents.models.scripted._MAX_CONVERSATIONS", 2)
    rng = random.Random(7)
    model = ScriptedModel(echo)
    talks = [conversation() for _ in range(4)]
    for n in range(400):
        talk = rng.choice(talks)
        change = rng.randrange(5)
        text = "w" * rng.randrange(40)
        if change <= 1 or len(talk) < 2:
            talk.append(ChatMessage(role="user", content=text))
        elif change == 2:
            del talk[rng.randrange(1, len(talk)) :]
        elif change == 3:
            talk[rng.randrange(len(talk))] = ChatMessage(role="user", content=text)
        else:
            talk[:] = [ChatMessage(role="user", content=text)]
        response = await model.complete(list(talk), [], idempotency_key=f"k{n}")
        assert response.usage.prompt_tokens == estimate_tokens(talk)
        assert len(model._counted) <= 2

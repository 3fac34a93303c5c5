"""AnthropicModel against a real local server speaking the Messages API: the wire format both
ways, tool use, stop reasons, usage and cost, retries with Retry-After, errors; and the
journal's neutral record: a response is the same document whichever provider gave it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import pytest

from sluicegate.agents.models import ModelRequestError, ModelUnavailableError, Price
from sluicegate.agents.models.anthropic_client import AnthropicModel
from sluicegate.agents.models.contract import ChatMessage, ModelResponse, ToolCall, ToolSchema
from sluicegate.agents.models.exceptions import ModelResponseError
from sluicegate.agents.models.openai_client import OpenAIModel
from sluicegate.agents.models.pricing import PRICES, price_of
from tests.integration.agents.chat_server import (
    MESSAGES_PATH,
    ChatServer,
    Reply,
    anthropic_error,
    completion,
    message,
)

ClientFactory = Callable[..., AnthropicModel]

SECRET = "sk-ant-test-secret-0123456789"
WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather of a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
QUESTION = [
    ChatMessage(role="system", content="You are terse."),
    ChatMessage(role="user", content="Weather in Oslo and Bergen?"),
]


def sent_key(headers: Mapping[str, str]) -> str | None:
    """The API key as the SDK sent it (``x-api-key``, or a bearer token, by SDK version)."""
    bearer = headers.get("authorization", "").removeprefix("Bearer ")
    return headers.get("x-api-key") or bearer or None


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id_: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": arguments}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(MESSAGES_PATH) as running:
        yield running


@pytest.fixture
async def make_client(server: ChatServer) -> AsyncIterator[ClientFactory]:
    made: list[AnthropicModel] = []

    def make(**overrides: Any) -> AnthropicModel:
        settings: dict[str, Any] = {
            "model": "claude-test",
            "base_url": server.root,
            "api_key": SECRET,
            "timeout_s": 2.0,
            "max_retries": 2,
            "backoff_s": 0.01,
            "price": Price(input_per_mtok_usd=3.0, output_per_mtok_usd=15.0),
        }
        client = AnthropicModel(**(settings | overrides))
        made.append(client)
        return client

    yield make
    for client in made:
        await client.aclose()


async def test_a_plain_answer_carries_content_usage_cost_and_stop_reason(
    server: ChatServer, make_client: ClientFactory
) -> None:
    server.script(
        Reply(
            body=message(
                text("Sunny "), text("in Oslo."), input_tokens=900, cache_read_input_tokens=100,
                output_tokens=200, model="claude-x-1",
            )
        )
    )  # fmt: skip
    response = await make_client().complete(QUESTION, [], idempotency_key="k1")
    assert response.message == ChatMessage(role="assistant", content="Sunny in Oslo.")
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (1000, 200)
    assert response.usage.cost_usd == pytest.approx((1000 * 3.0 + 200 * 15.0) / 1e6)
    assert (response.model, response.stop_reason) == ("claude-x-1", "end_turn")


async def test_tool_use_blocks_become_tool_calls(
    server: ChatServer, make_client: ClientFactory
) -> None:
    server.script(
        Reply(
            body=message(
                text("Checking both."),
                {"type": "thinking", "thinking": "two cities", "signature": "s"},
                tool_use("toolu_1", "get_weather", city="Oslo"),
                tool_use("toolu_2", "get_weather", city="Bergen"),
                stop_reason="tool_use",
            )
        )
    )
    response = await make_client().complete(QUESTION, [WEATHER], idempotency_key="k1")
    assert response.message.content == "Checking both."
    assert response.message.tool_calls == (
        ToolCall(id="toolu_1", name="get_weather", arguments='{"city": "Oslo"}'),
        ToolCall(id="toolu_2", name="get_weather", arguments='{"city": "Bergen"}'),
    )
    assert response.stop_reason == "tool_use"


async def test_the_request_is_in_the_messages_shape(
    server: ChatServer, make_client: ClientFactory
) -> None:
    """System prompt apart, tool results as user blocks (two results merged into one message,
    as roles must alternate), tool calls as tool_use blocks with parsed input, the key and the
    idempotency key as headers."""
    server.script(Reply(body=message(text("12 and 9 degrees."))))
    calls = (
        ToolCall(id="toolu_1", name="get_weather", arguments='{"city": "Oslo"}'),
        ToolCall(id="toolu_2", name="get_weather", arguments='{"city": "Bergen"}'),
    )
    conversation = [
        *QUESTION,
        ChatMessage(role="assistant", content="Checking.", tool_calls=calls),
        ChatMessage(role="tool", content='{"celsius": 12}', tool_call_id="toolu_1"),
        ChatMessage(role="tool", content='{"celsius": 9}', tool_call_id="toolu_2"),
    ]
    await make_client(max_tokens=512).complete(
        conversation, [WEATHER], idempotency_key="run-7/step-3"
    )

    [request] = server.requests
    assert request.headers["idempotency-key"] == "run-7/step-3"
    assert sent_key(request.headers) == SECRET
    body = request.body
    assert (body["model"], body["max_tokens"], body["system"]) == (
        "claude-test", 512, "You are terse.",
    )  # fmt: skip
    assert body["messages"] == [
        {"role": "user", "content": [text("Weather in Oslo and Bergen?")]},
        {
            "role": "assistant",
            "content": [
                text("Checking."),
                tool_use("toolu_1", "get_weather", city="Oslo"),
                tool_use("toolu_2", "get_weather", city="Bergen"),
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"celsius": 12}'},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": '{"celsius": 9}'},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather of a city.",
            "input_schema": WEATHER.parameters,
        }
    ]


async def test_no_tools_and_no_system_leave_the_fields_out(
    server: ChatServer, make_client: ClientFactory
) -> None:
    server.script(Reply(body=message(text("ok"))))
    await make_client().complete([QUESTION[1]], [], idempotency_key="k1")
    assert "tools" not in server.requests[0].body
    assert "system" not in server.requests[0].body


async def test_arguments_that_are_not_an_object_are_refused_before_sending(
    server: ChatServer, make_client: ClientFactory
) -> None:
    bad = ToolCall(id="c1", name="get_weather", arguments="[1, 2]")
    conversation = [*QUESTION, ChatMessage(role="assistant", tool_calls=(bad,))]
    with pytest.raises(ValueError, match="not a JSON object"):
        await make_client().complete(conversation, [WEATHER], idempotency_key="k1")
    assert server.requests == []


async def test_rate_limits_and_overload_are_retried_with_the_same_idempotency_key(
    server: ChatServer, make_client: ClientFactory
) -> None:
    slow_down = Reply(429, anthropic_error("slow down", "rate_limit_error"), {"Retry-After": "0"})
    overloaded = Reply(529, anthropic_error("overloaded", "overloaded_error"), {"Retry-After": "0"})
    server.script(slow_down, overloaded, Reply(body=message(text("finally"))))
    client = make_client(backoff_s=10.0, max_backoff_s=10.0)  # Retry-After: 0 is what it waits
    started = time.monotonic()
    response = await client.complete(QUESTION, [], idempotency_key="k-429")
    assert time.monotonic() - started < 2.0
    assert response.message.content == "finally"
    assert [r.headers["idempotency-key"] for r in server.requests] == ["k-429"] * 3


async def test_a_persistent_overload_is_unavailable_with_the_servers_words(
    server: ChatServer, make_client: ClientFactory
) -> None:
    server.script(*[Reply(529, anthropic_error("Overloaded", "overloaded_error"))] * 10)
    with pytest.raises(ModelUnavailableError) as caught:
        await make_client(max_retries=2).complete(QUESTION, [], idempotency_key="k1")
    assert (caught.value.status, caught.value.message) == (529, "Overloaded")
    assert len(server.requests) == 3


async def test_a_long_retry_after_ends_the_retries_at_once(
    server: ChatServer, make_client: ClientFactory
) -> None:
    server.script(Reply(429, anthropic_error("quota", "rate_limit_error"), {"Retry-After": "3600"}))
    with pytest.raises(ModelUnavailableError) as caught:
        await make_client().complete(QUESTION, [], idempotency_key="k1")
    assert (caught.value.status, caught.value.retry_after_s) == (429, 3600.0)
    assert len(server.requests) == 1


async def test_a_bad_request_is_fatal_and_not_retried(
    server: ChatServer, make_client: ClientFactory
) -> None:
    server.script(Reply(400, anthropic_error("max_tokens: too large")))
    with pytest.raises(ModelRequestError) as caught:
        await make_client().complete(QUESTION, [], idempotency_key="k1")
    assert (caught.value.status, caught.value.message) == (400, "max_tokens: too large")
    assert len(server.requests) == 1


async def test_an_unknown_content_block_is_an_unusable_response(
    server: ChatServer, make_client: ClientFactory
) -> None:
    block = {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}
    server.script(Reply(body=message(block)))
    with pytest.raises(ModelResponseError, match="server_tool_use"):
        await make_client().complete(QUESTION, [], idempotency_key="k1")


async def test_the_key_is_masked_and_falls_back_to_the_environment(
    server: ChatServer, make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert SECRET not in repr(make_client())
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    server.script(Reply(body=message(text("ok"))))
    await make_client(api_key=None).complete(QUESTION, [], idempotency_key="k1")
    assert sent_key(server.requests[0].headers) == "sk-ant-from-env"


async def test_both_providers_record_one_neutral_document() -> None:
    """The journal keeps `ModelResponse` as JSON: the same tool call from either server is the
    same document (ids aside), so a run recorded with one replays with the other."""
    with ChatServer(MESSAGES_PATH) as messages_api, ChatServer() as chat_api:
        call = tool_use("same-id", "get_weather", city="Oslo")
        messages_api.script(Reply(body=message(call, stop_reason="tool_use", model="m")))
        same = ("same-id", "get_weather", '{"city": "Oslo"}')
        chat_api.script(Reply(body=completion(None, tool_calls=[same], model="m")))
        async with (
            AnthropicModel(model="m", base_url=messages_api.root, price=Price()) as claude,
            OpenAIModel(model="m", base_url=chat_api.url, price=Price()) as gpt,
        ):
            recorded = [
                (await client.complete(QUESTION, [WEATHER], idempotency_key="k")).model_dump(
                    mode="json"
                )
                for client in (claude, gpt)
            ]
    assert recorded[0]["message"] == recorded[1]["message"]
    assert recorded[0]["stop_reason"] == recorded[1]["stop_reason"] == "tool_use"
    assert ModelResponse.model_validate(recorded[0]).message.tool_calls[0].arguments == same[2]


def test_prices_match_dated_snapshots_and_the_longest_name() -> None:
    assert price_of("claude-sonnet-4-5-20250929") == PRICES["claude-sonnet-4-5"]
    assert price_of("gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"]
    assert price_of("gpt-4o") == PRICES["gpt-4o"]
    assert price_of("gpt-4oz") == Price()  # no key and a dash: not that model
    assert price_of("llama3.1:8b") == Price()
    mine = {**PRICES, "my-model": Price(input_per_mtok_usd=1.0)}
    assert price_of("my-model", mine).input_per_mtok_usd == 1.0
    assert AnthropicModel(model="claude-haiku-4-5", prices=mine).price == PRICES["claude-haiku-4-5"]


async def test_a_server_slower_than_the_timeout_is_unavailable(
    server: ChatServer, make_client: ClientFactory
) -> None:
    server.script(*[Reply(body=message(text("late")), delay_s=30)] * 2)
    with pytest.raises(ModelUnavailableError) as caught:
        await make_client(timeout_s=1.0, max_retries=1).complete(QUESTION, [], idempotency_key="k1")
    assert caught.value.status is None
    assert len(server.requests) == 2

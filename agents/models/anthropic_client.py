"""A :class:`~agents.models.contract.ModelClient` for Anthropic's Messages API (``anthropic``
SDK): ``POST /v1/messages``, with tool use, stop reasons and token usage.

The conversation crosses in Anthropic's shape and comes back in the neutral one
(`ModelResponse`), so the journal records the same document whichever provider answered:

* the system messages become the ``system`` prompt (joined by a blank line);
* a tool's answer (``role="tool"``) is a ``tool_result`` block of a user message; an
  assistant message's tool calls are ``tool_use`` blocks whose ``input`` is the call's
  arguments parsed (a call whose arguments are not a JSON object is refused before anything is
  sent); consecutive messages of one role are merged into one, as the API wants roles to
  alternate; empty text is left out (the API refuses empty text blocks);
* back: the text blocks joined are the content, each ``tool_use`` block a `ToolCall` (its
  input as JSON text), thinking blocks are dropped, any other block is an unusable response;
  ``input_tokens`` plus the cache's read and written tokens are the prompt tokens (priced at
  the input rate: an upper bound with caching), ``output_tokens`` the completion tokens.

Retries: :mod:`agents.models.retries` (the SDK's are off); 529 (overloaded) is a 5xx and
retried like the rest.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic
from anthropic import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncAnthropic,
    omit,
)
from anthropic.types import (
    AssistantMessageParam,
    Message,
    MessageParam,
    ToolParam,
    UserMessageParam,
)

from sluicegate.agents.models.contract import (
    ChatMessage,
    ModelResponse,
    StopReason,
    ToolCall,
    ToolSchema,
    Usage,
)
from sluicegate.agents.models.exceptions import ModelResponseError
from sluicegate.agents.models.pricing import PRICES, Price
from sluicegate.agents.models.retries import connection_failure, status_failure
from sluicegate.agents.models.sdk_client import PLACEHOLDER_KEY, SdkModel
from sluicegate.operators.exceptions import ConfigError

__all__ = ["AnthropicModel"]

_STOP_REASONS: Mapping[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
}
"""Anthropic's ``stop_reason`` -> the neutral `StopReason` (any other: ``other``)."""

_IGNORED_BLOCKS = frozenset({"thinking", "redacted_thinking"})


class AnthropicModel(SdkModel[AsyncAnthropic]):
    """Calls Anthropic's Messages API (or a server speaking it) through
    ``anthropic.AsyncAnthropic``.

    ``api_key`` falls back to ``$ANTHROPIC_API_KEY``, then to a placeholder; it is never
    logged, and ``repr`` masks it. ``base_url``: the server's root (the SDK adds
    ``/v1/messages``). ``max_tokens``: the output limit of one call (the API requires one).
    ``price`` defaults to the model's in ``prices`` (`agents.models.pricing.PRICES`). Close the
    client with :meth:`aclose` or use it as an async context manager.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        timeout_s: float = 60,
        max_retries: int = 4,
        price: Price | None = None,
        prices: Mapping[str, Price] = PRICES,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ) -> None:
        if max_tokens <= 0:
            raise ConfigError("max_tokens", f"must be > 0, got {max_tokens}")
        super().__init__(
            model=model, timeout_s=timeout_s, max_retries=max_retries, price=price,
            prices=prices, backoff_s=backoff_s, max_backoff_s=max_backoff_s,
        )  # fmt: skip
        self._max_tokens = max_tokens
        self._client = AsyncAnthropic(
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY") or PLACEHOLDER_KEY,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,
        )

    async def complete(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSchema],
        *,
        idempotency_key: str,
    ) -> ModelResponse:
        """Ask the model for its next message: convert (module docstring; ``ValueError`` before
        anything is sent for a conversation that cannot be said in this protocol), send with
        retries, convert the answer back, priced with ``price``."""
        system, wire = _conversation_to_wire(messages)
        wire_tools: list[ToolParam] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]

        async def send() -> Message:
            try:
                return await self._client.messages.create(
                    model=self._model,
                    max_tokens=self._max_tokens,
                    messages=wire,
                    system=system or omit,
                    tools=wire_tools or omit,
                    extra_headers={"Idempotency-Key": idempotency_key},
                )
            except APIStatusError as error:
                headers = error.response.headers
                raise status_failure(error.status_code, _server_message(error), headers) from error
            except APIConnectionError as error:
                timed_out = isinstance(error, APITimeoutError)
                raise connection_failure(error, timed_out=timed_out) from error
            except APIError as error:
                raise ModelResponseError(error.message) from error

        answer = await self._retries.run(send, model=self._model)
        return _response_from_wire(answer, self._price, self._model)


def _server_message(error: APIStatusError) -> str:
    """The server's own words: ``error.message`` of an Anthropic-shaped body, else the SDK's."""
    body = error.body
    inner = body.get("error") if isinstance(body, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return str(inner["message"])
    return error.message


def _conversation_to_wire(messages: Sequence[ChatMessage]) -> tuple[str, list[MessageParam]]:
    """The system prompt and the alternating messages of ``messages`` (module docstring)."""
    system: list[str] = []
    wire: list[MessageParam] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            previous = wire[-1]["content"]
            assert isinstance(previous, list)
            previous.extend(blocks)
        elif role == "assistant":
            wire.append(AssistantMessageParam(role="assistant", content=blocks))
        else:
            wire.append(UserMessageParam(role="user", content=blocks))
    return "\n\n".join(system), wire


def _blocks(message: ChatMessage) -> list[Any]:
    if message.role == "tool":
        if message.tool_call_id is None:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content or "",
            }
        ]
    blocks: list[Any] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)})
    return blocks


def _input(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ValueError(
            f"tool call {call.id} ({call.name}): its arguments are not a JSON object, which "
            "the Messages API needs as a tool_use input"
        )
    return value


def _response_from_wire(answer: Message, price: Price, model: str) -> ModelResponse:
    # The SDK builds responses without validating them, so every field may be missing.
    try:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in answer.content or ():
            kind = getattr(block, "type", type(block).__name__)
            if kind == "text":
                texts.append(str(getattr(block, "text", "")))
            elif kind == "tool_use":
                arguments = json.dumps(getattr(block, "input", {}))
                calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))  # type: ignore[union-attr]
            elif kind not in _IGNORED_BLOCKS:
                raise ModelResponseError(
                    f"content block of type {kind!r}; text and tool_use are known"
                )
        usage = answer.usage
        prompt_tokens = (
            (usage.input_tokens or 0)
            + (usage.cache_creation_input_tokens or 0)
            + (usage.cache_read_input_tokens or 0)
        ) if usage is not None else 0  # fmt: skip
        completion_tokens = (usage.output_tokens or 0) if usage is not None else 0
        return ModelResponse(
            message=ChatMessage(
                role="assistant", content="".join(texts) if texts else None, tool_calls=tuple(calls)
            ),
            usage=Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost_usd=price.cost(prompt_tokens, completion_tokens),
            ),
            model=answer.model or model,
            stop_reason=_STOP_REASONS.get(str(answer.stop_reason), "other"),
        )
    except (pydantic.ValidationError, AttributeError, TypeError) as error:
        raise ModelResponseError(f"malformed message: {error}") from error

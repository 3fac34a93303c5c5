"""A :class:`~agents.models.contract.ModelClient` for any chat-completions server (``openai`` SDK).

OpenAI itself, vLLM, Ollama, LM Studio and llama.cpp all speak ``POST /v1/chat/completions``;
``base_url`` picks the server. Retries: :mod:`agents.models.retries` (the SDK's are off).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pydantic
from openai import APIConnectionError, APIError, APIStatusError, APITimeoutError, AsyncOpenAI, omit
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
)

from sluicegate.agents.models.contract import (
    ChatMessage,
    ModelResponse,
    StopReason,
    ToolCall,
    ToolSchema,
    Usage,
)
from sluicegate.agents.models.exceptions import (
    ModelResponseError,
)
from sluicegate.agents.models.pricing import PRICES, Price
from sluicegate.agents.models.retries import connection_failure, status_failure
from sluicegate.agents.models.sdk_client import PLACEHOLDER_KEY, SdkModel

__all__ = ["OpenAIModel"]


class OpenAIModel(SdkModel[AsyncOpenAI]):
    """Calls a chat-completions server through ``openai.AsyncOpenAI``.

    ``api_key`` falls back to ``$OPENAI_API_KEY``, then to a placeholder that local servers
    accept. The key is never logged, and ``repr`` masks it. ``price`` defaults to the model's
    in ``prices`` (`agents.models.pricing.PRICES`; free when it is not there: a local model).
    Close the client with :meth:`aclose` or use it as an async context manager.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60,
        max_retries: int = 4,
        price: Price | None = None,
        prices: Mapping[str, Price] = PRICES,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ) -> None:
        super().__init__(
            model=model, timeout_s=timeout_s, max_retries=max_retries, price=price,
            prices=prices, backoff_s=backoff_s, max_backoff_s=max_backoff_s,
        )  # fmt: skip
        self._client = AsyncOpenAI(
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY,
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
        """Ask the model for its next message.

        1. Convert ``messages`` and ``tools`` to the wire format (``ValueError`` for a tool
           message without ``tool_call_id``, before anything is sent).
        2. Send, retrying transient failures as the module docstring describes; raise
           :class:`ModelUnavailableError` when they persist, :class:`ModelRequestError` at once
           for any other 4xx.
        3. Convert the first choice and the usage, priced with ``price``
           (:class:`ModelResponseError` if the answer cannot be read).
        """
        wire_messages = [_message_to_wire(m) for m in messages]
        wire_tools = [_tool_to_wire(t) for t in tools]
        completion = await self._send(wire_messages, wire_tools, idempotency_key)
        return _response_from_wire(completion, self._price, self._model)

    async def _send(
        self,
        messages: list[ChatCompletionMessageParam],
        tools: list[ChatCompletionFunctionToolParam],
        idempotency_key: str,
    ) -> ChatCompletion:
        async def send() -> ChatCompletion:
            try:
                return await self._client.chat.completions.create(
                    model=self._model,
                    messages=messages,
                    # Servers refuse an empty tools array; leave the field out instead.
                    tools=tools or omit,
                    extra_headers={"Idempotency-Key": idempotency_key},
                )
            except APIStatusError as error:
                headers = error.response.headers
                raise status_failure(error.status_code, _server_message(error), headers) from error
            except APIConnectionError as error:
                raise connection_failure(
                    error, timed_out=isinstance(error, APITimeoutError)
                ) from error
            except APIError as error:
                raise ModelResponseError(error.message) from error

        return await self._retries.run(send, model=self._model)


def _server_message(error: APIStatusError) -> str:
    """The server's own words: ``error.message`` of an OpenAI-shaped body, else the SDK's."""
    # The SDK has already unwrapped ``{"error": {...}}`` into ``body``.
    body = error.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return error.message


def _message_to_wire(message: ChatMessage) -> ChatCompletionMessageParam:
    content = message.content or ""
    match message.role:
        case "system":
            return {"role": "system", "content": content}
        case "user":
            return {"role": "user", "content": content}
        case "tool":
            if message.tool_call_id is None:
                raise ValueError("a tool message needs the tool_call_id of the call it answers")
            return {"role": "tool", "content": content, "tool_call_id": message.tool_call_id}
        case "assistant":
            wire: ChatCompletionAssistantMessageParam = {"role": "assistant"}
            # An assistant message that only calls tools may have no content.
            if message.content is not None or not message.tool_calls:
                wire["content"] = content
            if message.tool_calls:
                wire["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in message.tool_calls
                ]
            return wire


def _tool_to_wire(tool: ToolSchema) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _response_from_wire(completion: ChatCompletion, price: Price, model: str) -> ModelResponse:
    # The SDK builds responses without validating them, so every field may be missing.
    if not completion.choices:
        raise ModelResponseError("the response has no choices")
    answer = completion.choices[0].message
    try:
        message = ChatMessage(
            role="assistant",
            # A refusal is the model's answer too; keep it rather than an empty message.
            content=answer.content if answer.content is not None else answer.refusal,
            tool_calls=_tool_calls_from_wire(answer.tool_calls or ()),
        )
        usage = completion.usage
        prompt_tokens = usage.prompt_tokens if usage is not None else 0
        completion_tokens = usage.completion_tokens if usage is not None else 0
        return ModelResponse(
            message=message,
            usage=Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost_usd=price.cost(prompt_tokens, completion_tokens),
            ),
            model=completion.model or model,
            stop_reason=_STOP_REASONS.get(str(completion.choices[0].finish_reason), "other"),
        )
    except (pydantic.ValidationError, AttributeError, TypeError) as error:
        raise ModelResponseError(f"malformed chat completion: {error}") from error


_STOP_REASONS: Mapping[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
"""Chat-completions ``finish_reason`` -> the neutral `StopReason` (any other: ``other``)."""


def _tool_calls_from_wire(calls: Sequence[object]) -> tuple[ToolCall, ...]:
    converted = []
    for call in calls:
        if not isinstance(call, ChatCompletionMessageFunctionToolCall):
            kind = getattr(call, "type", type(call).__name__)
            raise ModelResponseError(f"tool call of kind {kind!r}; only function calls are known")
        converted.append(
            ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments)
        )
    return tuple(converted)

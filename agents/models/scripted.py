"""A deterministic model without a network: a stand-in for demos and tests.

A policy, a plain function of the conversation so far, writes the assistant's next message.
Usage is derived from text length (about four characters a token), so cost and budget
arithmetic downstream is exercised exactly as with a real model, and reproducibly.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from operator import is_

from sluicegate.agents.models.contract import ChatMessage, ModelResponse, ToolSchema, Usage
from sluicegate.agents.models.pricing import Price

__all__ = ["Policy", "ScriptedModel", "estimate_tokens"]

Policy = Callable[[Sequence[ChatMessage]], ChatMessage]
"""Writes the assistant's next message from the conversation so far."""

_CHARS_PER_TOKEN = 4


_MAX_CONVERSATIONS = 4_096
"""Conversations a `ScriptedModel` remembers the size of (then it forgets them all)."""


def estimate_tokens(messages: Sequence[ChatMessage]) -> int:
    """``ceil(characters / 4)`` over every message's content and tool-call arguments, at least 1."""
    return _tokens(sum(map(_chars, messages)))


def _chars(message: ChatMessage) -> int:
    return len(message.content or "") + sum(len(call.arguments) for call in message.tool_calls)


def _tokens(chars: int) -> int:
    return max(1, math.ceil(chars / _CHARS_PER_TOKEN))


class ScriptedModel:
    """:class:`~agents.models.contract.ModelClient` whose answers come from ``policy``; no network.

    Deterministic: the same messages give the same response and usage. Tools and the
    idempotency key are accepted and ignored. ``calls`` counts the calls made so far.

    ``complete`` performs, in order:

    1. count the call and ask the policy for the next message;
    2. refuse (``ValueError``) a message whose role is not ``assistant``;
    3. estimate usage (see :func:`estimate_tokens`) and price it;
    4. sleep ``latency_s``, if positive, to imitate a slow model.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        name: str = "scripted",
        price: Price = Price(input_per_mtok_usd=1.0, output_per_mtok_usd=2.0),  # noqa: B008
        latency_s: float = 0.0,
    ) -> None:
        if latency_s < 0:
            raise ValueError(f"latency_s must be >= 0, got {latency_s}")
        self.name = name
        self.price = price
        self.latency_s = latency_s
        self.calls = 0
        self._policy = policy
        self._counted: dict[int, tuple[tuple[ChatMessage, ...], int]] = {}
        """The id of a conversation's first message -> the messages of its last call and their
        characters (the tuple keeps the first message, so its id is not reused)."""

    def __repr__(self) -> str:
        return f"ScriptedModel(name={self.name!r}, calls={self.calls})"

    async def complete(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSchema],
        *,
        idempotency_key: str,
    ) -> ModelResponse:
        """Return the policy's answer to ``messages`` with a deterministic usage."""
        self.calls += 1
        # A tuple, so a policy cannot change the caller's conversation.
        conversation = tuple(messages)
        reply = self._policy(conversation)
        if reply.role != "assistant":
            raise ValueError(
                f"policy of {self.name!r} returned a {reply.role!r} message; "
                "it must return an assistant message"
            )
        prompt_tokens = self._prompt_tokens(conversation)
        completion_tokens = estimate_tokens([reply])
        usage = Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self.price.cost(prompt_tokens, completion_tokens),
        )
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        return ModelResponse(message=reply, usage=usage, model=self.name)

    def _prompt_tokens(self, conversation: tuple[ChatMessage, ...]) -> int:
        """`estimate_tokens` of ``conversation``, measuring only the messages after those of
        its previous call: a conversation comes back longer at every step, and measuring it
        whole each time made a run's cost grow with the square of its length. A conversation
        is known by its first message; its previous call's messages count as they were only
        if they are the same (frozen) objects in the same places, one pass in C
        (``map(is_, ...)``); else it is measured whole."""
        if not conversation:
            return _tokens(0)
        key = id(conversation[0])
        counted, chars = self._counted.get(key, ((), 0))
        if len(counted) > len(conversation) or not all(map(is_, counted, conversation)):
            counted, chars = (), 0
        chars += sum(map(_chars, conversation[len(counted) :]))
        if key not in self._counted and len(self._counted) >= _MAX_CONVERSATIONS:
            self._counted.clear()
        self._counted[key] = (conversation, chars)
        return _tokens(chars)

"""The built-in tools of an agent with `Memory`, ``remember`` and its compensation
``forget``, and the context message of the read rule.

``remember(text)`` is ``reversible``: journaled behind its intent like any tool with an effect
(issued, then done with its result), retried on an unknown outcome, no approval. The call only
checks the text and returns it with its source (the call's idempotency key); the entry is
written by the agent operator into the key's memory at the safe point that records the call's
result, in the same write as the run's state. So the entry and the run's progress are in a
snapshot together or not at all: after a restore the run is re-driven from before the call,
the journal replays its ``done``, and the entry is written once (``docs/memory.md``).

``forget(source)`` is ``remember``'s compensating tool, called (journaled, under the
compensation's own key) only by a rollback of the run past the call: the operator then deletes
the entry of that source at the compensation's safe point. It is never offered to the model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sluicegate.agents.journal import OnUnknown
from sluicegate.agents.memory.entries import MemoryEntry
from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.tools import Tool, ToolContext, ToolKind

__all__ = [
    "FORGET",
    "REMEMBER",
    "context_message",
    "forget_tool",
    "remember_tool",
    "remembered_text",
]

REMEMBER = "remember"
"""The name of the built-in memory tool; an agent with memory may not declare a tool of it."""
FORGET = "forget"
"""The name of its compensation (the same rule)."""


class _RememberArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, description="What to remember, in one or two sentences.")


def remember_tool(max_chars: int) -> Tool:
    """The ``remember`` tool, refusing text over ``max_chars`` characters (an error result the
    model sees; nothing is written)."""

    async def remember(ctx: ToolContext, text: str) -> dict[str, Any]:
        if len(text) > max_chars:
            raise ValueError(f"at most {max_chars} characters can be remembered, not {len(text)}")
        return {"remembered": text, "source": ctx.idempotency_key}

    return Tool(
        name=REMEMBER,
        description=(
            "Remember a fact for later runs about the same subject (customer, order, device). "
            "Later runs are shown the most recent facts remembered."
        ),
        function=remember,
        arguments=_RememberArguments,
        kind=ToolKind.REVERSIBLE,
        on_unknown=OnUnknown.RETRY,
        compensate=FORGET,
    )


class _ForgetArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1)


def forget_tool() -> Tool:
    """``forget``: the compensation of a ``remember`` call (its ``source``, from its result)."""

    async def forget(ctx: ToolContext, source: str) -> dict[str, Any]:
        return {"forgotten": source}

    return Tool(
        name=FORGET,
        description="Undo a remember call of this run (rollbacks only).",
        function=forget,
        arguments=_ForgetArguments,
        kind=ToolKind.IDEMPOTENT_WRITE,
        on_unknown=OnUnknown.RETRY,
    )


def remembered_text(result: Any) -> str | None:
    """The text a ``remember`` call's recorded result holds, or None for anything else (the
    journal is storage: its bytes are checked like any other)."""
    if isinstance(result, dict) and isinstance(text := result.get("remembered"), str) and text:
        return text
    return None


def context_message(key: str, entries: Sequence[MemoryEntry]) -> ChatMessage | None:
    """The system message the read rule gives a model call: one line per entry, oldest first,
    each text as a JSON string (a newline in it cannot forge another entry); None when there
    are none."""
    if not entries:
        return None
    lines = [f"Memory of {key} from earlier runs (oldest first):"]
    lines.extend(
        f"- [{e.entry_id}, {e.kind}, run {e.run_id}] {json.dumps(e.text)}" for e in entries
    )
    return ChatMessage(role="system", content="\n".join(lines))

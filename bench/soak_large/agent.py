"""The soak's agent: one run calls a tool of every kind once, then answers.

======== ====================================== ============================================
step     tool (kind, on_unknown)                service endpoint
======== ====================================== ============================================
1        ``read_order`` (read-only)             ``GET /orders/<run>``
2        ``put_record`` (idempotent, default)   ``POST /dedup/record``: deduplicates by key
3        ``post_entry`` (idempotent, lookup)    ``POST /write/entry``: executes every call
4        ``retry_note`` (idempotent, retry)     ``POST /dedup/note``: deduplicates by key
5        ``notify`` (irreversible, lookup)      ``POST /write/notify``, after an approval
6        the answer
======== ====================================== ============================================
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from sluicegate.agents.agent import add_agent
from sluicegate.agents.declaration import Agent, AgentTopics
from sluicegate.agents.journal import LookupFound, LookupNotFound, LookupResult, OnUnknown
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.models.scripted import ScriptedModel
from sluicegate.agents.runs.state import Budget
from sluicegate.agents.tools import Tool, ToolContext, ToolKind, tool
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline

__all__ = ["STEPS", "TOOLS", "WRITES", "soak_graph", "topics_of"]

TOOLS = ("read_order", "put_record", "post_entry", "retry_note", "notify")
WRITES = {"record": "dedup", "entry": "lookup", "note": "dedup", "notify": "lookup"}
"""Each write kind (the service path's last part), and how its tool settles an unknown
outcome against the service: by the service's deduplication, or by a lookup."""
STEPS = len(TOOLS) + 1


def topics_of(tag: str) -> AgentTopics:
    return AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip


def soak_graph(tag: str, url: str, partitions: int, parallelism: int) -> JobGraph:
    """The pipeline of the soak: its agent on the topics of ``tag``, the service at ``url``."""
    p = Pipeline(f"soak-{tag}")
    agent = Agent(
        "soak", model=ScriptedModel(_policy), tools=_tools(url), instructions="Write.",
        budget=Budget(max_steps=2 * STEPS, max_cost_usd=1.0),
    )  # fmt: skip
    add_agent(p, agent, partitions=partitions, parallelism=parallelism, topics=topics_of(tag))
    return p.build()


def _policy(messages: Sequence[ChatMessage]) -> ChatMessage:
    done = sum(1 for m in messages if m.role == "tool")
    if done < len(TOOLS):
        name = TOOLS[done]
        call = ToolCall(id=f"call-{done + 1}-{name}", name=name, arguments="{}")
        return ChatMessage(role="assistant", content=None, tool_calls=(call,))
    return ChatMessage(role="assistant", content="every tool called")


def _tools(url: str) -> list[Tool]:
    def post(dedup: str, kind: str, ctx: ToolContext) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{url}/{dedup}/{kind}", method="POST",
            data=json.dumps({"run_id": ctx.run_id}).encode(),
            headers={"Content-Type": "application/json", "Idempotency-Key": ctx.idempotency_key,
                     "X-Caller-Pid": str(os.getpid())},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=60) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    def get(path: str) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{url}{path}", timeout=60) as response:
                answer: dict[str, Any] = json.loads(response.read())
                return answer
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    async def find(ctx: ToolContext, kind: str) -> LookupResult:
        key = urllib.parse.quote(ctx.idempotency_key, safe="")
        found = await asyncio.to_thread(get, f"/effects/{kind}/{key}")
        return LookupNotFound() if found is None else LookupFound(found)

    async def find_entry(ctx: ToolContext) -> LookupResult:
        return await find(ctx, "entry")

    async def find_notify(ctx: ToolContext) -> LookupResult:
        return await find(ctx, "notify")

    @tool(kind=ToolKind.READ_ONLY)
    async def read_order(ctx: ToolContext) -> dict[str, Any]:
        """Read the run's order."""
        return await asyncio.to_thread(get, f"/orders/{ctx.run_id}") or {}

    @tool(kind=ToolKind.IDEMPOTENT_WRITE)
    async def put_record(ctx: ToolContext) -> dict[str, Any]:
        """Write a record to a service that deduplicates by key."""
        return await asyncio.to_thread(post, "dedup", "record", ctx)

    @tool(kind=ToolKind.IDEMPOTENT_WRITE, on_unknown=OnUnknown.LOOKUP, lookup=find_entry)
    async def post_entry(ctx: ToolContext) -> dict[str, Any]:
        """Write an entry to a service that executes every call; settled by lookup."""
        return await asyncio.to_thread(post, "write", "entry", ctx)

    @tool(kind=ToolKind.IDEMPOTENT_WRITE, on_unknown=OnUnknown.RETRY)
    async def retry_note(ctx: ToolContext) -> dict[str, Any]:
        """Write a note to a service that deduplicates by key; retried when unknown."""
        return await asyncio.to_thread(post, "dedup", "note", ctx)

    @tool(kind=ToolKind.IRREVERSIBLE, on_unknown=OnUnknown.LOOKUP, lookup=find_notify)
    async def notify(ctx: ToolContext) -> dict[str, Any]:
        """Notify the customer (irreversible: needs an approval)."""
        return await asyncio.to_thread(post, "write", "notify", ctx)

    return [read_order, put_record, post_entry, retry_note, notify]

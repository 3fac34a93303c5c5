"""The refund desk: the demo agent, its tools over the world service, and its scripted model.

A task asks to settle a refund for an order. The scripted model (deterministic, no network;
a stand-in for a real model, see `ScriptedModel`) checks the order ``research`` times with the
read-only `lookup_order`, refunds it with `issue_refund` (reversible: `reverse_refund`), emails
the customer with `send_email` (irreversible: it waits for a person's approval) and answers.
That is ``research + 3`` model steps per run.

With memory (`refund_desk(..., memory=True)`, the demo pipeline's agent; ``docs/memory.md``)
and a task naming its customer (``task_goal(..., customer=...)``, metadata ``customer_id``):
after the refund the model remembers it (``research + 4`` steps), and a later run asking to
refund an order the customer's memory says was refunded answers at once that it was, without
a second refund (1 step).

With a model configured (``SLUICEGATE_MODEL_PROVIDER``, ``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY`` or ``SLUICEGATE_MODEL_URL``: `agents.models.selection`), a real model
drives the same tools.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from sluicegate import (
    Agent,
    Budget,
    ChatMessage,
    JobGraph,
    LookupFound,
    LookupNotFound,
    LookupResult,
    Memory,
    OnUnknown,
    Pipeline,
    ScriptedModel,
    TaskRequest,
    Tool,
    ToolCall,
    ToolContext,
    ToolKind,
    add_agent,
    tool,
)
from sluicegate.agents.models.contract import ModelClient
from sluicegate.agents.models.selection import model_from_env
from sluicegate.demos.refund_desk.world_client import WorldClient

__all__ = [
    "ALREADY_REFUNDED",
    "CUSTOMER_MEMORY",
    "INSTRUCTIONS",
    "WorldConnection",
    "refund_desk",
    "refund_desk_graph",
    "refund_desk_tools",
    "refund_task",
    "script",
    "task_goal",
]

INSTRUCTIONS = (
    "You are a refund desk. Check the order, refund it in full, email the customer that the "
    "refund was issued, then answer with one line saying what you did. If the customer's "
    "memory says the order was refunded already, do not refund it again: say so. After a "
    "refund, remember it (order, refund id, amount) if you have the remember tool."
)
CUSTOMER_MEMORY = Memory(key="customer_id", recent=20, max_tokens=1500)
"""The demo's memory: per customer (task metadata ``customer_id``), the 20 latest entries."""
_ORDER = re.compile(r"\bord-[0-9a-z-]{1,40}\b")
_RESEARCH = re.compile(r"\bchecks=(\d+)\b")
_CUSTOMER = re.compile(r"^Customer (c-[0-9a-z-]{1,40}) ")
ALREADY_REFUNDED = "was refunded already"
"""What the scripted model answers for an order its memory says was refunded."""


def task_goal(order_id: str, *, research: int = 2, customer: str | None = None) -> str:
    """The goal text of a refund task the scripted model understands (``customer``: an id
    ``c-...``, which the task's metadata should carry as ``customer_id`` too)."""
    who = "Customer" if customer is None else f"Customer {customer}"
    return f"{who} asks for a refund of order {order_id}. checks={research}"


def refund_task(run_id: str, order_id: str, customer: str, *, research: int = 2) -> TaskRequest:
    """A refund task of ``customer`` (its memory key), as the demo submits them."""
    goal = task_goal(order_id, research=research, customer=customer)
    return TaskRequest(run_id=run_id, goal=goal, metadata={"customer_id": customer})


class WorldConnection:
    """One `WorldClient` shared by every subtask of a process (`ToolResources`): opened by
    the first `acquire`, closed by the last `release`. Building an HTTP client loads TLS
    certificates, far too slow to do per call on the event loop."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: WorldClient | None = None
        self._users = 0

    async def acquire(self) -> None:
        self._users += 1
        if self._client is None:
            self._client = WorldClient(self.url)

    async def release(self) -> None:
        self._users -= 1
        if self._users <= 0 and self._client is not None:
            client, self._client, self._users = self._client, None, 0
            await client.aclose()

    @property
    def client(self) -> WorldClient:
        if self._client is None:
            raise RuntimeError("the world connection is not acquired: is the agent open?")
        return self._client


def refund_desk_tools(world: WorldConnection) -> list[Tool]:
    """The desk's tools, calling the world service through ``world``."""

    async def find(ctx: ToolContext) -> LookupResult:
        effect = await world.client.find_effect(ctx.idempotency_key)
        return LookupNotFound() if effect is None else LookupFound(effect.get("body"))

    @tool(kind=ToolKind.READ_ONLY)
    async def lookup_order(ctx: ToolContext, order_id: str) -> dict[str, Any]:
        """Look up an order: customer, email, amount, currency, status."""
        return await world.client.get_order(order_id)

    @tool(kind=ToolKind.IRREVERSIBLE, on_unknown=OnUnknown.LOOKUP, lookup=find)
    async def reverse_refund(ctx: ToolContext, refund_id: str) -> dict[str, Any]:
        """Reverse a refund issued earlier (the compensation of issue_refund)."""
        return await world.client.reverse_refund(refund_id, key=ctx.idempotency_key)

    @tool(
        kind=ToolKind.REVERSIBLE,
        compensate="reverse_refund",
        on_unknown=OnUnknown.LOOKUP,
        lookup=find,
    )
    async def issue_refund(ctx: ToolContext, order_id: str, amount: float) -> dict[str, Any]:
        """Refund ``amount`` of order ``order_id`` to the customer."""
        return await world.client.issue_refund(
            order_id, amount, ctx.run_id, key=ctx.idempotency_key
        )

    @tool(kind=ToolKind.IRREVERSIBLE, on_unknown=OnUnknown.LOOKUP, lookup=find)
    async def send_email(ctx: ToolContext, to: str, subject: str, body: str) -> dict[str, Any]:
        """Email the customer."""
        return await world.client.send_email(to, subject, body, ctx.run_id, key=ctx.idempotency_key)

    return [lookup_order, issue_refund, reverse_refund, send_email]


def script(messages: Sequence[ChatMessage]) -> ChatMessage:
    """The scripted model's policy: a pure function of the conversation (see module doc)."""
    goal = next(m.content or "" for m in messages if m.role == "user")
    order = _ORDER.search(goal)
    research = int(m.group(1)) if (m := _RESEARCH.search(goal)) else 1
    results = [m for m in messages if m.role == "tool"]
    step = sum(1 for m in messages if m.role == "assistant") + 1
    if order is None:
        return _answer("I could not find an order id in the request.")
    order_id = order.group(0)
    remembers = _CUSTOMER.search(goal) is not None
    if not results and (earlier := _refunded_before(messages, order_id)) is not None:
        return _answer(f"Order {order_id} {ALREADY_REFUNDED} ({earlier}): no second refund.")
    if len(results) < research:
        return _call(step, "lookup_order", order_id=order_id)
    facts = _json(results[0].content)
    if len(results) == research:
        if "amount" not in facts:
            return _answer(f"Order {order_id} could not be looked up: {results[0].content}")
        return _call(step, "issue_refund", order_id=order_id, amount=facts["amount"])
    if len(results) == research + 1:
        refund = _json(results[-1].content)
        if "refund_id" not in refund:
            return _answer(f"The refund of {order_id} failed: {results[-1].content}")
        if remembers:
            note = (
                f"refunded {order_id}: {refund['refund_id']}, {facts['amount']} {facts['currency']}"
            )
            return _call(step, "remember", text=note)
    if len(results) == research + 1 + remembers:
        refund = _json(results[research].content)
        body = f"Your refund {refund['refund_id']} of {facts['amount']} {facts['currency']}."
        subject = f"Refund for {order_id}"
        return _call(step, "send_email", to=facts["email"], subject=subject, body=body)
    outcome = results[-1].content or ""
    emailed = "not emailed" if outcome.startswith(("error", "rejected")) else "emailed"
    return _answer(f"Refunded {order_id} ({facts['amount']} {facts['currency']}); {emailed}.")


def refund_desk(
    world_url: str,
    *,
    model: ModelClient | None = None,
    alert_webhook: str | None = None,
    memory: bool = False,
) -> Agent:
    """The demo agent. Without ``model``: a real model if configured by env, else scripted.
    ``alert_webhook``: where a rollback's alerts are POSTed (`Agent.alert_webhook`).
    ``memory``: remember each customer's refunds across runs (`CUSTOMER_MEMORY`)."""
    world = WorldConnection(world_url)
    return Agent(
        memory=CUSTOMER_MEMORY if memory else None,
        name="refund-desk",
        model=model or _model_from_env(),
        tools=refund_desk_tools(world),
        resources=world,
        instructions=INSTRUCTIONS,
        budget=Budget(max_steps=16, max_cost_usd=1.0),
        alert_webhook=alert_webhook,
    )


def refund_desk_graph() -> JobGraph:
    """The demo pipeline: ``sluicegate up sluicegate.demos.refund_desk.agent:refund_desk_graph``.

    Env: ``SLUICEGATE_WORLD_URL`` (default http://127.0.0.1:8480), ``SLUICEGATE_PARTITIONS``
    (default 4), ``SLUICEGATE_PIPELINE`` (default refund-demo), ``SLUICEGATE_ALERT_WEBHOOK``
    (default none: rollback alerts are events and metrics only). The agent has memory per
    customer (`CUSTOMER_MEMORY`)."""
    world = os.environ.get("SLUICEGATE_WORLD_URL", "http://127.0.0.1:8480")
    partitions = int(os.environ.get("SLUICEGATE_PARTITIONS", "4"))
    p = Pipeline(os.environ.get("SLUICEGATE_PIPELINE", "refund-demo"))
    desk = refund_desk(
        world, alert_webhook=os.environ.get("SLUICEGATE_ALERT_WEBHOOK") or None, memory=True
    )
    add_agent(p, desk, partitions=partitions, parallelism=min(2, partitions))
    return p.build()


def _refunded_before(messages: Sequence[ChatMessage], order_id: str) -> str | None:
    """The memory entry saying ``order_id`` was refunded (its id and run), if any."""
    for m in messages:
        content = m.content or ""
        if m.role != "system" or not content.startswith("Memory of "):
            continue
        for line in content.splitlines()[1:]:
            if f'"refunded {order_id}:' in line:
                return line[line.find("[") + 1 : line.find("]")]
    return None


def _model_from_env() -> ModelClient:
    return model_from_env(lambda: ScriptedModel(script))


def _call(step: int, name: str, **arguments: Any) -> ChatMessage:
    call = ToolCall(id=f"call-{step}-{name}", name=name, arguments=json.dumps(arguments))
    return ChatMessage(role="assistant", content=None, tool_calls=(call,))


def _answer(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}

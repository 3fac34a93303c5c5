"""Support triage: two agents and two plain operators in one job, under one snapshot.

::

    tickets ─▶ classify ─▶ classified ─▶ triage agent ─▶ triage.results ─┬▶ refunds agent
    (source)   (operator)   (topic)       tags tickets      (topic)       │  (refund tickets)
                                                                          │        │
                                                                          │  refunds.results
                                                                          ▼        ▼
                                                                   notify (operator, fan-in)
                                                                          │
                                                                       notices (sink)

* ``classify`` (plain operator) reads raw tickets, refuses malformed ones (dead letter) and
  tags each with a category;
* the ``triage`` agent starts a run per classified ticket (`TaskFeed` with `triage_task`): it
  tags the ticket in the ticket service and answers ``refund`` or ``answered``;
* the ``refunds`` agent starts a run per triage result that answered ``refund``
  (`refund_task`; fan-out: ``notify`` reads the same results) and issues the refund;
* ``notify`` reads both agents' results (fan-in) and writes one notice per ticket and stage.

Every topic between them is exactly-once under checkpoints, and every tool call goes through
the agents' effect journals: after any crash, every tag and every refund happens once, and
``notices`` holds each notice once. Both tools are writes the service executes every time it
is called (it does not deduplicate); a call whose outcome a crash hid is settled by asking the
service (``on_unknown=lookup``). docs/agents-in-pipelines.md walks through it; the end-to-end
test ``tests/e2e/test_agents_in_pipeline.py`` runs it with SIGKILLs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, Field

from sluicegate import (
    Agent,
    AgentTopics,
    ChatMessage,
    Context,
    LookupFound,
    LookupNotFound,
    LookupResult,
    OnUnknown,
    Pipeline,
    Record,
    RetryableError,
    RunResult,
    ScriptedModel,
    TaskFeed,
    TaskRequest,
    Tool,
    ToolCall,
    ToolContext,
    ToolKind,
    add_agent,
    tool,
)
from sluicegate.agents.models import Policy

__all__ = ["Ticket", "classify", "refund_task", "support_pipeline", "triage_task"]

REFUND_WORDS = ("refund", "broken", "return")


class Ticket(BaseModel):
    """A raw ticket, as the help desk writes it to ``tickets``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._:-]+$")
    customer: str = Field(min_length=1, max_length=100)
    text: str = Field(min_length=1, max_length=10_000)


def classify(record: Record, ctx: Context) -> None:
    """Plain operator: a ticket in, the ticket with its category out (keyed by ticket id)."""
    ticket = Ticket.model_validate_json(record.value)  # malformed: dead-lettered with why
    refund = any(word in ticket.text.lower() for word in REFUND_WORDS)
    category = "refund" if refund else "question"
    value = {**ticket.model_dump(), "category": category}
    ctx.emit("classified", json.dumps(value).encode(), key=ticket.id.encode())


def triage_task(record: Record) -> TaskRequest:
    """A classified ticket starts triage run ``triage-<ticket>``."""
    ticket = json.loads(record.value)
    return TaskRequest(
        run_id=f"triage-{ticket['id']}",
        goal=f"[{ticket['category']}] {ticket['text']}",
        metadata={"ticket": ticket["id"], "customer": ticket["customer"]},
    )


def refund_task(record: Record) -> TaskRequest | None:
    """A triage result that answered ``refund`` starts refund run ``refund-<ticket>``."""
    result = RunResult.model_validate_json(record.value)
    if result.status != "done" or result.answer != "refund":
        return None
    return TaskRequest(
        run_id=f"refund-{result.metadata['ticket']}",
        goal="Refund the customer.",
        metadata=result.metadata,
    )


def notify(record: Record, ctx: Context) -> None:
    """Plain operator reading both agents' results: one notice per ticket and stage."""
    result = RunResult.model_validate_json(record.value)
    stage = result.run_id.partition("-")[0]
    ticket = str(result.metadata.get("ticket", result.run_id))
    notice = {"ticket": ticket, "stage": stage, "status": result.status, "answer": result.answer}
    ctx.emit("notices", json.dumps(notice, sort_keys=True).encode(), key=ticket.encode())


def support_pipeline(
    service_url: str, *, name: str = "support", partitions: int = 4, parallelism: int = 2
) -> Pipeline:
    """The pipeline in the module docstring; the tools call the service at ``service_url``."""
    tag_ticket, issue_refund = _tools(service_url)
    triage = Agent(
        "triage",
        model=ScriptedModel(_call_then_answer("tag_ticket", _triage_args, _triage_answer)),
        tools=[tag_ticket],
        instructions="Tag the ticket, then say refund or answered.",
    )
    refunds = Agent(
        "refunds",
        model=ScriptedModel(
            _call_then_answer("issue_refund", lambda _: {"amount": 10.0}, lambda _: "refunded")
        ),
        tools=[issue_refund],
        instructions="Refund the customer.",
    )
    p = Pipeline(name)
    p.source("tickets", partitions=partitions)
    p.topic("classified", partitions=partitions)
    p.topic("triage.results", partitions=partitions)
    p.topic("refunds.results", partitions=partitions)
    p.sink("notices", partitions=partitions)
    p.operator("classify", classify, inputs="tickets", outputs="classified")
    add_agent(
        p, triage, partitions=partitions, parallelism=parallelism,
        feeds=[TaskFeed("classified", triage_task)],
        topics=AgentTopics.named("triage", results="triage.results"),
    )  # fmt: skip
    add_agent(
        p, refunds, partitions=partitions, parallelism=parallelism,
        feeds=[TaskFeed("triage.results", refund_task)],
        topics=AgentTopics.named("refunds", results="refunds.results"),
    )  # fmt: skip
    p.operator("notify", notify, inputs=["triage.results", "refunds.results"], outputs="notices")
    return p


# -- the model and the tools ----------------------------------------------------------------


def _triage_args(goal: str) -> dict[str, Any]:
    return {"category": "refund" if goal.startswith("[refund]") else "question"}


def _triage_answer(goal: str) -> str:
    return "refund" if goal.startswith("[refund]") else "answered"


def _call_then_answer(
    tool_name: str, arguments: Callable[[str], dict[str, Any]], answer: Callable[[str], str]
) -> Policy:
    """A scripted model's policy: call ``tool_name`` once, then answer (both from the goal)."""

    def policy(messages: Sequence[ChatMessage]) -> ChatMessage:
        goal = next(m.content or "" for m in messages if m.role == "user")
        if not any(m.role == "tool" for m in messages):
            call = ToolCall(id="c0", name=tool_name, arguments=json.dumps(arguments(goal)))
            return ChatMessage(role="assistant", content=None, tool_calls=(call,))
        return ChatMessage(role="assistant", content=answer(goal))

    return policy


def _tools(service_url: str) -> tuple[Tool, Tool]:
    """``tag_ticket`` and ``issue_refund``: writes the service executes on every call, each
    sent with ``Idempotency-Key``, settled after a crash by ``GET /effects/<key>``."""

    async def find(ctx: ToolContext) -> LookupResult:
        found = await _request(service_url, "GET", f"/effects/{quote(ctx.idempotency_key)}")
        return LookupNotFound() if found is None else LookupFound(found)

    @tool(kind=ToolKind.IDEMPOTENT_WRITE, on_unknown=OnUnknown.LOOKUP, lookup=find)
    async def tag_ticket(ctx: ToolContext, category: str) -> dict[str, Any]:
        """Tag the ticket with its category."""
        body = {"ticket": ctx.metadata["ticket"], "category": category, "run_id": ctx.run_id}
        return await _request(service_url, "POST", "/tags", body, ctx.idempotency_key) or {}

    @tool(kind=ToolKind.IDEMPOTENT_WRITE, on_unknown=OnUnknown.LOOKUP, lookup=find)
    async def issue_refund(ctx: ToolContext, amount: float) -> dict[str, Any]:
        """Refund ``amount`` to the ticket's customer."""
        body = {"customer": ctx.metadata["customer"], "amount": amount, "run_id": ctx.run_id}
        return await _request(service_url, "POST", "/refunds", body, ctx.idempotency_key) or {}

    return tag_ticket, issue_refund


async def _request(
    base: str, method: str, path: str, body: Any = None, key: str | None = None
) -> dict[str, Any] | None:
    """The service's JSON answer; None for a 404. No answer or a 5xx: retry later."""
    headers = {"Idempotency-Key": key} if key else {}
    try:
        async with httpx.AsyncClient(base_url=base, timeout=10.0) as http:
            response = await http.request(method, path, json=body, headers=headers)
    except httpx.HTTPError as exc:
        raise RetryableError(f"{method} {path}: {exc}") from exc
    if response.status_code == 404:
        return None
    if response.status_code >= 500:
        raise RetryableError(f"{method} {path}: {response.status_code}")
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer

"""An agent with memory for the memory tests (integration and e2e): goal ``remember: <text>``
remembers the text, then answers with the memory it was shown; any other goal answers with the
memory it was shown at once. `seen` reads an answer back as the entry texts, in order."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from sluicegate import Agent, AgentTopics, Pipeline, add_agent
from sluicegate.agents.memory.config import Memory
from sluicegate.agents.messages import TaskRequest
from sluicegate.agents.models import ScriptedModel
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.operators.graph import JobGraph

PARTITIONS = 4
_LINE = re.compile(r'^- \[(?P<id>[^,]+), (?P<kind>\w+), run (?P<run>[^\]]+)\] (?P<text>".*")$')


def _policy(messages: Sequence[ChatMessage]) -> ChatMessage:
    goal = next(m.content or "" for m in messages if m.role == "user")
    if goal.startswith("remember: ") and not any(m.role == "assistant" for m in messages):
        arguments = json.dumps({"text": goal.removeprefix("remember: ")})
        call = ToolCall(id="c0", name="remember", arguments=arguments)
        return ChatMessage(role="assistant", tool_calls=(call,))
    memory = [m.content or "" for m in messages if (m.content or "").startswith("Memory of ")]
    return ChatMessage(role="assistant", content=memory[0] if memory else "no memory")


def memory_agent(latency_s: float = 0.0) -> Agent:
    return Agent(
        "keeper", ScriptedModel(_policy, latency_s=latency_s), [], "Keep notes.",
        memory=Memory(key="customer_id", recent=50, max_tokens=5000),
    )  # fmt: skip


def memory_graph(
    tag: str, parallelism: int, latency_s: float = 0.0
) -> tuple[JobGraph, AgentTopics]:
    p = Pipeline(f"mem-{tag}")
    topics = AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip
    add_agent(p, memory_agent(latency_s), partitions=PARTITIONS, parallelism=parallelism,
              topics=topics)  # fmt: skip
    return p.build(), topics


def task(run_id: str, goal: str, customer: str) -> TaskRequest:
    return TaskRequest(run_id=run_id, goal=goal, metadata={"customer_id": customer})


def seen(answer: str | None) -> list[str]:
    """The entry texts an answer shows, oldest first (``[]`` for ``no memory``)."""
    texts = []
    for line in (answer or "").splitlines()[1:]:
        match = _LINE.match(line)
        assert match is not None, f"not an entry line: {line!r}"
        texts.append(json.loads(match["text"]))
    return texts


def seen_ids(answer: str | None) -> list[str]:
    return [m["id"] for line in (answer or "").splitlines() if (m := _LINE.match(line))]

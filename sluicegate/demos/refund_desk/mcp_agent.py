"""The refund desk with its tools on an MCP server (`refund_desk.mcp_server`).

The same desk as `refund_desk.agent` (its instructions, budget and scripted model), but its
tools are whatever the MCP server at ``mcp_url`` lists, with kinds from the server's
annotations: ``lookup_order`` read-only, ``issue_refund`` an idempotent write,
``send_email`` irreversible (a person approves it). Every call is journaled like a `@tool`
function's and carries its idempotency key to the server in ``_meta``.

Run it: the world service, the MCP server, then the pipeline (docs/mcp.md)::

    python -m sluicegate.demos.refund_desk.world --port 8480
    python -m sluicegate.demos.refund_desk.mcp_server --world http://127.0.0.1:8480 --port 8481
    SLUICEGATE_REFUND_MCP_URL=http://127.0.0.1:8481/mcp \\
        sluicegate up --pipeline sluicegate.demos.refund_desk.mcp_agent:refund_desk_mcp_graph
"""

from __future__ import annotations

import os

from sluicegate import (
    Agent,
    AgentTopics,
    Budget,
    JobGraph,
    Pipeline,
    ScriptedModel,
    add_agent,
    mcp_server,
)
from sluicegate.agents.models.contract import ModelClient
from sluicegate.agents.models.selection import model_from_env
from sluicegate.demos.refund_desk.agent import INSTRUCTIONS, script

__all__ = ["refund_desk_mcp", "refund_desk_mcp_graph"]


def refund_desk_mcp(mcp_url: str, *, model: ModelClient | None = None) -> Agent:
    """The desk, its tools from the MCP server at ``mcp_url`` (streamable HTTP)."""
    return Agent(
        name="refund-desk",
        model=model or model_from_env(lambda: ScriptedModel(script)),
        tools=[mcp_server(mcp_url, name="refund-desk-tools", timeout_s=10.0)],
        instructions=INSTRUCTIONS,
        budget=Budget(max_steps=16, max_cost_usd=1.0),
    )


def refund_desk_mcp_graph() -> JobGraph:
    """The pipeline for ``sluicegate up``. Env: ``SLUICEGATE_REFUND_MCP_URL`` (default
    http://127.0.0.1:8481/mcp), ``SLUICEGATE_PARTITIONS`` (default 4), ``SLUICEGATE_PIPELINE``
    (default refund-mcp-demo), ``SLUICEGATE_TOPICS`` (the topics' prefix: ``<prefix>.tasks``,
    ``.approvals``, ``.events``, ``.results``; default refund-desk-mcp)."""
    url = os.environ.get("SLUICEGATE_REFUND_MCP_URL", "http://127.0.0.1:8481/mcp")
    partitions = int(os.environ.get("SLUICEGATE_PARTITIONS", "4"))
    p = Pipeline(os.environ.get("SLUICEGATE_PIPELINE", "refund-mcp-demo"))
    topics = AgentTopics.named(os.environ.get("SLUICEGATE_TOPICS", "refund-desk-mcp"))
    desk = refund_desk_mcp(url)
    add_agent(p, desk, partitions=partitions, parallelism=min(2, partitions), topics=topics)
    return p.build()

"""MCP servers' tools as tools of an agent: `mcp_server` (streamable HTTP) and `mcp_stdio`.

Modules: :mod:`~agents.mcp.kinds` (the sans-IO mapping of a listed tool to a `ToolKind`),
:mod:`~agents.mcp.source` (the connection, the listing rule and the calls),
:mod:`~agents.mcp.secrets` (header values read from the environment or a file),
:mod:`~agents.mcp.exceptions`. See ``docs/mcp.md``.
"""

from __future__ import annotations

from sluicegate.agents.mcp.exceptions import (
    McpServerUnavailableError,
    McpToolCallError,
    McpToolKindError,
)
from sluicegate.agents.mcp.kinds import Hints, McpToolDescription, kind_of
from sluicegate.agents.mcp.secrets import Secret
from sluicegate.agents.mcp.source import (
    IDEMPOTENCY_KEY_META,
    TRACE_META,
    McpServer,
    mcp_server,
    mcp_stdio,
)

__all__ = [
    "IDEMPOTENCY_KEY_META",
    "TRACE_META",
    "Hints",
    "McpServer",
    "McpServerUnavailableError",
    "McpToolCallError",
    "McpToolDescription",
    "McpToolKindError",
    "Secret",
    "kind_of",
    "mcp_server",
    "mcp_stdio",
]

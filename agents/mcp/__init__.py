"""MCP servers' tools as tools of an agent.

Modules: :mod:`~agents.mcp.kinds` (the sans-IO mapping of a listed tool to a `ToolKind`),
:mod:`~agents.mcp.secrets` (header values read from the environment or a file),
:mod:`~agents.mcp.exceptions`.
"""

from __future__ import annotations

from sluicegate.agents.mcp.exceptions import (
    McpServerUnavailableError,
    McpToolCallError,
    McpToolKindError,
)
from sluicegate.agents.mcp.kinds import Hints, McpToolDescription, kind_of
from sluicegate.agents.mcp.secrets import Secret

__all__ = [
    "Hints",
    "McpServerUnavailableError",
    "McpToolCallError",
    "McpToolDescription",
    "McpToolKindError",
    "Secret",
    "kind_of",
]

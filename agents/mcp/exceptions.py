"""Errors of the MCP tool sources.

The tree (under the engine's two branches, `operators.exceptions`)::

    RetryableError
    └── McpServerUnavailableError   the server cannot be reached, or did not answer in time
    FatalError
    ├── ToolDeclarationError        (agents.tools)
    │   └── McpToolKindError        a listed tool has no kind the runtime can trust
    └── McpToolCallError            the server answered a call with ``isError``
"""

from __future__ import annotations

from sluicegate.agents.tools import ToolDeclarationError
from sluicegate.operators.exceptions import FatalError, RetryableError

__all__ = ["McpServerUnavailableError", "McpToolCallError", "McpToolKindError"]


class McpServerUnavailableError(RetryableError):
    """``server`` (its display name, never a header) could not be reached or timed out."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"MCP server {server}: {reason}")
        self.server, self.reason = server, reason


class McpToolKindError(ToolDeclarationError):
    """A tool of ``server`` has no annotation the runtime can map to a kind, and the agent
    declares none for it (``kinds={tool: ToolKind...}``)."""

    def __init__(self, server: str, tool: str, problem: str) -> None:
        super().__init__(tool, f"{problem} (MCP server {server})")
        self.server = server


class McpToolCallError(FatalError):
    """The server answered a call of ``tool`` with an error result (``isError``): the effect
    failed for good, and the model is told ``message``."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(f"{tool}: {message}")
        self.tool, self.message = tool, message

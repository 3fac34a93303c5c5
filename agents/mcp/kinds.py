"""The kind of an MCP tool, from its annotations and the agent's declaration (sans-IO).

MCP servers annotate tools with hints (``readOnlyHint``, ``destructiveHint``,
``idempotentHint``); they are claims of a server that may be wrong or lie, so the agent's own
declaration (``kinds={"tool": ToolKind...}``) always wins. Without one, `kind_of` maps:

=====================================================  ==========================
annotations                                            kind
=====================================================  ==========================
``readOnlyHint: true``                                 ``read_only``
``destructiveHint: true``                              ``irreversible`` (approval)
``idempotentHint: true`` and ``destructiveHint: false``  ``idempotent_write``
any other annotated write                              ``irreversible`` (approval)
no annotations, or none of the three hints             refused: `McpToolKindError`
=====================================================  ==========================

``destructiveHint`` defaults to true in MCP, so an idempotent tool that does not say
``destructiveHint: false`` is irreversible; a write that is neither idempotent nor
destructive (it adds something) cannot be retried safely and has no compensation, so it waits
for a person too.

Why an unannotated tool is refused rather than treated as irreversible: a server that says
nothing about a tool has not been looked at by anyone, and both guesses are bad. Reading it as
harmless would run an unknown effect with no approval; reading it as irreversible would put a
person in front of every call of what is most often a lookup, and people who approve
everything stop reading what they approve. Refusing when the subtask opens, with the tool's
name, makes the author decide once, in the agent's code.

``reversible`` is not a kind an MCP tool can have: its compensation would have to be a tool of
the same server named in the declaration, which this mapping does not model yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sluicegate.agents.mcp.exceptions import McpToolKindError
from sluicegate.agents.tools import ToolKind

__all__ = ["Hints", "McpToolDescription", "kind_of"]


@dataclass(frozen=True, slots=True)
class Hints:
    """The behaviour hints of an MCP tool's ``annotations``; None: the server did not say."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None

    @property
    def empty(self) -> bool:
        return self.read_only is None and self.destructive is None and self.idempotent is None


@dataclass(frozen=True, slots=True)
class McpToolDescription:
    """One tool as an MCP server lists it: what the mapping needs of ``tools/list``."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    hints: Hints | None
    """None: the tool has no ``annotations`` at all."""


def kind_of(server: str, tool: McpToolDescription, declared: ToolKind | None) -> ToolKind:
    """The kind of ``tool`` of ``server``: ``declared`` when given, else from its hints (see
    the module docstring); raise `McpToolKindError` naming the tool when neither says."""
    if declared is not None:
        if declared is ToolKind.REVERSIBLE:
            raise McpToolKindError(
                server, tool.name, "an MCP tool cannot be declared reversible (no compensation); "
                "declare it idempotent_write or irreversible",
            )  # fmt: skip
        return declared
    hints = tool.hints
    if hints is None or hints.empty:
        raise McpToolKindError(
            server, tool.name, "the server gives no readOnlyHint, destructiveHint or "
            "idempotentHint: declare its kind in the agent (kinds={"
            f"{tool.name!r}: ToolKind.READ_ONLY | IDEMPOTENT_WRITE | IRREVERSIBLE}})",
        )  # fmt: skip
    if hints.read_only:
        return ToolKind.READ_ONLY
    if hints.destructive is False and hints.idempotent:
        return ToolKind.IDEMPOTENT_WRITE
    return ToolKind.IRREVERSIBLE

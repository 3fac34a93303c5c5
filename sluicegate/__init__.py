"""sluicegate: LLM agents as stateful stream operators over Apache Kafka.

The front door. What a pipeline's author needs comes from here::

    from sluicegate import Agent, Budget, OnUnknown, Pipeline, ToolKind, add_agent, tool

Everything else lives in documented submodules: the engine `sluicegate.operators`, the agent
runtime `sluicegate.agents`, the checkpoint coordinator `sluicegate.coordinator` (the
repository's top-level folders of those names), jobs on a real broker for tests
`sluicegate.testing`, and the application (`sluicegate.cli`, `sluicegate.demos`,
`sluicegate.devkafka`, `sluicegate.deploy`). docs/api.md lists the names and says which
submodule holds what.

The names load on first use, so that importing one submodule (a sans-IO core, say) loads no
more than that submodule needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # `X as X`: the names this module exports, for type checkers
    from sluicegate.agents.agent import add_agent as add_agent
    from sluicegate.agents.declaration import (
        Agent as Agent,
        AgentTopics as AgentTopics,
        TaskFeed as TaskFeed,
    )
    from sluicegate.agents.journal.effects import (
        LookupFound as LookupFound,
        LookupNotFound as LookupNotFound,
        LookupResult as LookupResult,
    )
    from sluicegate.agents.journal.resolution import OnUnknown as OnUnknown
    from sluicegate.agents.mcp.source import mcp_server as mcp_server, mcp_stdio as mcp_stdio
    from sluicegate.agents.memory.config import Memory as Memory
    from sluicegate.agents.messages import RunResult as RunResult, TaskRequest as TaskRequest
    from sluicegate.agents.models.anthropic_client import AnthropicModel as AnthropicModel
    from sluicegate.agents.models.contract import (
        ChatMessage as ChatMessage,
        ToolCall as ToolCall,
    )
    from sluicegate.agents.models.openai_client import OpenAIModel as OpenAIModel
    from sluicegate.agents.models.scripted import ScriptedModel as ScriptedModel
    from sluicegate.agents.runs.state import Budget as Budget
    from sluicegate.agents.tools import (
        Tool as Tool,
        ToolContext as ToolContext,
        ToolKind as ToolKind,
        tool as tool,
    )
    from sluicegate.operators.contract import Context as Context, Record as Record
    from sluicegate.operators.exceptions import (
        FatalError as FatalError,
        RetryableError as RetryableError,
    )
    from sluicegate.operators.graph import JobGraph as JobGraph
    from sluicegate.operators.pipeline import Pipeline as Pipeline

# name -> the module that defines it
_HOMES = {
    # a pipeline
    "Pipeline": "sluicegate.operators.pipeline",
    "JobGraph": "sluicegate.operators.graph",
    "Context": "sluicegate.operators.contract",
    "Record": "sluicegate.operators.contract",
    # an agent in it
    "Agent": "sluicegate.agents.declaration",
    "AgentTopics": "sluicegate.agents.declaration",
    "TaskFeed": "sluicegate.agents.declaration",
    "add_agent": "sluicegate.agents.agent",
    "Budget": "sluicegate.agents.runs.state",
    "Memory": "sluicegate.agents.memory.config",
    "TaskRequest": "sluicegate.agents.messages",
    "RunResult": "sluicegate.agents.messages",
    # its tools
    "tool": "sluicegate.agents.tools",
    "Tool": "sluicegate.agents.tools",
    "ToolContext": "sluicegate.agents.tools",
    "ToolKind": "sluicegate.agents.tools",
    "OnUnknown": "sluicegate.agents.journal.resolution",
    "LookupFound": "sluicegate.agents.journal.effects",
    "LookupNotFound": "sluicegate.agents.journal.effects",
    "LookupResult": "sluicegate.agents.journal.effects",
    "mcp_server": "sluicegate.agents.mcp.source",
    "mcp_stdio": "sluicegate.agents.mcp.source",
    # its model
    "OpenAIModel": "sluicegate.agents.models.openai_client",
    "AnthropicModel": "sluicegate.agents.models.anthropic_client",
    "ScriptedModel": "sluicegate.agents.models.scripted",
    "ChatMessage": "sluicegate.agents.models.contract",
    "ToolCall": "sluicegate.agents.models.contract",
    # errors a process function or a tool raises
    "RetryableError": "sluicegate.operators.exceptions",
    "FatalError": "sluicegate.operators.exceptions",
}

__all__ = sorted(_HOMES)


if not TYPE_CHECKING:  # type checkers see the imports above, and refuse any other name

    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module 'sluicegate' has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

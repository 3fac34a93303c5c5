"""The actions of a run (`agents.runs.machine.next_action`): what the runtime performs next. Data
only: `agents.runs.machine` decides and applies outcomes, the operator performs them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluicegate.agents.models.contract import ToolCall
from sluicegate.agents.tools import Tool

__all__ = [
    "Action",
    "AskApproval",
    "CallModel",
    "CallTool",
    "Fail",
    "Idle",
    "RecordIntent",
    "RejectCall",
    "ReuseRecorded",
]


@dataclass(frozen=True, slots=True)
class Idle:
    """Nothing to do until an input arrives (finished, or waiting for a person)."""


@dataclass(frozen=True, slots=True)
class Fail:
    reason: str


@dataclass(frozen=True, slots=True)
class CallModel:
    key: str


@dataclass(frozen=True, slots=True)
class RejectCall:
    """The call cannot run (unknown tool, bad arguments): the model is told why."""

    call: ToolCall
    error: str


@dataclass(frozen=True, slots=True)
class _ToolStep:
    """A valid call of ``tool`` with its parsed ``arguments`` and effect ``key``."""

    call: ToolCall
    tool: Tool
    arguments: dict[str, Any]
    key: str


@dataclass(frozen=True, slots=True)
class AskApproval(_ToolStep):
    """The call is irreversible: a person decides first."""


@dataclass(frozen=True, slots=True)
class RecordIntent(_ToolStep):
    """The safe point before a tool with an effect runs."""


@dataclass(frozen=True, slots=True)
class CallTool(_ToolStep):
    """Run the tool now."""


@dataclass(frozen=True, slots=True)
class ReuseRecorded(_ToolStep):
    """A recorded-only fork's call of a tool with an effect: not executed; it answers what the
    parent recorded for it (``result``/``error``, see `ForkOrigin.recorded_outcome`)."""

    result: Any = None
    error: str | None = None


Action = (
    Idle | Fail | CallModel | RejectCall | AskApproval | RecordIntent | CallTool | ReuseRecorded
)

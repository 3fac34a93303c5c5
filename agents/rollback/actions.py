"""The actions of a run's rollback (`agents.rollback.machine.next_action`) and the journal keys its
compensations and alerts run under. Data only: `agents.rollback.machine` decides,
`agents.rollback.compensation` performs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluicegate.agents.runs.machine import Idle
from sluicegate.agents.runs.state import EffectRecord
from sluicegate.agents.tools import Tool

__all__ = [
    "Block",
    "Compensate",
    "Finish",
    "Notify",
    "RollbackAction",
    "Settle",
    "Skip",
    "alert_key",
    "compensation_key",
]


@dataclass(frozen=True, slots=True)
class Settle:
    """Ask the journal how ``effect`` (left ``issued``) ended."""

    effect: EffectRecord


@dataclass(frozen=True, slots=True)
class Skip:
    """Nothing to undo: ``effect`` failed, or its call never started."""

    effect: EffectRecord
    why: str


@dataclass(frozen=True, slots=True)
class Compensate:
    """Call ``tool`` with ``arguments`` under ``key`` to undo ``effect``."""

    effect: EffectRecord
    tool: Tool
    arguments: dict[str, Any]
    key: str


@dataclass(frozen=True, slots=True)
class Block:
    """``effect`` cannot be undone by the rollback (``problem`` says why): alert, wait."""

    effect: EffectRecord
    problem: str


@dataclass(frozen=True, slots=True)
class Notify:
    """Call the alert webhook about the effect the run waits on, under ``key``."""

    effect: EffectRecord
    problem: str
    key: str


@dataclass(frozen=True, slots=True)
class Finish:
    """Every effect is undone."""


RollbackAction = Idle | Settle | Skip | Compensate | Block | Notify | Finish


def compensation_key(effect_key: str, number: int) -> str:
    return f"{effect_key}/compensate/{number}"


def alert_key(effect_key: str, number: int) -> str:
    return f"{effect_key}/alert/{number}"

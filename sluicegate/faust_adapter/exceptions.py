"""Errors of the faust adapter.

The tree (under the engine's root, `operators.exceptions`)::

    SluicegateError
    └── FatalError
        ├── UnsupportedFeatureError   a faust feature the adapter does not run; names it and the
        │                             user's source line (refused at start, never ignored)
        ├── AgentStepError            an agent did something inside a record the adapter cannot
        │                             honour (awaited I/O, sent a tombstone); the record is
        │                             dead-lettered with this message
        └── NotAFaustAppError         ``module:attribute`` is not a ``faust.App``
"""

from __future__ import annotations

from sluicegate.operators.exceptions import FatalError

__all__ = ["AgentStepError", "NotAFaustAppError", "UnsupportedFeatureError"]


class UnsupportedFeatureError(FatalError):
    """``feature`` (``app.timer``, ``stream.take``, ...) at ``where`` (``file:line``) is not run
    by sluicegate yet; ``hint`` says what to do instead."""

    def __init__(self, feature: str, where: str, hint: str = "") -> None:
        text = f"{where}: {feature} is not supported by sluicegate's faust adapter"
        super().__init__(f"{text}; {hint}" if hint else text)
        self.feature, self.where, self.hint = feature, where, hint


class AgentStepError(FatalError):
    """Agent ``agent`` could not complete a record: ``problem`` says why."""

    def __init__(self, agent: str, problem: str) -> None:
        super().__init__(f"agent {agent}: {problem}")
        self.agent, self.problem = agent, problem


class NotAFaustAppError(FatalError):
    """``spec`` names ``found``, not a ``faust.App``."""

    def __init__(self, spec: str, found: str) -> None:
        super().__init__(f"{spec} is a {found}, not a faust.App")
        self.spec, self.found = spec, found

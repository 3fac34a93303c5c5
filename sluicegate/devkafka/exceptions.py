"""Errors of the development broker, under the tree drawn in ``operators.exceptions``::

FatalError
└── MissingToolError     a program we run (java, mvn) is not installed
FatalError
└── BrokerStartError     the dev broker did not come up; carries its log tail
"""

from __future__ import annotations

from sluicegate.operators.exceptions import FatalError

__all__ = ["BrokerStartError", "MissingToolError"]


class MissingToolError(FatalError):
    """A program sluicegate needs to run is not on PATH."""

    def __init__(self, tool: str, hint: str) -> None:
        super().__init__(f"{tool} was not found on PATH. {hint}")
        self.tool = tool
        self.hint = hint


class BrokerStartError(FatalError):
    """The development Kafka broker failed to fetch, format or start."""

    def __init__(self, reason: str, log_tail: str = "") -> None:
        message = (
            reason if not log_tail else f"{reason}\n--- broker log (last lines) ---\n{log_tail}"
        )
        super().__init__(message)
        self.reason = reason
        self.log_tail = log_tail

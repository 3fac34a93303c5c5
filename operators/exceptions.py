"""Errors of the engine, and the root of every sluicegate error.

The tree::

    SluicegateError
    ├── RetryableError      the same call may succeed later (broker away, timeout)
    └── FatalError          retrying will not help; a person must act
        ├── ConfigError     a setting is invalid; the message says which and what to do
        └── PipelineError   the pipeline declaration is invalid; names the operator or topic

Every package's ``exceptions.py`` derives from these two branches, so a caller
can always tell whether to retry.
"""

from __future__ import annotations

__all__ = ["ConfigError", "FatalError", "PipelineError", "RetryableError", "SluicegateError"]


class SluicegateError(Exception):
    """Root of every error sluicegate raises on purpose."""


class RetryableError(SluicegateError):
    """The operation failed for a reason that may pass; retry with backoff."""


class FatalError(SluicegateError):
    """The operation cannot succeed as asked; the message says what to do."""


class ConfigError(FatalError):
    """A configuration value is invalid or missing."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting}: {problem}")
        self.setting = setting
        self.problem = problem


class PipelineError(FatalError):
    """The pipeline declaration is invalid; ``culprit`` names the operator or topic at fault."""

    def __init__(self, culprit: str, problem: str) -> None:
        super().__init__(f"{culprit}: {problem}")
        self.culprit = culprit
        self.problem = problem

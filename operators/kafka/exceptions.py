"""Errors reaching Kafka::

SluicegateError
├── RetryableError
│   └── KafkaUnreachableError       no connection, or no metadata yet: try again later
└── FatalError
    └── KafkaAuthenticationError    the cluster refused our credentials or TLS: a person
                                    must fix the settings (retrying cannot help)
"""

from __future__ import annotations

from sluicegate.operators.exceptions import FatalError, RetryableError

__all__ = ["KafkaAuthenticationError", "KafkaUnreachableError"]


class KafkaUnreachableError(RetryableError):
    """``target`` did not answer: ``reason`` says how it failed."""

    def __init__(self, target: str, reason: str) -> None:
        super().__init__(f"cannot reach Kafka at {target}: {reason}")
        self.target, self.reason = target, reason


class KafkaAuthenticationError(FatalError):
    """``target`` refused the connection's security: wrong password, unknown mechanism,
    untrusted certificate. ``what_to_do`` names the settings to check."""

    def __init__(self, target: str, reason: str, what_to_do: str) -> None:
        super().__init__(f"Kafka at {target} refused to authenticate us: {reason}. {what_to_do}")
        self.target, self.reason, self.what_to_do = target, reason, what_to_do

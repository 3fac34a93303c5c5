"""Reaching Kafka: `KafkaSettings` (bootstrap and security) and the client factories built on
them (`operators.kafka.clients`)."""

from sluicegate.operators.kafka.settings import (
    KafkaLike,
    KafkaSettings,
    SaslMechanism,
    SecurityProtocol,
)

__all__ = ["KafkaLike", "KafkaSettings", "SaslMechanism", "SecurityProtocol"]

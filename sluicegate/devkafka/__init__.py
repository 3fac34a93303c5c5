"""The development Kafka broker: official Apache Kafka jars run as a local KRaft node."""

from sluicegate.devkafka.broker import DevBroker, free_port, wait_until_ready
from sluicegate.devkafka.jars import KAFKA_VERSION, ensure_jars

__all__ = ["KAFKA_VERSION", "DevBroker", "ensure_jars", "free_port", "wait_until_ready"]

"""Fixtures shared by every test layer.

The Kafka broker is started lazily, once per test session, only when a test asks for
``kafka_bootstrap``: unit tests never start it. Set ``SLUICEGATE_KAFKA_BOOTSTRAP`` to run the
integration tests against a broker you already have.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from hypothesis import HealthCheck, settings

from sluicegate.devkafka import DevBroker

TopicFactory = Callable[..., Awaitable[str]]

# Machines are noisy (CI has two cores, and a broker and workers may be busy on them): a
# property test fails on what it finds, never on how long one example took.
settings.register_profile("sluicegate", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("sluicegate")


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap address of a real Kafka broker for the whole test session."""
    given = os.environ.get("SLUICEGATE_KAFKA_BOOTSTRAP")
    if given:
        yield given
        return
    broker = DevBroker(port=0)
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture
async def new_topic(kafka_bootstrap: str) -> AsyncIterator[TopicFactory]:
    """Factory: ``await new_topic(partitions=3)`` creates a topic of this test's own."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()

    async def create(partitions: int = 1, *, hint: str = "t", **configs: str) -> str:
        name = f"{hint}-{uuid.uuid4().hex[:12]}"
        topic = NewTopic(name, partitions, 1, topic_configs=dict(configs))
        await admin.create_topics([topic])
        return name

    try:
        yield create
    finally:
        await admin.close()


@pytest.fixture
def schemathesis_node_id(request: pytest.FixtureRequest) -> None:
    """Work around schemathesis 4.32 on pytest 9: its lazy schemas read and rewrite
    ``Node._nodeid``, which pytest 9 no longer has. Use it in modules with schemathesis tests:
    ``pytestmark = pytest.mark.usefixtures("schemathesis_node_id")``."""
    request.node._nodeid = request.node.nodeid

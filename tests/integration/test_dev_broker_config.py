"""A DevBroker started with a chosen controller port listens there, and with
``auto_create_topics`` producing to a topic nobody created works (the README's kcat example):
a broker of its own, as configured."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from sluicegate.devkafka import DevBroker, free_port


@pytest.fixture(scope="module")
def own_broker() -> Iterator[DevBroker]:
    broker = DevBroker(port=0, controller_port=free_port(), auto_create_topics=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def test_the_controller_listens_on_the_chosen_port(own_broker: DevBroker) -> None:
    assert own_broker.controller_port is not None
    with socket.create_connection(("127.0.0.1", own_broker.controller_port), timeout=5):
        pass


async def test_producing_to_a_new_topic_creates_it(own_broker: DevBroker) -> None:
    topic = f"new-{uuid.uuid4().hex[:12]}"
    producer = AIOKafkaProducer(bootstrap_servers=own_broker.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"hello", key=b"k")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=own_broker.bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(r.value for r in batch if r.value is not None)
        assert got == [b"hello"]
    finally:
        await consumer.stop()

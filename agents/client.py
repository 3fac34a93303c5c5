"""Writing to an agent's input topics from outside: submit tasks, approve or reject calls,
roll runs back.

Records are keyed by ``run_id``. Any partition will do: the agent's routing operator
(`agents.routing`) re-keys tasks and decisions by the ``run_id`` in their value, so a decision
reaches its run whatever client and partitioner wrote the task. These functions write
unchecked; ``sluicegate approve|reject`` and the HTTP routes first check the run's status
(`agents.run_directory`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable

from aiokafka import AIOKafkaProducer

from agents.messages import ApprovalDecision, RollbackRun, TaskRequest
from operators.kafka import KafkaLike
from operators.kafka import clients as kafka_clients

__all__ = ["send_command", "send_decision", "submit_tasks"]


async def submit_tasks(bootstrap: KafkaLike, topic: str, tasks: Iterable[TaskRequest]) -> int:
    """Write ``tasks`` to the tasks ``topic``; returns how many."""
    count = 0
    async with _producer(bootstrap) as producer:
        for task in tasks:
            value = task.encode()
            await producer.send(topic, value, key=task.run_id.encode())
            count += 1
        await producer.flush()
    return count


async def send_decision(bootstrap: KafkaLike, topic: str, decision: ApprovalDecision) -> None:
    """Write one approval decision to the approvals ``topic`` and wait until it is stored."""
    await send_command(bootstrap, topic, decision)


async def send_command(
    bootstrap: KafkaLike, topic: str, command: ApprovalDecision | RollbackRun
) -> None:
    """Write one command about a run to the approvals ``topic``; wait until it is stored."""
    async with _producer(bootstrap) as producer:
        value = command.model_dump_json().encode()
        await producer.send_and_wait(topic, value, key=command.run_id.encode())


@contextlib.asynccontextmanager
async def _producer(bootstrap: KafkaLike) -> AsyncIterator[AIOKafkaProducer]:
    producer = kafka_clients.producer(bootstrap, enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()

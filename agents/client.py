"""Writing to an agent's input topics from outside: submit tasks, approve or reject calls,
fork or roll runs back.

Records are keyed by ``run_id``. Any partition will do: the agent's routing operator
(`agents.routing`) re-keys tasks and decisions by the ``run_id`` in their value, so a decision
reaches its run whatever client and partitioner wrote the task. These functions write
unchecked; ``sluicegate approve|reject`` and the HTTP routes first check the run's status
(`agents.runs.directory`), as `request_rollback` does; `request_fork` reads the parent's
history first.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable

from aiokafka import AIOKafkaProducer

from sluicegate.agents.fork.patch import ForkPatch
from sluicegate.agents.fork.request import fork_request, new_fork_id
from sluicegate.agents.history.events import RunHistory
from sluicegate.agents.messages import (
    ApprovalDecision,
    EraseMemory,
    ForkRun,
    RollbackRun,
    RunCommand,
    TaskRequest,
)
from sluicegate.agents.runs.directory import RunDirectory
from sluicegate.operators.kafka import KafkaLike, clients as kafka_clients

__all__ = [
    "request_fork",
    "request_rollback",
    "send_command",
    "send_decision",
    "send_fork",
    "submit_tasks",
]


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


async def send_command(bootstrap: KafkaLike, topic: str, command: RunCommand) -> None:
    """Write one command about a run to the approvals ``topic``, keyed by its ``run_id`` (a
    fork's is the NEW run's; an `EraseMemory` by its memory key); wait until it is stored."""
    async with _producer(bootstrap) as producer:
        value = command.model_dump_json().encode()
        key = command.key if isinstance(command, EraseMemory) else command.run_id
        await producer.send_and_wait(topic, value, key=key.encode())


async def send_fork(bootstrap: KafkaLike, topic: str, fork: ForkRun) -> None:
    """Write one fork command to the approvals ``topic`` (keyed by the NEW run's id)."""
    await send_command(bootstrap, topic, fork)


async def request_fork(
    history: RunHistory,
    approvals: str,
    parent_run_id: str,
    from_step: int,
    *,
    patch: ForkPatch | None = None,
    recorded_only: bool = False,
    run_id: str | None = None,
    by: str = "unknown",
) -> ForkRun:
    """Fork ``parent_run_id`` after ``from_step``: read its events from ``history``, build the
    command (`agents.fork.request.fork_request`) and write it to ``approvals``.

    Raises:
        UnknownRunError, EventsUnavailableError, HistoryError, ForkRefusedError: nothing was
            written.
    """
    events = await history.events(parent_run_id)
    fork = fork_request(
        events,
        from_step,
        run_id=run_id or new_fork_id(parent_run_id),
        patch=patch,
        recorded_only=recorded_only,
        by=by,
    )
    await send_fork(history.bootstrap, approvals, fork)
    return fork


async def request_rollback(
    directory: RunDirectory, approvals: str, command: RollbackRun, *, force: bool = False
) -> None:
    """Ask for ``command``: check with ``directory`` that the run exists and is not being
    rolled back already (`RunDirectory.check_rollback`; ``force``: no check), then write it
    to ``approvals``. The one path of ``sluicegate runs rollback``, ``POST .../rollback`` and
    the console.

    Raises:
        UnknownRunError, RollingBackError, EventsUnavailableError: nothing was written.
    """
    if not force:
        await directory.check_rollback(command.run_id)
    await send_command(directory.bootstrap, approvals, command)


@contextlib.asynccontextmanager
async def _producer(bootstrap: KafkaLike) -> AsyncIterator[AIOKafkaProducer]:
    producer = kafka_clients.producer(bootstrap, enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()

"""The routing stage in front of an agent: tasks and decisions re-keyed by run, whatever their
producer.

A run lives in the state of one partition, so every record about it must reach that partition.
The outside world writes tasks and approval decisions with whatever client it has, and clients
disagree on where a key goes: Java clients (and sluicegate) hash it with murmur2, librdkafka
clients (kcat, confluent-kafka, rdkafka) with CRC32, and a producer may pick a partition
itself. A decision written by sluicegate for a task written by kcat used to land in another
partition than its run, and was dead-lettered as an unknown run.

So `add_agent` puts this stateless operator in front of the agent, as Kafka Streams puts a
repartition topic before a keyed aggregation: it reads the agent's task feeds (`TaskFeed`: a
source, or a topic an operator or another agent writes) and its ``approvals`` source, whatever
partition a record is in; maps a feed record to its task with the feed's ``task_of`` (by
default the value is a `TaskRequest` document), validates a command (a decision, a `ForkRun`
or a `RollbackRun`: `agents.messages.parse_command`), and emits each keyed by its ``run_id``
(from the value, not the record key; a fork's is the new run's) to two topics of the pipeline,
``sluicegate.<pipeline>.<agent>.tasks-by-run`` and ``.approvals-by-run``. The engine's
partitioner places both records of a run in the same partition number, so the agent subtask
that holds a run also reads its decisions. Being topics between operators, they are
exactly-once under checkpoints like any other (records are stamped with attempt and interval,
a restore skips orphans of an older attempt); routing adds no checkpoint of latency.

A record that does not validate, or whose ``task_of`` raises, is dead-lettered here, with the
coordinates of the record the producer wrote; a record ``task_of`` maps to None is skipped.

**An agent with memory** (`agents.memory.config.Memory`, ``docs/memory.md``) keeps a key's
memory in the state of one partition, so every run of the key must be there: a task (and a
fork) with a memory key goes to ``murmur2(key) mod partitions`` of ``tasks-by-run``, still
keyed by its run id; a task without one goes by its run id as above. A command that names only
a run (a decision, a rollback) cannot know that partition, so it is written to EVERY partition
of ``approvals-by-run``: the subtask holding the run applies it, the others find no such run
and ignore it. An `EraseMemory` goes to its key's partition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluicegate.agents.declaration import TaskOf
from sluicegate.agents.memory.config import Memory
from sluicegate.agents.messages import EraseMemory, ForkRun, TaskRequest, parse_command
from sluicegate.operators.contract import Context, Record
from sluicegate.operators.runtime.partitioner import partition_for

__all__ = ["RunRouter", "memory_partition", "routed_topic"]


def routed_topic(pipeline: str, agent: str, source: str) -> str:
    """The pipeline's topic holding ``source`` (``tasks`` or ``approvals``) keyed by run."""
    return f"sluicegate.{pipeline}.{agent}.{source}-by-run"


@dataclass(frozen=True, slots=True)
class RunRouter:
    """The routing stage's process function: a feed record in, its task out; a command (a
    decision, a rollback) in, the same value out; each keyed by ``run_id`` to the routed topic
    of its kind."""

    feeds: Mapping[str, TaskOf]
    """Feed topic -> the mapping of its records to tasks."""
    approvals: str
    routed_tasks: str
    routed_approvals: str
    memory: Memory | None = None
    partitions: int = 1
    """Of the routed topics (with ``memory``: where a key's runs go)."""

    def __call__(self, record: Record, ctx: Context) -> None:
        if record.topic == self.approvals:
            self._command(record, ctx)
            return
        task_of = self.feeds.get(record.topic)
        if task_of is None:
            raise ValueError(f"the router of {self.approvals} does not read {record.topic}")
        task = task_of(record)
        if task is None:
            return
        if not isinstance(task, TaskRequest):
            raise TypeError(f"task_of of {record.topic} returned {type(task).__name__}")
        ctx.emit(
            self.routed_tasks, task.encode(), key=task.run_id.encode(), partition=self._place(task)
        )

    def _command(self, record: Record, ctx: Context) -> None:
        command = parse_command(record.value)
        if isinstance(command, EraseMemory):
            if self.memory is None:
                raise ValueError(f"erase_memory: the agent of {self.approvals} has no memory")
            where = memory_partition(command.key, self.partitions)
            ctx.emit(self.routed_approvals, record.value, key=command.key.encode(), partition=where)
            return
        run_id = command.run_id.encode()  # a fork's: the new run's
        if self.memory is None:
            ctx.emit(self.routed_approvals, record.value, key=run_id)
        elif isinstance(command, ForkRun):
            fork = TaskRequest(run_id=command.run_id, goal=command.goal, metadata=command.metadata)
            ctx.emit(self.routed_approvals, record.value, key=run_id, partition=self._place(fork))
        else:  # about a run whose partition only its holder knows: to every one
            for partition in range(self.partitions):
                ctx.emit(self.routed_approvals, record.value, key=run_id, partition=partition)

    def _place(self, task: TaskRequest) -> int | None:
        """The partition of ``task``'s memory key; None (by run id) without one."""
        key = None if self.memory is None else self.memory.key_of(task)
        return None if key is None else memory_partition(key, self.partitions)


def memory_partition(key: str, partitions: int) -> int:
    """The partition holding memory key ``key`` (murmur2, as for record keys)."""
    return partition_for(key.encode(), partitions, input_partition=0)

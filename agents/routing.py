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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluicegate.agents.declaration import TaskOf
from sluicegate.agents.messages import TaskRequest, parse_command
from sluicegate.operators.contract import Context, Record

__all__ = ["RunRouter", "routed_topic"]


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

    def __call__(self, record: Record, ctx: Context) -> None:
        if record.topic == self.approvals:
            run_id = parse_command(record.value).run_id  # a fork's: the new run's
            ctx.emit(self.routed_approvals, record.value, key=run_id.encode())
            return
        task_of = self.feeds.get(record.topic)
        if task_of is None:
            raise ValueError(f"the router of {self.approvals} does not read {record.topic}")
        task = task_of(record)
        if task is None:
            return
        if not isinstance(task, TaskRequest):
            raise TypeError(f"task_of of {record.topic} returned {type(task).__name__}")
        ctx.emit(self.routed_tasks, task.encode(), key=task.run_id.encode())

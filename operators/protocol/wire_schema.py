"""The JSON shape of every control record, validated from its bytes in one pass.

`operators.protocol.wire.decode_message` validates a record's bytes against `CONTROL_RECORD`,
a union of one pydantic model per record type chosen by its ``type`` field, then turns the
model into the protocol's message (`operators.protocol.messages`) without validating again.
What a model accepts is what the decoder accepted when it parsed with `json.loads` and then
validated the parsed object (until 2026-12, measured in docs/performance.md, "The coordinator
at scale"; ``tests/unit/operators/protocol/test_wire_decoding.py`` holds that decoder and
compares the two on every record it generates):

1. a JSON object with ``type`` one of the types below and ``schema_version`` 1, no other
   field than the message's own (``extra="forbid"``);
2. every field of the type it declares, lax as pydantic is lax (JSON arrays become tuples);
3. every number finite and not negative (`Count`, `Seconds`), also inside ack positions and
   heartbeat counts; the state handle's numbers have their own bounds (`StateHandle`).

The encoder (`operators.protocol.wire.encode_message`) does not use these models: the bytes
it writes are those it always wrote.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.protocol.messages import (
    Assign,
    CheckpointAborted,
    CheckpointAck,
    CheckpointCompleted,
    CheckpointDecline,
    Heartbeat,
    Retire,
    Retired,
    StateHandle,
    StopSubtasks,
    SubtaskFailed,
    TriggerCheckpoint,
)

__all__ = ["CONTROL_RECORD", "ControlRecord"]

Count = Annotated[int, Field(ge=0)]
"""An id, attempt, offset, partition, slot count or counter: never negative."""
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1]


class AckRecord(_Record):
    type: Literal["ack"]
    subtask: str
    checkpoint_id: Count
    attempt: Count
    positions: list[tuple[str, Count, Count]]
    """``[topic, partition, R_p]`` per input partition."""
    handle: StateHandle
    alignment_seconds: Seconds = 0.0
    sync_seconds: Seconds = 0.0
    async_seconds: Seconds = 0.0

    def message(self) -> CheckpointAck:
        return CheckpointAck(
            self.subtask,
            self.checkpoint_id,
            self.attempt,
            {TopicPartition(topic, p): offset for topic, p, offset in self.positions},
            self.handle,
            self.alignment_seconds,
            self.sync_seconds,
            self.async_seconds,
        )


class HeartbeatRecord(_Record):
    type: Literal["heartbeat"]
    worker_id: str
    incarnation: str
    slots: Count
    attempt: Count
    subtasks: tuple[str, ...]
    counts: dict[str, dict[str, dict[str, Count]]] = {}
    """Absent in the heartbeats of workers older than it (schema version 1 still)."""

    def message(self) -> Heartbeat:
        return Heartbeat(
            self.worker_id, self.incarnation, self.slots, self.attempt, self.subtasks, self.counts
        )


class AssignRecord(_Record):
    type: Literal["assign"]
    attempt: Count
    restore_from: Count | None
    next_checkpoint_id: Count
    assignment: dict[str, tuple[str, ...]]

    def message(self) -> Assign:
        return Assign(self.attempt, self.restore_from, self.next_checkpoint_id, self.assignment)


class DeclineRecord(_Record):
    type: Literal["decline"]
    subtask: str
    checkpoint_id: Count
    attempt: Count
    reason: str

    def message(self) -> CheckpointDecline:
        return CheckpointDecline(self.subtask, self.checkpoint_id, self.attempt, self.reason)


class FailedRecord(_Record):
    type: Literal["failed"]
    subtask: str
    attempt: Count
    reason: str
    corrupt_checkpoint: Count | None = None

    def message(self) -> SubtaskFailed:
        return SubtaskFailed(self.subtask, self.attempt, self.reason, self.corrupt_checkpoint)


class TriggerRecord(_Record):
    type: Literal["trigger"]
    checkpoint_id: Count
    attempt: Count

    def message(self) -> TriggerCheckpoint:
        return TriggerCheckpoint(self.checkpoint_id, self.attempt)


class CompletedRecord(_Record):
    type: Literal["completed"]
    checkpoint_id: Count
    attempt: Count

    def message(self) -> CheckpointCompleted:
        return CheckpointCompleted(self.checkpoint_id, self.attempt)


class AbortedRecord(_Record):
    type: Literal["aborted"]
    checkpoint_id: Count
    attempt: Count
    reason: str

    def message(self) -> CheckpointAborted:
        return CheckpointAborted(self.checkpoint_id, self.attempt, self.reason)


class StopRecord(_Record):
    type: Literal["stop"]
    attempt: Count

    def message(self) -> StopSubtasks:
        return StopSubtasks(self.attempt)


class RetireRecord(_Record):
    type: Literal["retire"]
    attempt: Count

    def message(self) -> Retire:
        return Retire(self.attempt)


class RetiredRecord(_Record):
    type: Literal["retired"]
    worker_id: str
    attempt: Count

    def message(self) -> Retired:
        return Retired(self.worker_id, self.attempt)


ControlRecord = Annotated[
    AckRecord
    | HeartbeatRecord
    | AssignRecord
    | DeclineRecord
    | FailedRecord
    | TriggerRecord
    | CompletedRecord
    | AbortedRecord
    | StopRecord
    | RetireRecord
    | RetiredRecord,
    Field(discriminator="type"),
]
CONTROL_RECORD: TypeAdapter[ControlRecord] = TypeAdapter(ControlRecord)
"""Validates a control record's JSON bytes (`TypeAdapter.validate_json`) into its model, whose
``message()`` is the protocol message: `FromWorker` or `ToWorker`."""

"""Control messages as JSON records on Kafka: the coordinator and workers talk only through
Kafka, so a worker needs nothing but a broker (and checkpoint storage).

Two single-partition topics per pipeline: ``sluicegate.<pipeline>.to-workers`` (assignments,
completions, aborts, stops, retires) and ``sluicegate.<pipeline>.to-coordinator``
(heartbeats, acks, declines, failures, retired answers). Every record is one JSON object
with ``type`` and ``schema_version``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from operators.protocol.channels import TopicPartition
from operators.protocol.messages import (
    Assign,
    CheckpointAborted,
    CheckpointAck,
    CheckpointCompleted,
    CheckpointDecline,
    FromWorker,
    Heartbeat,
    Retire,
    Retired,
    StateHandle,
    StopSubtasks,
    SubtaskFailed,
    ToWorker,
    TriggerCheckpoint,
)

__all__ = [
    "WIRE_SCHEMA_VERSION",
    "decode_message",
    "encode_message",
    "to_coordinator_topic",
    "to_workers_topic",
]

WIRE_SCHEMA_VERSION = 1


def to_workers_topic(pipeline: str) -> str:
    return f"sluicegate.{pipeline}.to-workers"


def to_coordinator_topic(pipeline: str) -> str:
    return f"sluicegate.{pipeline}.to-coordinator"


def encode_message(message: FromWorker | ToWorker) -> bytes:
    """The JSON record of ``message``."""
    body: dict[str, Any]
    match message:
        case CheckpointAck():
            body = {
                "type": "ack",
                "subtask": message.subtask,
                "checkpoint_id": message.checkpoint_id,
                "attempt": message.attempt,
                "positions": [[tp.topic, tp.partition, o] for tp, o in message.positions.items()],
                "handle": message.handle.model_dump(mode="json"),
                "alignment_seconds": message.alignment_seconds,
                "sync_seconds": message.sync_seconds,
                "async_seconds": message.async_seconds,
            }
        case Assign():
            body = {
                "type": "assign",
                "attempt": message.attempt,
                "restore_from": message.restore_from,
                "next_checkpoint_id": message.next_checkpoint_id,
                "assignment": {w: list(s) for w, s in message.assignment.items()},
            }
        case Heartbeat():
            body = {"type": "heartbeat", **_fields(message)}
            body["subtasks"] = list(message.subtasks)
        case CheckpointDecline():
            body = {"type": "decline", **_fields(message)}
        case SubtaskFailed():
            body = {"type": "failed", **_fields(message)}
        case TriggerCheckpoint():
            body = {"type": "trigger", **_fields(message)}
        case CheckpointCompleted():
            body = {"type": "completed", **_fields(message)}
        case CheckpointAborted():
            body = {"type": "aborted", **_fields(message)}
        case StopSubtasks():
            body = {"type": "stop", **_fields(message)}
        case Retire():
            body = {"type": "retire", **_fields(message)}
        case Retired():
            body = {"type": "retired", **_fields(message)}
    body["schema_version"] = WIRE_SCHEMA_VERSION
    return json.dumps(body, separators=(",", ":")).encode()


def decode_message(data: bytes) -> FromWorker | ToWorker:
    """Inverse of `encode_message`; raises ValueError on anything else."""
    body = json.loads(data)
    if body.pop("schema_version", None) != WIRE_SCHEMA_VERSION:
        raise ValueError(f"control message of another schema version: {data[:200]!r}")
    kind = body.pop("type")
    match kind:
        case "ack":
            positions = {TopicPartition(t, p): o for t, p, o in body.pop("positions")}
            handle = StateHandle.model_validate(body.pop("handle"))
            return CheckpointAck(positions=positions, handle=handle, **body)
        case "assign":
            assignment = {w: tuple(s) for w, s in body.pop("assignment").items()}
            return Assign(assignment=assignment, **body)
        case "heartbeat":  # "counts" may be absent: it came later in schema version 1
            return Heartbeat(subtasks=tuple(body.pop("subtasks")), **body)
        case "decline":
            return CheckpointDecline(**body)
        case "failed":
            return SubtaskFailed(**body)
        case "trigger":
            return TriggerCheckpoint(**body)
        case "completed":
            return CheckpointCompleted(**body)
        case "aborted":
            return CheckpointAborted(**body)
        case "stop":
            return StopSubtasks(**body)
        case "retire":
            return Retire(**body)
        case "retired":
            return Retired(**body)
    raise ValueError(f"unknown control message type {kind!r}")


def _fields(
    message: Heartbeat | CheckpointDecline | SubtaskFailed | Retired | ToWorker,
) -> dict[str, Any]:
    return dataclasses.asdict(message)

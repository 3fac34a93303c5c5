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
import math
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.protocol.messages import (
    Assign,
    CheckpointAborted,
    CheckpointAck,
    CheckpointCompleted,
    CheckpointDecline,
    FromWorker,
    Heartbeat,
    Retire,
    Retired,
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
    """Inverse of `encode_message`; raises ValueError on anything else.

    A control record is read as hostile (anyone allowed to write the topic can write one): it
    must be a JSON object of a known type and schema version whose every field has the
    declared type (`pydantic`, lax: JSON lists become tuples), and every number in it is
    finite and not negative. A record that passed used to reach the coordinator's loop with,
    say, a string for an attempt, and fail it there."""
    body = json.loads(data)
    if not isinstance(body, dict):
        raise ValueError(f"control message is not a JSON object: {data[:200]!r}")
    if body.pop("schema_version", None) != WIRE_SCHEMA_VERSION:
        raise ValueError(f"control message of another schema version: {data[:200]!r}")
    kind = body.pop("type", None)
    cls = _TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown control message type {kind!r}")
    if cls is CheckpointAck:
        positions = body.get("positions")
        if not isinstance(positions, list) or not all(
            isinstance(p, list) and len(p) == 3 for p in positions
        ):
            raise ValueError(
                f"ack positions are not [topic, partition, offset] triples: {data[:200]!r}"
            )
        body["positions"] = {TopicPartition(t, p): o for t, p, o in positions}
    try:
        message = _ADAPTERS[cls].validate_python(body, extra="forbid")
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"control message {kind!r} with invalid fields: {problems}") from None
    _check_numbers(kind, message)
    return message


_TYPES: dict[str, type[FromWorker | ToWorker]] = {
    "ack": CheckpointAck,
    "assign": Assign,
    "heartbeat": Heartbeat,  # "counts" may be absent: it came later in schema version 1
    "decline": CheckpointDecline,
    "failed": SubtaskFailed,
    "trigger": TriggerCheckpoint,
    "completed": CheckpointCompleted,
    "aborted": CheckpointAborted,
    "stop": StopSubtasks,
    "retire": Retire,
    "retired": Retired,
}
_ADAPTERS: dict[type[FromWorker | ToWorker], TypeAdapter[FromWorker | ToWorker]] = {
    cls: TypeAdapter(cls) for cls in _TYPES.values()
}


def _check_numbers(kind: str, message: FromWorker | ToWorker) -> None:
    """Every number of ``message`` (its fields, positions and counts) finite and >= 0.

    A loop over a stack rather than nested generators, and each class's field names looked up
    once: the coordinator decodes an ack per subtask per checkpoint, and this check was a
    quarter of that decoding."""
    for name in _FIELD_NAMES[type(message)]:
        stack: list[object] = [getattr(message, name)]
        while stack:
            value = stack.pop()
            if isinstance(value, bool):
                continue
            if isinstance(value, int | float):
                if not (math.isfinite(value) and value >= 0):
                    raise ValueError(f"control message {kind!r}: {name} holds {value!r}")
            elif isinstance(value, Mapping):
                for key, item in value.items():
                    stack.append(key)
                    stack.append(item)
            elif isinstance(value, TopicPartition):
                stack.append(value.partition)


_FIELD_NAMES: dict[type[FromWorker | ToWorker], tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in _TYPES.values()
}


def _fields(
    message: Heartbeat | CheckpointDecline | SubtaskFailed | Retired | ToWorker,
) -> dict[str, Any]:
    return dataclasses.asdict(message)

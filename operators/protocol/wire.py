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

from pydantic import ValidationError

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
from sluicegate.operators.protocol.wire_schema import CONTROL_RECORD

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
    say, a string for an attempt, and fail it there.

    The bytes are validated in one pass (`operators.protocol.wire_schema`), not parsed into
    Python objects and then validated: the coordinator decodes an ack per subtask per
    checkpoint, and the two passes were most of its CPU at thousands of subtasks."""
    try:
        record = CONTROL_RECORD.validate_json(data)
    except ValidationError as exc:
        raise _refusal(data, exc) from None
    return record.message()


def _refusal(data: bytes, exc: ValidationError) -> ValueError:
    """The error of a record that did not validate, as the decoder worded it before
    `wire_schema` (a schema version first, then an unknown type, then the fields)."""
    errors = exc.errors(include_url=False)
    if any(e["loc"][1:] == ("schema_version",) for e in errors):
        return ValueError(f"control message of another schema version: {data[:200]!r}")
    first = errors[0]
    if first["type"] in {"union_tag_invalid", "union_tag_not_found"}:
        kind = first.get("ctx", {}).get("tag")
        return ValueError(f"unknown control message type {kind!r}: {data[:200]!r}")
    if first["type"] in {"json_invalid", "model_attributes_type", "model_type"} or not first["loc"]:
        return ValueError(f"control message is not a JSON object: {data[:200]!r}")
    kind = first["loc"][0]
    problems = "; ".join(f"{'.'.join(map(str, e['loc'][1:]))}: {e['msg']}" for e in errors)
    return ValueError(f"control message {kind!r} with invalid fields: {problems}")


def _fields(
    message: Heartbeat | CheckpointDecline | SubtaskFailed | Retired | ToWorker,
) -> dict[str, Any]:
    return dataclasses.asdict(message)

"""Control messages survive the trip through their JSON records unchanged."""

from __future__ import annotations

import pytest

from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.protocol.messages import (
    Assign,
    CheckpointAborted,
    CheckpointAck,
    CheckpointCompleted,
    CheckpointDecline,
    FromWorker,
    Heartbeat,
    StopSubtasks,
    SubtaskFailed,
    ToWorker,
)
from sluicegate.operators.protocol.wire import decode_message, encode_message
from tests.helpers import fake_state_handle

MESSAGES: list[FromWorker | ToWorker] = [
    CheckpointAck(
        "counter#1",
        7,
        3,
        {TopicPartition("words", 2): 41, TopicPartition("words", 3): 0},
        fake_state_handle("shared/abc", 7),
        alignment_seconds=0.25,
        sync_seconds=0.01,
        async_seconds=1.5,
    ),
    CheckpointDecline("tokenizer#0", 8, 3, "barrier buffer over its bound"),
    SubtaskFailed("tokenizer#0", 3, "RuntimeError('x')"),
    Heartbeat("w1", "f00d", 4, 3, ("counter#0", "tokenizer#1")),
    Heartbeat("w2", "beef", 1, 3, ("desk#0",), {"desk#0": {"runs": {"running": 2, "done": 9}}}),
    Assign(3, 6, 9, {"w1": ("counter#0",), "w2": ()}),
    Assign(1, None, 1, {}),
    CheckpointCompleted(7, 3),
    CheckpointAborted(8, 3, "timed out waiting for counter#1"),
    StopSubtasks(4),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip(message: FromWorker | ToWorker) -> None:
    assert decode_message(encode_message(message)) == message


def test_a_heartbeat_without_counts_decodes_with_none() -> None:
    old = b'{"type":"heartbeat","worker_id":"w","incarnation":"i","slots":1,"attempt":2,'
    old += b'"subtasks":["a#0"],"schema_version":1}'
    assert decode_message(old) == Heartbeat("w", "i", 1, 2, ("a#0",))


def test_refuses_another_schema_version_and_unknown_types() -> None:
    with pytest.raises(ValueError, match="schema version"):
        decode_message(b'{"type": "completed", "checkpoint_id": 1, "attempt": 1}')
    with pytest.raises(ValueError, match="unknown control message type"):
        decode_message(b'{"type": "reboot", "schema_version": 1}')


HEARTBEAT = '"type":"heartbeat","schema_version":1,"worker_id":"w","incarnation":"i"'
ACK = (
    '"type":"ack","schema_version":1,"subtask":"a#0","checkpoint_id":3,"attempt":1,'
    '"handle":{"checkpoint_id":3,"files":[],"full_bytes":0,"uploaded_bytes":0}'
)


HOSTILE = [
    b"[]",
    b'"heartbeat"',
    b"1",
    b"null",
    b'{"schema_version":1,"attempt":1}',
    b'{"type":["trigger"],"schema_version":1}',
    ("{" + HEARTBEAT + ',"slots":1,"attempt":"x","subtasks":[]}').encode(),
    ("{" + HEARTBEAT + ',"slots":-1,"attempt":1,"subtasks":[]}').encode(),
    ("{" + HEARTBEAT + ',"slots":1,"attempt":1,"subtasks":"a#0"}').encode(),
    (
        "{" + HEARTBEAT + ',"slots":1,"attempt":1,"subtasks":[],"counts":{"a":{"b":{"c":-1}}}}'
    ).encode(),
    ("{" + HEARTBEAT + ',"slots":1,"attempt":1,"subtasks":[],"evil":true}').encode(),
    ("{" + ACK + ',"positions":[["t",0,-5]]}').encode(),
    ("{" + ACK + ',"positions":[["t",-1,5]]}').encode(),
    ("{" + ACK + ',"positions":5}').encode(),
    ("{" + ACK + ',"positions":[[1]]}').encode(),
    ("{" + ACK + ',"positions":[],"alignment_seconds":NaN}').encode(),
    b'{"type":"stop","schema_version":1,"attempt":1e400}',
    b'{"type":"failed","schema_version":1,"subtask":"a#0","attempt":1,"reason":"x","corrupt_checkpoint":-2}',
    b'{"type":"assign","schema_version":1,"attempt":1,"restore_from":null,"next_checkpoint_id":1,"assignment":{"w1":[7]}}',
    b'{"type":"trigger","schema_version":1,"checkpoint_id":{"$gt":0},"attempt":1}',
]
"""Control records every decoder must refuse (also written with kcat in the end-to-end test)."""


@pytest.mark.parametrize("record", HOSTILE)
def test_a_hostile_control_record_is_refused_with_a_value_error(record: bytes) -> None:
    """The control link skips what raises ValueError (logged); anything else a record could
    make the decoder raise, or a wrong type it let through, would fail the coordinator."""
    with pytest.raises(ValueError):
        decode_message(record)

"""The one-pass decoder of control records (`operators.protocol.wire_schema`) accepts and
refuses exactly what the decoder before it did, and decodes to the same messages.

`decode_before` is that decoder as it was (until 2026-12): `json.loads`, then pydantic's
validation of the parsed object per message type, then a walk over every number. Records are
generated valid (every message type, encoded by `encode_message`, whose bytes did not change)
and then damaged (a field dropped, added, or given any JSON value), and both decoders must
agree on each: the same message, or both a ValueError."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

import pydantic
import pytest
from hypothesis import given, strategies as st
from pydantic import TypeAdapter, ValidationError

from sluicegate.operators.protocol import wire_schema
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
    SnapshotFile,
    StateHandle,
    StopSubtasks,
    SubtaskFailed,
    ToWorker,
    TriggerCheckpoint,
)
from sluicegate.operators.protocol.wire import decode_message, encode_message

# -- the decoder before, kept as the reference ------------------------------------------------

_TYPES: dict[str, type[FromWorker | ToWorker]] = {
    "ack": CheckpointAck,
    "assign": Assign,
    "heartbeat": Heartbeat,
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


def decode_before(data: bytes) -> FromWorker | ToWorker:
    body = json.loads(data)
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    if body.pop("schema_version", None) != 1:
        raise ValueError("another schema version")
    kind = body.pop("type", None)
    cls = _TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError("unknown control message type")
    if cls is CheckpointAck:
        positions = body.get("positions")
        if not isinstance(positions, list) or not all(
            isinstance(p, list) and len(p) == 3 for p in positions
        ):
            raise ValueError("ack positions are not triples")
        body["positions"] = {TopicPartition(t, p): o for t, p, o in positions}
    try:
        message = _ADAPTERS[cls].validate_python(body, extra="forbid")
    except ValidationError as exc:
        raise ValueError(str(exc)) from None
    for field in dataclasses.fields(message):
        stack: list[object] = [getattr(message, field.name)]
        while stack:
            value = stack.pop()
            if isinstance(value, bool):
                continue
            if isinstance(value, int | float):
                if not (math.isfinite(value) and value >= 0):
                    raise ValueError(f"{field.name} holds {value!r}")
            elif isinstance(value, Mapping):
                for key, item in value.items():
                    stack.append(key)
                    stack.append(item)
            elif isinstance(value, TopicPartition):
                stack.append(value.partition)
    return message


def outcome(decode: Any, data: bytes) -> object:
    """What ``decode`` makes of ``data``: the message, or ValueError if it refused it (the
    decoder before also raised TypeError on some records: the control link skips both)."""
    refusals = (ValueError, TypeError) if decode is decode_before else (ValueError,)
    try:
        return decode(data)
    except refusals:
        return ValueError


def well_typed(message: object) -> bool:
    """Whether an ack's positions hold a string topic and an integer partition: the decoder
    before let anything through there (a `TopicPartition` it had built passed pydantic's
    check as it was), which the one-pass decoder validates as every other field."""
    if not isinstance(message, CheckpointAck):
        return True
    return all(isinstance(tp.topic, str) and type(tp.partition) is int for tp in message.positions)


# -- records --------------------------------------------------------------------------------

names = st.text(st.characters(codec="utf-8"), max_size=8)
counts = st.integers(min_value=0, max_value=2**40)
seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@st.composite
def handles(draw: st.DrawFn) -> StateHandle:
    file = st.builds(
        SnapshotFile,
        name=st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,12}\Z").filter(
            lambda n: not n.startswith("changelog-")
        ),
        path=names,
        size=counts,
        sha256=st.just("a" * 64),
    )
    segment = st.builds(
        SnapshotFile,
        name=st.integers(0, 10**12 - 1).map(lambda n: f"changelog-{n:012d}"),
        path=names,
        size=counts,
        sha256=st.just("b" * 64),
    )
    return StateHandle(
        checkpoint_id=draw(counts),
        files=tuple(draw(st.lists(file, max_size=3))),
        full_bytes=draw(counts),
        uploaded_bytes=draw(counts),
        changelog=tuple(draw(st.lists(segment, max_size=2))),
    )


messages: st.SearchStrategy[FromWorker | ToWorker] = st.one_of(
    st.builds(
        CheckpointAck,
        names,
        counts,
        counts,
        st.dictionaries(st.builds(TopicPartition, names, counts), counts, max_size=3),
        handles(),
        seconds,
        seconds,
        seconds,
    ),
    st.builds(
        Heartbeat,
        names,
        names,
        counts,
        counts,
        st.lists(names, max_size=3).map(tuple),
        st.dictionaries(names, st.dictionaries(names, st.dictionaries(names, counts))),
    ),
    st.builds(
        Assign,
        counts,
        st.none() | counts,
        counts,
        st.dictionaries(names, st.lists(names, max_size=3).map(tuple), max_size=3),
    ),
    st.builds(CheckpointDecline, names, counts, counts, names),
    st.builds(SubtaskFailed, names, counts, names, st.none() | counts),
    st.builds(TriggerCheckpoint, counts, counts),
    st.builds(CheckpointCompleted, counts, counts),
    st.builds(CheckpointAborted, counts, counts, names),
    st.builds(StopSubtasks, counts),
    st.builds(Retire, counts),
    st.builds(Retired, names, counts),
)

TRICKY: list[object] = [
    -1, -0.0, 0, 0.5, 1.0, 2**64, -(2**64), True, False, None, float("inf"), float("nan"),
    "", "1", "-1", "0.5", "inf", "NaN", "ack", [], {}, [1], ["t", 0, 1], {"a": 1}, "a" * 64,
]  # fmt: skip
"""Values next to what a field accepts (JSON has no inf or nan: ``json.dumps`` writes them
as ``Infinity`` and ``NaN``, which a decoder might take)."""
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | names
    | st.sampled_from(TRICKY),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=6,
)

_SEGMENT = SnapshotFile(name="changelog-000000000007", path="shared/c", size=9, sha256="c" * 64)
SAMPLES: list[FromWorker | ToWorker] = [
    CheckpointAck(
        "counter#1", 7, 3, {TopicPartition("words", 2): 41, TopicPartition("words", 3): 0},
        StateHandle(
            checkpoint_id=7,
            files=(SnapshotFile(name="000001.sst", path="shared/a", size=4, sha256="a" * 64),),
            full_bytes=4, uploaded_bytes=4, changelog=(_SEGMENT,),
        ),
        alignment_seconds=0.25, sync_seconds=0.01, async_seconds=1.5,
    ),
    CheckpointDecline("tokenizer#0", 8, 3, "barrier buffer over its bound"),
    SubtaskFailed("tokenizer#0", 3, "RuntimeError('x')", 6),
    Heartbeat("w2", "beef", 1, 3, ("desk#0",), {"desk#0": {"runs": {"running": 2, "done": 9}}}),
    Assign(3, 6, 9, {"w1": ("counter#0",), "w2": ()}),
    TriggerCheckpoint(7, 3),
    CheckpointCompleted(7, 3),
    CheckpointAborted(8, 3, "timed out waiting for counter#1"),
    StopSubtasks(4),
    Retire(5),
    Retired("w1", 5),
]  # fmt: skip
"""A message of every type with every field filled."""


def _places(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in ``node``, at every depth."""
    places: list[tuple[Any, Any]] = []
    for key in list(node) if isinstance(node, dict) else range(len(node)):
        places.append((node, key))
        if isinstance(node[key], dict | list):
            places.extend(_places(node[key]))
    return places


def damages(message: FromWorker | ToWorker) -> list[bytes]:
    """``message``'s record with each field and item, at every depth, in turn dropped or
    replaced by each of `TRICKY`, and with a field added to each object."""
    records = []
    for i in range(len(_places(json.loads(encode_message(message))))):
        for value in ["drop", "add", *TRICKY]:
            body = json.loads(encode_message(message))
            node, key = _places(body)[i]
            if value == "drop":
                del node[key]
            elif value == "add":
                if not isinstance(node, dict):
                    continue
                node["extra"] = 1
            else:
                node[key] = value
            records.append(json.dumps(body).encode())
    return records


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A random message's record with one field or item dropped, replaced, or added."""
    body = json.loads(encode_message(draw(messages)))
    node, key = draw(st.sampled_from(_places(body)))
    action = draw(st.sampled_from(["drop", "replace", "add"]))
    if action == "drop":
        del node[key]
    elif action == "replace":
        node[key] = draw(json_values)
    elif isinstance(node, dict):
        node[draw(names)] = draw(json_values)
    else:
        node.append(draw(json_values))
    return json.dumps(body).encode()


# -- the tests ------------------------------------------------------------------------------


@given(messages)
def test_every_message_decodes_as_before_and_to_itself(message: FromWorker | ToWorker) -> None:
    data = encode_message(message)
    assert decode_message(data) == decode_before(data) == message


def agrees(data: bytes) -> bool:
    """Both decoders refuse ``data``, or decode it to the same message; where the decoder
    before let through a mistyped position (`well_typed`), the one-pass decoder refuses it
    or reads it as pydantic reads any other field (``"1"`` as 1), the rest the same."""
    before, now = outcome(decode_before, data), outcome(decode_message, data)
    if well_typed(before):
        return bool(now == before)
    if now is ValueError:
        return True
    assert isinstance(before, CheckpointAck)
    assert isinstance(now, CheckpointAck)
    return well_typed(now) and dataclasses.replace(now, positions={}) == dataclasses.replace(
        before, positions={}
    )


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_damage_to_a_record_is_refused_or_accepted_as_before(
    message: FromWorker | ToWorker,
) -> None:
    records = damages(message)
    assert len(records) > 20
    assert [r for r in records if not agrees(r)] == []


@given(damaged())
def test_a_randomly_damaged_record_is_refused_or_accepted_as_before(data: bytes) -> None:
    assert agrees(data)


@given(st.binary(max_size=40) | json_values.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_are_refused_or_accepted_as_before(data: bytes) -> None:
    assert agrees(data)


OLD_ACK = (
    b'{"type":"ack","subtask":"counter#1","checkpoint_id":7,"attempt":3,"positions":'
    b'[["words",2,41],["words",3,0]],"handle":{"schema_version":1,"checkpoint_id":7,"files":'
    b'[{"name":"000001.sst","path":"shared/ab","size":4096,"sha256":"' + b"a" * 64 + b'"}],'
    b'"full_bytes":4096,"uploaded_bytes":512},"alignment_seconds":0.25,"sync_seconds":0.01,'
    b'"async_seconds":1.5,"schema_version":1}'
)
"""An ack as the encoder has always written it (captured from the code before this decoder)."""


def test_an_ack_written_before_decodes_to_the_same_message() -> None:
    file = SnapshotFile(name="000001.sst", path="shared/ab", size=4096, sha256="a" * 64)
    expected = CheckpointAck(
        "counter#1", 7, 3, {TopicPartition("words", 2): 41, TopicPartition("words", 3): 0},
        StateHandle(checkpoint_id=7, files=(file,), full_bytes=4096, uploaded_bytes=512),
        alignment_seconds=0.25, sync_seconds=0.01, async_seconds=1.5,
    )  # fmt: skip
    assert decode_message(OLD_ACK) == decode_before(OLD_ACK) == expected
    assert encode_message(expected) == OLD_ACK


@pytest.mark.parametrize(
    ("record", "schema"),
    [
        (cls, getattr(wire_schema, name))
        for cls, name in [
            (CheckpointAck, "AckRecord"),
            (Heartbeat, "HeartbeatRecord"),
            (Assign, "AssignRecord"),
            (CheckpointDecline, "DeclineRecord"),
            (SubtaskFailed, "FailedRecord"),
            (TriggerCheckpoint, "TriggerRecord"),
            (CheckpointCompleted, "CompletedRecord"),
            (CheckpointAborted, "AbortedRecord"),
            (StopSubtasks, "StopRecord"),
            (Retire, "RetireRecord"),
            (Retired, "RetiredRecord"),
        ]
    ],
)
def test_every_message_field_has_its_field_in_the_record(
    record: type, schema: type[pydantic.BaseModel]
) -> None:
    """A field added to a message without its record's would be refused on the wire."""
    fields = {f.name for f in dataclasses.fields(record)}
    assert set(schema.model_fields) == fields | {"type", "schema_version"}

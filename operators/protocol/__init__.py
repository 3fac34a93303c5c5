"""The barrier protocol's sans-IO cores: record headers, barrier alignment, restore filtering.

Pure classes fed events and returning actions (frozen slotted dataclasses); Kafka, RocksDB and
storage sit around them. Order of use at a subtask, per record read from partition ``p``:

1. :func:`decode_headers` the record (``None`` for a source record);
2. :meth:`RestoreFilter.decide` — skip records of older attempts, stop when fenced;
3. :meth:`BarrierAligner.on_barrier` or :meth:`BarrierAligner.on_record` on channel
   ``(p, writer)`` — the writer of a source record is :data:`COORDINATOR_WRITER`;
4. after :class:`Aligned`, :class:`Decline` or :class:`Aborted`: :meth:`BarrierAligner.release`
   and process the returned records in order.
"""

from operators.protocol.alignment import (
    Aborted,
    Aligned,
    BarrierAligner,
    Buffered,
    Decline,
    Process,
)
from operators.protocol.exceptions import (
    MalformedHeadersError,
    ProtocolError,
    ProtocolViolationError,
    UnknownChannelError,
)
from operators.protocol.records import (
    ATTEMPT_HEADER,
    CHECKPOINT_HEADER,
    COORDINATOR_WRITER,
    INTERVAL_HEADER,
    KIND_HEADER,
    WRITER_HEADER,
    Channel,
    RecordKind,
    RecordMeta,
    TopicPartition,
    decode_headers,
    encode_headers,
)
from operators.protocol.restore_filter import Accept, Fenced, RestoreFilter, Skip

__all__ = [
    "ATTEMPT_HEADER",
    "CHECKPOINT_HEADER",
    "COORDINATOR_WRITER",
    "INTERVAL_HEADER",
    "KIND_HEADER",
    "WRITER_HEADER",
    "Aborted",
    "Accept",
    "Aligned",
    "BarrierAligner",
    "Buffered",
    "Channel",
    "Decline",
    "Fenced",
    "MalformedHeadersError",
    "Process",
    "ProtocolError",
    "ProtocolViolationError",
    "RecordKind",
    "RecordMeta",
    "RestoreFilter",
    "Skip",
    "TopicPartition",
    "UnknownChannelError",
    "decode_headers",
    "encode_headers",
]

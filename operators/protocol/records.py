"""The ``sg-*`` record headers of the data plane (its partitions and channels are in
`operators.protocol.channels`).

Every record a subtask writes carries ``sg-attempt``, ``sg-interval``, ``sg-writer`` and
``sg-pipeline`` (so that two pipelines that share a topic name never take each other's records
or markers for their own);
a barrier marker also carries ``sg-kind=barrier`` and ``sg-checkpoint``. Markers exist only in
the job's own topics. Source records are written by the outside world; their headers are user
data and are never decoded (an ``sg-*`` header there controls nothing). They belong to the
source partition's only channel, whose writer is :data:`SOURCE_WRITER`, and their barriers are
taken by the reading subtask at its read position when a checkpoint is triggered.

Header values are ASCII: integers in decimal without sign or padding, the writer as given.
Headers are the ``list[tuple[str, bytes]]`` that aiokafka sends and receives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from sluicegate.operators.protocol.exceptions import MalformedHeadersError, ProtocolViolationError

__all__ = [
    "ATTEMPT_HEADER",
    "CHECKPOINT_HEADER",
    "INTERVAL_HEADER",
    "KIND_HEADER",
    "PIPELINE_HEADER",
    "SOURCE_WRITER",
    "WRITER_HEADER",
    "HeaderDecoder",
    "RecordKind",
    "RecordMeta",
    "decode_headers",
    "encode_headers",
]

ATTEMPT_HEADER: Final = "sg-attempt"
INTERVAL_HEADER: Final = "sg-interval"
WRITER_HEADER: Final = "sg-writer"
KIND_HEADER: Final = "sg-kind"
CHECKPOINT_HEADER: Final = "sg-checkpoint"
PIPELINE_HEADER: Final = "sg-pipeline"

SOURCE_WRITER: Final = "source"
"""The one writer of a source partition's channel: the outside world. Its barriers are taken
at the reading subtask when a checkpoint is triggered; a source topic is never written to."""

_KNOWN_HEADERS: Final = frozenset(
    {
        ATTEMPT_HEADER,
        INTERVAL_HEADER,
        WRITER_HEADER,
        KIND_HEADER,
        CHECKPOINT_HEADER,
        PIPELINE_HEADER,
    }
)


class RecordKind(StrEnum):
    """What a record written by a subtask (or the coordinator) is."""

    RECORD = "record"
    BARRIER = "barrier"


@dataclass(frozen=True, slots=True)
class RecordMeta:
    """The protocol metadata of one record, as carried by its ``sg-*`` headers.

    ``checkpoint_id`` is set exactly when ``kind`` is :attr:`RecordKind.BARRIER`.
    """

    attempt: int
    interval: int
    writer: str
    kind: RecordKind = RecordKind.RECORD
    checkpoint_id: int | None = None
    pipeline: str | None = None
    """The pipeline whose subtask wrote the record (``sg-pipeline``); None on records written
    before the header existed. A subtask refuses records of another pipeline."""

    def __post_init__(self) -> None:
        if self.attempt < 0 or self.interval < 0:
            raise ProtocolViolationError(
                f"attempt and interval must not be negative (got {self.attempt}, {self.interval})"
            )
        if not self.writer:
            raise ProtocolViolationError("a record's writer must not be empty")
        if (self.kind is RecordKind.BARRIER) != (self.checkpoint_id is not None):
            raise ProtocolViolationError(
                "a barrier carries a checkpoint id and a data record does not "
                f"(kind {self.kind}, checkpoint id {self.checkpoint_id})"
            )
        if self.checkpoint_id is not None and self.checkpoint_id < 1:
            raise ProtocolViolationError(f"checkpoint ids start at 1 (got {self.checkpoint_id})")

    @property
    def is_barrier(self) -> bool:
        """Whether this record is a barrier marker."""
        return self.kind is RecordKind.BARRIER


def encode_headers(meta: RecordMeta) -> list[tuple[str, bytes]]:
    """The ``sg-*`` headers that carry ``meta``, in a fixed order."""
    headers = [
        (ATTEMPT_HEADER, str(meta.attempt).encode("ascii")),
        (INTERVAL_HEADER, str(meta.interval).encode("ascii")),
        (WRITER_HEADER, meta.writer.encode("utf-8")),
        (KIND_HEADER, meta.kind.value.encode("ascii")),
    ]
    if meta.checkpoint_id is not None:
        headers.append((CHECKPOINT_HEADER, str(meta.checkpoint_id).encode("ascii")))
    if meta.pipeline is not None:
        headers.append((PIPELINE_HEADER, meta.pipeline.encode("utf-8")))
    return headers


def decode_headers(headers: Sequence[tuple[str, bytes | None]] | None) -> RecordMeta | None:
    """Read the protocol metadata of a record from its headers.

    Returns ``None`` for a source record (no ``sg-*`` header at all). Headers that do not
    start with ``sg-`` belong to the user and are ignored, and so are unknown ``sg-*`` ones,
    so that a newer writer may add some.

    Raises:
        MalformedHeadersError: a known header is repeated, has no value or an unreadable
            one, or the set is incomplete (e.g. ``sg-attempt`` without ``sg-writer``).
    """
    found: dict[str, bytes] = {}
    for name, value in headers or ():
        if name not in _KNOWN_HEADERS:
            continue
        if name in found:
            raise MalformedHeadersError(name, "appears more than once")
        if value is None:
            raise MalformedHeadersError(name, "has no value")
        found[name] = value
    if not found:
        return None
    for required in (ATTEMPT_HEADER, INTERVAL_HEADER, WRITER_HEADER, KIND_HEADER):
        if required not in found:
            raise MalformedHeadersError(required, "is missing while other sg-* headers are set")
    kind_text = _text(KIND_HEADER, found[KIND_HEADER])
    try:
        kind = RecordKind(kind_text)
    except ValueError:
        raise MalformedHeadersError(KIND_HEADER, f"unknown kind {kind_text!r}") from None
    checkpoint_id: int | None = None
    if kind is RecordKind.BARRIER:
        if CHECKPOINT_HEADER not in found:
            raise MalformedHeadersError(CHECKPOINT_HEADER, "is missing on a barrier")
        checkpoint_id = _integer(CHECKPOINT_HEADER, found[CHECKPOINT_HEADER])
        if checkpoint_id < 1:
            raise MalformedHeadersError(CHECKPOINT_HEADER, "checkpoint ids start at 1")
    elif CHECKPOINT_HEADER in found:
        raise MalformedHeadersError(CHECKPOINT_HEADER, "is set on a data record")
    writer = _text(WRITER_HEADER, found[WRITER_HEADER])
    if not writer:
        raise MalformedHeadersError(WRITER_HEADER, "is empty")
    return RecordMeta(
        attempt=_integer(ATTEMPT_HEADER, found[ATTEMPT_HEADER]),
        interval=_integer(INTERVAL_HEADER, found[INTERVAL_HEADER]),
        writer=writer,
        kind=kind,
        checkpoint_id=checkpoint_id,
        pipeline=_text(PIPELINE_HEADER, found[PIPELINE_HEADER])
        if PIPELINE_HEADER in found
        else None,
    )


def _text(header: str, value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedHeadersError(header, f"is not UTF-8: {value!r}") from None


def _integer(header: str, value: bytes) -> int:
    # str.isdigit() would accept "²" and int() would accept " 7", "+7" and "7_0":
    # only plain ASCII decimal is written, so only that is read.
    if not value or not all(0x30 <= byte <= 0x39 for byte in value):
        raise MalformedHeadersError(header, f"is not a decimal integer: {value!r}")
    return int(value)


class HeaderDecoder:
    """`decode_headers` with a memory: the records of one writer in one interval carry the
    same headers, so a subtask decodes each distinct header list once (the cache holds the
    last ``size`` distinct lists that decoded, and forgets them all when full). An invalid
    list is not cached: it raises every time."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._known: dict[tuple[tuple[str, bytes | None], ...], RecordMeta | None] = {}

    def __call__(self, headers: Sequence[tuple[str, bytes | None]] | None) -> RecordMeta | None:
        key = tuple(headers or ())
        if key in self._known:
            return self._known[key]
        meta = decode_headers(headers)
        if len(self._known) >= self._size:
            self._known.clear()
        self._known[key] = meta
        return meta

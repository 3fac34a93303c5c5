"""What a record read from one of a subtask's input partitions is, decided once per record.

`Inputs.classify` answers, in the order the subtask needs:

* a **source** record (a partition of a source topic) is user data whatever its headers say
  (``sg-*`` ones included); its offset + 1 is the position barriers are taken at when a
  trigger arrives (`Inputs.source_next`);
* any other record carries the engine's headers (`HeaderDecoder`): malformed ones, another
  pipeline's or an unknown writer's are rejected with the reason (the subtask dead-letters
  them); the `RestoreFilter` fences (`Fenced`) or skips (None) records of other attempts;
* what remains is a barrier marker (`BarrierAt`) or a data record of a `Channel`.

The per-partition facts (is it a source, its `TopicPartition`, the channel of each writer the
aligner knows) are computed once when the subtask starts, not for every record: this is the
hot path of every subtask.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka import ConsumerRecord

from sluicegate.operators.protocol.channels import Channel, TopicPartition
from sluicegate.operators.protocol.exceptions import MalformedHeadersError
from sluicegate.operators.protocol.records import SOURCE_WRITER, HeaderDecoder, RecordMeta
from sluicegate.operators.protocol.restore_filter import Fenced, RestoreFilter, Skip

__all__ = ["BarrierAt", "Inputs", "Rejected"]


@dataclass(frozen=True, slots=True)
class BarrierAt:
    """Barrier ``checkpoint_id`` read from ``channel`` at ``offset``."""

    channel: Channel
    checkpoint_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record to dead-letter, and why."""

    reason: Exception


@dataclass(slots=True)
class _Partition:
    """What every record of one input partition shares."""

    partition: TopicPartition
    source: bool
    channels: dict[str, Channel]
    """writer -> its channel, for the writers the aligner knows"""
    headers: object = None
    meta: RecordMeta | None = None
    """The headers of the last record that decoded, and what they decoded to: the records
    of one writer in one interval carry equal headers, and comparing is cheaper than hashing
    them for `HeaderDecoder`."""
    accepted: Channel | None = None
    """The channel of the last record if ``headers`` made it an accepted data record: a record
    with the same headers is one too, unless the filter has fenced the subtask since."""


class Inputs:
    """The input partitions of one subtask of pipeline ``pipeline``; see the module docstring."""

    def __init__(
        self,
        pipeline: str,
        channels: Iterable[Channel],
        source_partitions: Iterable[TopicPartition],
        restore_filter: RestoreFilter,
    ) -> None:
        self._pipeline = pipeline
        self._filter = restore_filter
        self._decode_headers = HeaderDecoder()
        sources = set(source_partitions)
        self._partitions: dict[tuple[str, int], _Partition] = {}
        for channel in channels:
            tp = channel.partition
            known = self._partitions.setdefault(
                (tp.topic, tp.partition), _Partition(tp, tp in sources, {})
            )
            known.channels[channel.writer] = channel
        self.source_next: dict[TopicPartition, int] = {}
        """Per source partition, the offset of the next record to read (``R_p`` if a trigger
        arrived now); filled as records are read."""

    def classify(
        self, record: ConsumerRecord[bytes, bytes]
    ) -> Channel | BarrierAt | Rejected | Fenced | None:
        """What ``record`` is; None: skip it (an older attempt wrote it)."""
        known = self._partitions.get((record.topic, record.partition))
        if known is None:  # the consumer is assigned the input partitions only
            raise ValueError(f"read {record.topic}[{record.partition}], not an input")
        if known.source:
            self.source_next[known.partition] = record.offset + 1
            return known.channels[SOURCE_WRITER]
        if record.headers == known.headers:
            if known.accepted is not None and self._filter.fenced_by is None:
                return known.accepted  # the common case: the same writer, interval, attempt
            meta = known.meta
        else:
            try:
                meta = self._decode_headers(record.headers)
            except MalformedHeadersError as exc:
                return Rejected(exc)
            known.headers, known.meta, known.accepted = record.headers, meta, None
        if meta is not None and meta.pipeline not in (None, self._pipeline):
            reason = f"written by pipeline {meta.pipeline!r}, not {self._pipeline!r}"
            return Rejected(ValueError(reason))
        decision = self._filter.decide(meta)
        if isinstance(decision, Fenced):
            return decision
        if isinstance(decision, Skip):
            return None
        writer = meta.writer if meta is not None else SOURCE_WRITER
        channel = known.channels.get(writer)
        if channel is None:
            return Rejected(ValueError(f"unknown writer {writer!r}"))
        if meta is not None and meta.checkpoint_id is not None:
            return BarrierAt(channel, meta.checkpoint_id, record.offset)
        known.accepted = channel
        return channel

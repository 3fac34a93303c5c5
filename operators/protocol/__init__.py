"""The barrier protocol's sans-IO cores: record headers, barrier alignment, restore filtering.

Pure classes fed events and returning actions (frozen slotted dataclasses); Kafka, RocksDB and
storage sit around them. Order of use at a subtask, per record read from partition ``p``:

1. :func:`decode_headers` the record (never for a source record, whose headers are user data:
   its meta is ``None``);
2. :meth:`RestoreFilter.decide` — skip records of older attempts, stop when fenced;
3. :meth:`BarrierAligner.on_barrier` or :meth:`BarrierAligner.on_record` on channel
   ``(p, writer)`` — the writer of a source record is :data:`SOURCE_WRITER`;
   A checkpoint trigger is :meth:`BarrierAligner.on_barrier` on every source channel, at the
   offset of the next record to read there;
4. after :class:`Aligned`, :class:`Decline` or :class:`Aborted`: :meth:`BarrierAligner.release`
   and process the returned records in order.
"""

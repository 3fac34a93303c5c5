"""The on-disk format of a subtask's RocksDB database: key layout, value rule, tuning.

Why key prefixes and not one column family per partition. Both keep state
separable per input partition; prefixes were chosen on measurements of
rocksdict 0.3.29 with 64 partitions of 1,000 rows each (local disk):

* every column family is flushed separately, each flush writing an SST and
  syncing the MANIFEST: flush + checkpoint took 0.9-1.2 s with 64 dirty
  column families against 0.06 s with prefixes, all of it in the
  synchronous phase, where the subtask processes nothing;
* every checkpoint added one small L0 file per dirty column family (64 new
  files per checkpoint instead of 1), each a separate object to upload;
* creating a column family took ~40 ms (2.6 s for 64) and opening needs every
  name listed; with prefixes, a new partition costs nothing;
* dropping a partition is one ``delete_range`` (a range tombstone, 0.1 ms)
  instead of ``drop_column_family`` (15-60 ms); its files are reclaimed by
  compaction. rocksdict quirk seen on the way: ``close()`` on the ``Rdict`` of
  a dropped column family raises.

Savepoints and rescaling read a partition's rows (``items()``), so nothing
needs a partition's SST files on their own, which is what column families
would have offered.

The layout. All rows live in RocksDB's ``default`` column family; the first
byte of a stored key says what the row is::

    0x00 <key>                                              metadata row
    0x01 <len(topic)> <topic ascii> <partition u32be> <key>  partition row

``len(topic)`` is one byte (Kafka topic names have at most 249 characters), so
no partition's prefix is a prefix of another's and a range scan over
``[prefix, successor(prefix))`` returns exactly one partition's rows. Within a
prefix, rows sort by the caller's key bytes (RocksDB's bytewise comparator
orders exactly like Python ``bytes``).

Values are stored verbatim. The database is opened in rocksdict's raw mode,
which accepts only ``bytes`` and never pickles; :func:`require_bytes` rejects
anything else before it reaches rocksdict, with a ``TypeError`` naming the
argument. JSON helpers are offered for callers that want them; pickle is not.

Tuning. The settings (:class:`RocksDBSettings`) favour small incremental
checkpoints; auto compaction stays on:

* level compaction with ``level_compaction_dynamic_level_bytes``: most data
  sits in the last level, which is rewritten only when the level above
  overflows, so most SST bytes survive from one checkpoint to the next;
* ``target_file_size_base`` 1 MiB (RocksDB default: 64 MiB) and
  ``max_bytes_for_level_base`` 2 MiB: a compaction rewrites (and the next
  checkpoint re-uploads) only the small files overlapping its key range, and
  an L0 compaction, which merges into all of L1 when updates are spread over
  the key space, rewrites at most about 2 MiB. The cost is more files (about
  1,000 per GiB of state) and one more level;
* each checkpoint flushes the memtable, so L0 files hold one interval's writes;
  the 32 MiB write buffer only matters for intervals that write more: such an
  interval (a bulk load) becomes one SST, which compaction moves to the last
  level without rewriting it;
* ``level0_file_num_compaction_trigger`` 4 (RocksDB's default).

  ``bench.incremental_upload`` (1% of the keys updated per checkpoint, 50
  checkpoints, uploaded / changed bytes): at 200k keys the mean is 1.4-1.8x
  and the worst checkpoint 9.4-10.8x over 6 runs (compactions run in the
  background, so which checkpoint uploads their output varies); at 1M keys
  1.8x and 11.1x; over 200 checkpoints 2.86x and 19.8x (the base level grows
  until its first push-down, after 50). The worst checkpoint is the one after
  an L0 compaction: it rewrites the whole base level, which grows with the keys
  updated since the base level was last pushed down. Measured alternatives
  (200k keys, worst): 2 and 8 MiB files 4.2x mean and 18.9x; 4 MiB base 18.9x; 256-512 KiB files
  with 0.25-1 MiB bases 17-21x (a push-down into the last level rewrote the
  one SST of the initial load whole); zstd 12.4x; universal compaction 16.1x;
  static level sizes 10.8x; L0 trigger 8 0.9-1.1x mean, 9.4-10.8x worst.
  256 KiB files, 1 MiB base, 2 MiB write buffer and L0 trigger 8 gave 1.1x
  and 9.0x in 5 runs (1M keys: 1.4x and 4.1x), but a bulk load is then
  flushed as several overlapping files that the size-based L0 score compacts
  right away: after 200k rows written in key-interleaved order, the next
  checkpoint uploaded 65% of the state instead of under 20%
  (``tests/unit/operators/state/test_state_incremental.py``), so the defaults
  stay;
* a 10 bit-per-key bloom filter: point reads by key are the common access;
* ``max_pending_writes`` (10,000 keys) bounds the pending write batch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rocksdict import BlockBasedOptions, DBCompactionStyle, Options

from sluicegate.operators.state.store import PartitionId

__all__ = [
    "META_PREFIX",
    "PARTITION_TAG",
    "SCHEMA_VERSION_KEY",
    "RocksDBSettings",
    "decode_json",
    "decode_partition",
    "decode_schema_version",
    "encode_json",
    "encode_schema_version",
    "partition_prefix",
    "prefix_successor",
    "require_bytes",
]

META_PREFIX = b"\x00"
PARTITION_TAG = 0x01
_PARTITION_PREFIX = bytes([PARTITION_TAG])

_MIB = 1 << 20

#: Metadata row holding the layout version of this database, as ASCII decimal.
SCHEMA_VERSION_KEY = b"schema_version"


def require_bytes(name: str, value: object) -> bytes:
    """Return ``value`` if it is exactly ``bytes``, else raise ``TypeError`` naming ``name``."""
    if type(value) is not bytes:
        raise TypeError(f"{name} must be bytes, got {type(value).__name__}")
    return value


def partition_prefix(partition: PartitionId) -> bytes:
    """Return the key prefix of every row of ``partition``."""
    topic = partition.topic.encode("ascii")
    return _PARTITION_PREFIX + bytes([len(topic)]) + topic + partition.partition.to_bytes(4, "big")


def decode_partition(stored_key: bytes) -> tuple[PartitionId, int] | None:
    """Return the partition a stored key belongs to and its prefix length.

    Returns None for keys outside the partition area (metadata rows).
    """
    if not stored_key or stored_key[0] != PARTITION_TAG or len(stored_key) < 2:
        return None
    size = stored_key[1]
    end = 2 + size + 4
    if len(stored_key) < end:
        return None
    topic = stored_key[2 : 2 + size].decode("ascii")
    number = int.from_bytes(stored_key[2 + size : end], "big")
    return PartitionId(topic, number), end


def prefix_successor(prefix: bytes) -> bytes | None:
    """Return the smallest key greater than every key starting with ``prefix``.

    None means there is no such key (``prefix`` is empty or all ``0xff``).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def encode_schema_version(version: int) -> bytes:
    """Encode a schema version as ASCII decimal, readable with any RocksDB tool."""
    return str(version).encode("ascii")


def decode_schema_version(raw: bytes) -> int:
    """Decode :func:`encode_schema_version`; raises ``ValueError`` on anything else."""
    if not raw.isdigit():
        raise ValueError(f"schema_version row is not a decimal number: {raw!r}")
    return int(raw)


def encode_json(value: Any) -> bytes:
    """Encode a JSON-serialisable value as compact UTF-8 JSON with sorted keys."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")


def decode_json(raw: bytes) -> Any:
    """Decode :func:`encode_json`."""
    return json.loads(raw)


@dataclass(frozen=True, slots=True, kw_only=True)
class RocksDBSettings:
    """Tuning of the subtask's database; defaults explained in the module docstring."""

    target_file_size_bytes: int = 1 * _MIB
    """RocksDB's ``target_file_size_base``: the size of the SST files compaction writes."""
    max_bytes_for_level_base: int = 2 * _MIB
    """RocksDB's ``max_bytes_for_level_base``: the size of the base level."""
    write_buffer_size_bytes: int = 32 * _MIB
    """RocksDB's ``write_buffer_size``: the memtable's size."""
    level0_compaction_trigger: int = 4
    """RocksDB's ``level0_file_num_compaction_trigger``: L0 files that start a compaction."""
    bloom_bits_per_key: int = 10
    """Bits per key of the SST files' bloom filters."""
    max_pending_writes: int = 10_000
    """Keys the pending write batch holds before it is applied (its memory bound)."""

    def to_rocksdict(self) -> Any:
        """Return rocksdict ``Options`` in raw mode (bytes only, never pickled)."""
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_compaction_style(DBCompactionStyle.level())
        options.set_level_compaction_dynamic_level_bytes(True)
        options.set_target_file_size_base(self.target_file_size_bytes)
        options.set_max_bytes_for_level_base(self.max_bytes_for_level_base)
        options.set_write_buffer_size(self.write_buffer_size_bytes)
        options.set_level_zero_file_num_compaction_trigger(self.level0_compaction_trigger)
        table = BlockBasedOptions()
        table.set_bloom_filter(self.bloom_bits_per_key, False)
        options.set_block_based_table_factory(table)
        return options

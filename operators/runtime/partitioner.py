"""Which partition a record goes to: Kafka's murmur2 of the key, as Java clients do it.

A keyless record goes to the partition with the same number as the input partition it came
from (modulo the output's count): deterministic, so a replay after a restore writes it where
the first run did.
"""

from __future__ import annotations

from functools import lru_cache

from aiokafka.partitioner import murmur2

__all__ = ["partition_for"]


def partition_for(key: bytes | None, partitions: int, *, input_partition: int) -> int:
    """The output partition of a record with ``key`` among ``partitions``."""
    if key is None:
        return input_partition % partitions
    hashed = _remembered_hash(key) if len(key) <= _MEMO_KEY_BYTES else _positive_hash(key)
    return hashed % partitions


_MEMO_KEYS = 1 << 16
_MEMO_KEY_BYTES = 64


def _positive_hash(key: bytes) -> int:
    # The same positive-hash rule as Kafka's BuiltInPartitioner.partitionForKey.
    return int(murmur2(key)) & 0x7FFFFFFF


_remembered_hash = lru_cache(maxsize=_MEMO_KEYS)(_positive_hash)

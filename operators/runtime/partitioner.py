"""Which partition a record goes to: Kafka's murmur2 of the key, as Java clients do it.

A keyless record goes to the partition with the same number as the input partition it came
from (modulo the output's count): deterministic, so a replay after a restore writes it where
the first run did.
"""

from __future__ import annotations

from aiokafka.partitioner import murmur2

__all__ = ["partition_for"]


def partition_for(key: bytes | None, partitions: int, *, input_partition: int) -> int:
    """The output partition of a record with ``key`` among ``partitions``."""
    if key is None:
        return input_partition % partitions
    # The same positive-hash rule as Kafka's BuiltInPartitioner.partitionForKey.
    return (int(murmur2(key)) & 0x7FFFFFFF) % partitions

"""The key layout: partition prefixes decode back and never overlap."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from sluicegate.operators.state.codec import (
    META_PREFIX,
    decode_json,
    decode_partition,
    decode_schema_version,
    encode_json,
    encode_schema_version,
    partition_prefix,
)
from sluicegate.operators.state.store import PartitionId

TOPICS = st.text(alphabet="abcXYZ09._-", min_size=1, max_size=249).filter(
    lambda t: t not in {".", ".."}
)
PARTITION_IDS = st.builds(PartitionId, TOPICS, st.integers(0, 2**31 - 1))


@given(PARTITION_IDS, st.binary(max_size=8))
def test_a_stored_key_decodes_to_its_partition(pid: PartitionId, key: bytes) -> None:
    prefix = partition_prefix(pid)
    assert decode_partition(prefix + key) == (pid, len(prefix))


@given(PARTITION_IDS, PARTITION_IDS)
def test_no_partition_prefix_is_a_prefix_of_another(a: PartitionId, b: PartitionId) -> None:
    if a != b:
        assert not partition_prefix(b).startswith(partition_prefix(a))


def test_metadata_keys_are_not_partition_rows() -> None:
    assert decode_partition(META_PREFIX + b"schema_version") is None
    assert decode_partition(b"") is None


def test_schema_version_is_ascii_decimal() -> None:
    assert encode_schema_version(1) == b"1"
    assert decode_schema_version(b"12") == 12
    with pytest.raises(ValueError, match="decimal"):
        decode_schema_version(b"-1")


def test_json_helpers_are_compact_and_stable() -> None:
    raw = encode_json({"b": 1, "a": [True, None]})
    assert raw == b'{"a":[true,null],"b":1}'
    assert decode_json(raw) == {"a": [True, None], "b": 1}

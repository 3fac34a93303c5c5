"""The store against a dict model: random writes, flushes, reopens and scans agree."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings, strategies as st

from sluicegate.operators.state.codec import RocksDBSettings, prefix_successor
from sluicegate.operators.state.rocksdb import RocksDBStateStore

PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]
KEYS = st.binary(max_size=3).map(lambda b: b.replace(b"\x02", b"\xff"))


@dataclass(frozen=True)
class Put:
    partition: int
    key: bytes
    value: bytes


@dataclass(frozen=True)
class Delete:
    partition: int
    key: bytes


@dataclass(frozen=True)
class Flush:
    pass


@dataclass(frozen=True)
class Reopen:
    pass


@dataclass(frozen=True)
class Drop:
    partition: int


Op = Put | Delete | Flush | Reopen | Drop
PARTITION = st.integers(0, len(PARTITIONS) - 1)
OPS = st.one_of(
    st.builds(Put, PARTITION, KEYS, st.binary(max_size=4)),
    st.builds(Delete, PARTITION, KEYS),
    st.just(Flush()),
    st.just(Reopen()),
    st.builds(Drop, PARTITION),
)


def _check(store: RocksDBStateStore, model: list[dict[bytes, bytes]], prefix: bytes) -> None:
    for index, (topic, number) in enumerate(PARTITIONS):
        rows = store.partition(topic, number)
        expected = sorted(model[index].items())
        assert list(rows.items()) == expected
        assert list(rows.items(prefix=prefix)) == [
            kv for kv in expected if kv[0].startswith(prefix)
        ]
        for key in model[index]:
            assert rows.get(key) == model[index][key]


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(OPS, max_size=40), prefix=KEYS, batch=st.integers(1, 6))
def test_store_behaves_like_a_dict_per_partition(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Op], prefix: bytes, batch: int
) -> None:
    path = tmp_path_factory.mktemp("model") / "db"
    settings = RocksDBSettings(max_pending_writes=batch)
    model: list[dict[bytes, bytes]] = [{} for _ in PARTITIONS]
    store = RocksDBStateStore.open(path, settings=settings)
    try:
        for op in ops:
            match op:
                case Put(partition, key, value):
                    store.partition(*PARTITIONS[partition]).put(key, value)
                    model[partition][key] = value
                case Delete(partition, key):
                    store.partition(*PARTITIONS[partition]).delete(key)
                    model[partition].pop(key, None)
                case Flush():
                    store.flush_batch()
                case Reopen():
                    store.close()
                    store = RocksDBStateStore.open(path, settings=settings)
                case Drop(partition):
                    store.drop_partition(*PARTITIONS[partition])
                    model[partition].clear()
            _check(store, model, prefix)
        present = [i for i, rows in enumerate(model) if rows]
        assert [(p.topic, p.partition) for p in store.partitions()] == [
            PARTITIONS[i] for i in present
        ]
    finally:
        store.close()


@given(st.binary(max_size=6))
def test_prefix_successor_bounds_exactly_the_keys_with_the_prefix(prefix: bytes) -> None:
    successor = prefix_successor(prefix)
    if successor is None:
        assert prefix.strip(b"\xff") == b""
        return
    assert successor > prefix
    assert not successor.startswith(prefix)
    assert prefix + b"\xff" * 8 < successor

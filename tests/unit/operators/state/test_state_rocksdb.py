"""RocksDBStateStore: partitions, read-your-writes, metadata, lifecycle."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sluicegate.operators.state.codec import RocksDBSettings
from sluicegate.operators.state.exceptions import (
    InvalidPartitionError,
    StateClosedError,
    StateOpenError,
)
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.state.store import PartitionId, StateStore

StoreFactory = Callable[..., RocksDBStateStore]


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[StoreFactory]:
    """Factory: ``open_store(name="db", **options)``; every store is closed at teardown."""
    stores: list[RocksDBStateStore] = []

    def factory(name: str = "db", **options: int) -> RocksDBStateStore:
        store = RocksDBStateStore.open(tmp_path / name, settings=RocksDBSettings(**options))
        stores.append(store)
        return store

    yield factory
    for store in stores:
        store.close()


def test_get_put_delete_read_your_writes_before_and_after_flush(open_store: StoreFactory) -> None:
    store = open_store()
    rows = store.partition("orders", 3)
    assert rows.get(b"k") is None
    rows.put(b"k", b"v1")
    assert rows.get(b"k") == b"v1"
    assert store.pending_writes == 1
    store.flush_batch()
    assert store.pending_writes == 0
    assert rows.get(b"k") == b"v1"
    rows.put(b"k", b"v2")
    assert rows.get(b"k") == b"v2"
    rows.delete(b"k")
    assert rows.get(b"k") is None
    store.flush_batch()
    assert rows.get(b"k") is None
    rows.delete(b"never-written")  # not an error


def test_items_merges_pending_writes_over_stored_rows_in_key_order(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    rows = store.partition("t", 0)
    for key in (b"b", b"d", b"f", b"h"):
        rows.put(key, b"stored-" + key)
    store.flush_batch()
    rows.put(b"a", b"new-a")  # before every stored row
    rows.put(b"d", b"updated-d")  # overwrites a stored row
    rows.delete(b"f")  # hides a stored row
    rows.put(b"e", b"new-e")  # between stored rows
    rows.put(b"z", b"new-z")  # after every stored row
    assert list(rows.items()) == [
        (b"a", b"new-a"),
        (b"b", b"stored-b"),
        (b"d", b"updated-d"),
        (b"e", b"new-e"),
        (b"h", b"stored-h"),
        (b"z", b"new-z"),
    ]


def test_items_with_prefix_returns_only_matching_rows(open_store: StoreFactory) -> None:
    store = open_store()
    rows = store.partition("t", 0)
    for key in (b"run-1/a", b"run-1/b", b"run-2/a", b"run-1\xff", b"run-0"):
        rows.put(key, b"x")
    store.flush_batch()
    rows.put(b"run-1/c", b"x")
    assert [k for k, _ in rows.items(prefix=b"run-1/")] == [b"run-1/a", b"run-1/b", b"run-1/c"]
    assert [k for k, _ in rows.items(prefix=b"nope")] == []


def test_iteration_sees_the_state_when_it_began(open_store: StoreFactory) -> None:
    store = open_store()
    rows = store.partition("t", 0)
    rows.put(b"a", b"1")
    rows.put(b"c", b"3")
    store.flush_batch()
    iteration = rows.items()
    assert next(iteration) == (b"a", b"1")
    rows.put(b"b", b"2")
    rows.delete(b"c")
    store.flush_batch()
    assert list(iteration) == [(b"c", b"3")]


def test_partitions_are_isolated_even_when_names_share_prefixes(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    names = [("a", 1), ("a", 10), ("a", 256), ("ab", 1), ("a.b", 1), ("b", 1)]
    for topic, number in names:
        store.partition(topic, number).put(b"k", f"{topic}[{number}]".encode())
    store.flush_batch()
    for topic, number in names:
        assert list(store.partition(topic, number).items()) == [
            (b"k", f"{topic}[{number}]".encode())
        ]
    assert store.partitions() == sorted(PartitionId(t, n) for t, n in names)


def test_partitions_lists_pending_rows_and_skips_emptied_partitions(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    store.partition("t", 0).put(b"k", b"v")
    store.partition("t", 1).put(b"k", b"v")
    store.flush_batch()
    store.partition("t", 1).delete(b"k")  # pending delete empties t[1]
    store.partition("t", 2).put(b"k", b"v")  # pending only
    store.metadata().put(b"sink", b"x")  # metadata is not a partition
    assert store.partitions() == [PartitionId("t", 0), PartitionId("t", 2)]


def test_drop_partition_deletes_its_rows_only_and_it_can_be_written_again(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    for number in range(3):
        rows = store.partition("t", number)
        for i in range(100):
            rows.put(i.to_bytes(2, "big"), b"v")
    store.flush_batch()
    store.partition("t", 1).put(b"pending", b"v")
    store.drop_partition("t", 1)
    assert list(store.partition("t", 1).items()) == []
    assert store.partition("t", 1).get(b"pending") is None
    assert len(list(store.partition("t", 0).items())) == 100
    assert len(list(store.partition("t", 2).items())) == 100
    assert store.partitions() == [PartitionId("t", 0), PartitionId("t", 2)]
    store.partition("t", 1).put(b"again", b"v")
    assert list(store.partition("t", 1).items()) == [(b"again", b"v")]


def test_a_full_batch_is_applied_automatically(open_store: StoreFactory) -> None:
    store = open_store(max_pending_writes=4)
    rows = store.partition("t", 0)
    for i in range(3):
        rows.put(bytes([i]), b"v")
    assert store.pending_writes == 3
    rows.put(b"\x03", b"v")
    assert store.pending_writes == 0
    assert len(list(rows.items())) == 4


@pytest.mark.parametrize(
    ("topic", "number"), [("", 0), ("has space", 0), ("..", 0), ("x" * 250, 0), ("t", -1)]
)
def test_illegal_kafka_partitions_are_refused(
    open_store: StoreFactory, topic: str, number: int
) -> None:
    with pytest.raises(InvalidPartitionError) as caught:
        open_store().partition(topic, number)
    assert (caught.value.topic, caught.value.partition) == (topic, number)


@pytest.mark.parametrize("bad", ["text", 1, bytearray(b"x"), memoryview(b"x"), None])
def test_only_bytes_are_accepted_so_nothing_is_ever_pickled(
    open_store: StoreFactory, bad: object
) -> None:
    rows = open_store().partition("t", 0)
    with pytest.raises(TypeError, match="must be bytes"):
        rows.put(b"k", bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be bytes"):
        rows.put(bad, b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be bytes"):
        rows.get(bad)  # type: ignore[arg-type]


def test_close_applies_pending_writes_and_reopen_sees_them(tmp_path: Path) -> None:
    store = RocksDBStateStore.open(tmp_path / "db")
    store.partition("t", 0).put(b"k", b"v")
    store.close()
    store.close()  # idempotent
    with RocksDBStateStore.open(tmp_path / "db") as reopened:
        assert reopened.partition("t", 0).get(b"k") == b"v"


def test_close_releases_the_database_lock_despite_an_unfinished_iteration(
    tmp_path: Path,
) -> None:
    store = RocksDBStateStore.open(tmp_path / "db")
    rows = store.partition("t", 0)
    rows.put(b"a", b"1")
    rows.put(b"b", b"2")
    store.flush_batch()
    iteration = rows.items()
    assert next(iteration) == (b"a", b"1")
    store.close()
    assert list(iteration) == []
    with RocksDBStateStore.open(tmp_path / "db") as reopened:
        assert reopened.partition("t", 0).get(b"b") == b"2"


def test_a_second_open_of_the_same_directory_is_refused(open_store: StoreFactory) -> None:
    open_store()
    with pytest.raises(StateOpenError, match="LOCK"):
        open_store()


def test_every_operation_after_close_is_refused(tmp_path: Path) -> None:
    store = RocksDBStateStore.open(tmp_path / "db")
    rows = store.partition("t", 0)
    store.close()
    with pytest.raises(StateClosedError):
        rows.get(b"k")
    with pytest.raises(StateClosedError):
        rows.put(b"k", b"v")
    with pytest.raises(StateClosedError):
        rows.items()
    with pytest.raises(StateClosedError):
        store.flush_batch()
    with pytest.raises(StateClosedError):
        store.take_local_checkpoint(1, tmp_path / "checkpoints")


def test_the_rocksdb_store_satisfies_the_state_store_protocol(open_store: StoreFactory) -> None:
    store: StateStore = open_store()
    store.partition("t", 0).put(b"k", b"v")
    assert store.partition("t", 0).get(b"k") == b"v"

"""`HeapFreezer`: what a checkpoint leaves alive is skipped by full collections, and cyclic
garbage among it is freed again within ``thaw_every`` checkpoints."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from sluicegate.coordinator.heap import HeapFreezer


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")


def test_it_freezes_after_each_checkpoint_and_thaws_every_thaw_every() -> None:
    recorder = Recorder()
    freezer = HeapFreezer(thaw_every=3, collector=recorder)
    for _ in range(7):
        freezer.after_checkpoint()
    assert recorder.calls == ["freeze", "freeze", "unfreeze"] * 2 + ["freeze"]


def test_thaw_every_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="thaw_every"):
        HeapFreezer(thaw_every=0)


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def thawed_after() -> Iterator[None]:
    yield
    gc.unfreeze()  # the test process's heap, as it was


@pytest.mark.usefixtures("thawed_after")
def test_objects_alive_at_a_freeze_are_skipped_until_thawed_then_collected() -> None:
    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only the collector frees it
    gone = weakref.ref(a)
    freezer = HeapFreezer(thaw_every=2)
    freezer.after_checkpoint()  # frozen
    assert gc.get_freeze_count() > 0
    del a, b
    gc.collect()
    assert gone() is not None  # frozen: the full collection did not walk it
    freezer.after_checkpoint()  # thawed
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None

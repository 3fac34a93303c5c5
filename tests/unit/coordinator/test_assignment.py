"""Sticky, capacity-bound assignment plans, stored per attempt."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.assignment import load_assignment, plan_assignment, save_assignment
from operators.storage import open_storage

SUBTASKS = ["a#0", "a#1", "b#0", "b#1"]


def test_spreads_round_robin_within_slots() -> None:
    plan = plan_assignment(SUBTASKS, {"w2": 2, "w1": 2})
    assert plan == {"w1": ("a#0", "b#0"), "w2": ("a#1", "b#1")}


def test_keeps_subtasks_on_their_previous_live_worker() -> None:
    previous = {"a#0": "w2", "a#1": "w2", "b#0": "gone", "b#1": "w1"}
    plan = plan_assignment(SUBTASKS, {"w1": 2, "w2": 2}, previous)
    assert plan == {"w1": ("b#1", "b#0"), "w2": ("a#0", "a#1")}


def test_refuses_more_subtasks_than_slots() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        plan_assignment(SUBTASKS, {"w1": 3})


@given(
    slots=st.dictionaries(st.sampled_from(["w1", "w2", "w3"]), st.integers(1, 4), min_size=1),
    previous=st.dictionaries(st.sampled_from(SUBTASKS), st.sampled_from(["w1", "w2", "x"])),
)
def test_every_subtask_once_within_capacity(
    slots: dict[str, int], previous: dict[str, str]
) -> None:
    if sum(slots.values()) < len(SUBTASKS):
        return
    plan = plan_assignment(SUBTASKS, slots, previous)
    placed = [s for subs in plan.values() for s in subs]
    assert sorted(placed) == sorted(SUBTASKS)
    assert all(len(plan[w]) <= slots[w] for w in plan)


async def test_the_newest_plan_is_loaded_back() -> None:
    storage = open_storage("memory://")
    assert await load_assignment(storage) == {}
    await save_assignment(storage, 1, {"w1": ("a#0",), "w2": ("a#1",)})
    await save_assignment(storage, 2, {"w1": ("a#0", "a#1")})
    assert await load_assignment(storage) == {"a#0": "w1", "a#1": "w1"}


async def test_only_the_newest_plan_is_kept() -> None:
    storage = open_storage("memory://")
    for attempt in (1, 2, 5):
        await save_assignment(storage, attempt, {"w1": ("a#0",)})
    assert await storage.list("assignments") == ["assignments/5.json"]

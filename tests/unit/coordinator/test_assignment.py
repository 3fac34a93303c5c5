"""Balanced, sticky, capacity-bound assignment plans, stored per attempt."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from sluicegate.coordinator.assignment import (
    StoredPlan,
    load_assignment,
    load_plan,
    plan_assignment,
    save_assignment,
    unbalanced,
)
from sluicegate.operators.storage import open_storage

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


def test_two_workers_share_the_subtasks_one_worker_ran_alone() -> None:
    # The defect: every subtask stayed on w1 (sticky), w2 idled.
    previous = dict.fromkeys(SUBTASKS, "w1")
    plan = plan_assignment(SUBTASKS, {"w1": 4, "w2": 4}, previous)
    assert {w: len(subs) for w, subs in plan.items()} == {"w1": 2, "w2": 2}
    assert set(plan["w1"]) < set(SUBTASKS)  # w1 kept two of its own


def test_a_joining_worker_makes_the_assignment_unbalanced() -> None:
    current = {"w1": tuple(SUBTASKS)}
    assert unbalanced(SUBTASKS, {"w1": 4}, current) is None
    plan = unbalanced(SUBTASKS, {"w1": 4, "w2": 4}, current)
    assert plan is not None
    assert len(plan["w2"]) == 2
    assert unbalanced(SUBTASKS, {"w1": 4, "w2": 4}, plan) is None
    assert unbalanced(SUBTASKS, {"w1": 2}, current) is None  # too few slots: nothing to plan


WORKERS = [f"w{i}" for i in range(1, 6)]
MANY = [f"op{o}#{i}" for o in range(3) for i in range(4)]


def as_sets(plan: dict[str, tuple[str, ...]]) -> dict[str, set[str]]:
    return {w: set(subs) for w, subs in plan.items()}


@st.composite
def placements(draw: st.DrawFn) -> tuple[list[str], dict[str, int], dict[str, str]]:
    subtasks = draw(st.lists(st.sampled_from(MANY), unique=True, max_size=len(MANY)))
    slots = draw(st.dictionaries(st.sampled_from(WORKERS), st.integers(0, 6), min_size=1))
    extra = len(subtasks) - sum(slots.values())
    if extra > 0:  # enough slots in all
        first = sorted(slots)[0]
        slots[first] += extra
    previous = draw(st.dictionaries(st.sampled_from(MANY), st.sampled_from([*WORKERS, "gone"])))
    return subtasks, slots, previous


@given(placements())
def test_plans_are_balanced_where_slots_allow(
    case: tuple[list[str], dict[str, int], dict[str, str]],
) -> None:
    subtasks, slots, previous = case
    plan = plan_assignment(subtasks, slots, previous)
    assert sorted(s for subs in plan.values() for s in subs) == sorted(subtasks)
    counts = {w: len(plan[w]) for w in slots}
    for a in slots:
        assert counts[a] <= slots[a]
        for b in slots:
            # a runs two more than b only when b has no slot left
            assert counts[a] <= counts[b] + 1 or counts[b] == slots[b], (counts, slots)


@given(placements())
def test_plans_keep_subtasks_where_they_ran_as_far_as_balance_allows(
    case: tuple[list[str], dict[str, int], dict[str, str]],
) -> None:
    subtasks, slots, previous = case
    plan = plan_assignment(subtasks, slots, previous)
    for worker, placed in plan.items():
        ran_here = {s for s in subtasks if previous.get(s) == worker}
        assert len(ran_here & set(placed)) == min(len(placed), len(ran_here))


@given(placements())
def test_plans_are_deterministic_and_stable(
    case: tuple[list[str], dict[str, int], dict[str, str]],
) -> None:
    subtasks, slots, previous = case
    plan = plan_assignment(subtasks, slots, previous)
    shuffled = dict(reversed(list(slots.items())))
    assert plan_assignment(subtasks, shuffled, dict(reversed(list(previous.items())))) == plan
    # Planning again from the plan changes nothing: a balanced job is never reshuffled.
    again = {s: w for w, subs in plan.items() for s in subs}
    assert as_sets(plan_assignment(subtasks, slots, again)) == as_sets(plan)
    assert unbalanced(subtasks, slots, plan) is None


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


async def test_a_plan_keeps_the_checkpoint_its_attempt_restores() -> None:
    storage = open_storage("memory://")
    await save_assignment(storage, 3, {"w1": ("a#0",)}, restore_from=17)
    assert await load_plan(storage) == StoredPlan(3, {"w1": ("a#0",)}, 17)


async def test_a_plan_stored_before_restore_points_were_restores_none() -> None:
    storage = open_storage("memory://")
    legacy = b'{"assignment": {"w1": ["a#0"]}, "attempt": 2, "schema_version": 1}'
    await storage.put("assignments/2.json", legacy)
    assert await load_plan(storage) == StoredPlan(2, {"w1": ("a#0",)}, None)


async def test_a_plan_whose_restore_point_is_not_an_id_restores_none() -> None:
    storage = open_storage("memory://")
    body = (
        b'{"assignment": {"w1": ["a#0"]}, "attempt": 2, "restore_from": "7", "schema_version": 1}'
    )
    await storage.put("assignments/2.json", body)
    assert await load_plan(storage) == StoredPlan(2, {"w1": ("a#0",)}, None)

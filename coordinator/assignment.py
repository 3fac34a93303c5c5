"""Which worker runs which subtask, planned stickily and stored durably per attempt.

`plan_assignment` balances first, then keeps what it can:

1. how many subtasks each live worker runs (its *target*): one at a time to the worker with
   the fewest so far among those with a free slot, so counts differ by at most one except where
   a worker has no slot left; ties go to the worker that ran more subtasks in the previous
   attempt, then to the smaller worker id;
2. every worker keeps as many of its previous subtasks as its target allows (its local copy of
   the state makes the restore a hard link instead of a download), in subtask order;
3. the rest fill the remaining targets round-robin (one per worker per turn, in worker id
   order), so a worker gets a mix of operators.

The plan depends only on its arguments, and planning again from a plan gives the same plan:
a balanced assignment is never reshuffled. `unbalanced` tells the coordinator when the live
workers call for another plan (a worker joined), which it performs as a recovery.
The plan of attempt ``A`` is written to ``assignments/<A>.json`` before it is broadcast (older
plans are then deleted), with the checkpoint the attempt restores from, so a restarted
coordinator plans its first attempt from the last one, or adopts it as it is (restore point
included: retention pins the one the attempt really restored from). A plan written before the
restore point was stored reads as restoring from none.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from sluicegate.operators.storage import NotFoundError, Storage

__all__ = [
    "ASSIGNMENTS",
    "StoredPlan",
    "load_assignment",
    "load_plan",
    "plan_assignment",
    "save_assignment",
    "unbalanced",
]

ASSIGNMENTS = "assignments"
_SCHEMA_VERSION = 1

Assignment = dict[str, tuple[str, ...]]
"""worker id -> the subtasks it runs"""


def plan_assignment(
    subtasks: Sequence[str], slots: Mapping[str, int], previous: Mapping[str, str] | None = None
) -> Assignment:
    """Place ``subtasks`` on workers within their ``slots``, balanced, keeping each where
    ``previous`` (subtask -> worker) had it when balance allows; steps in the module docstring.

    Raises:
        ValueError: the workers have fewer slots than there are subtasks.
    """
    if sum(max(n, 0) for n in slots.values()) < len(subtasks):
        raise ValueError(f"{len(subtasks)} subtasks do not fit in {sum(slots.values())} slots")
    previous = previous or {}
    workers = sorted(slots)
    wanted = Counter(previous.get(s) for s in subtasks)
    target = dict.fromkeys(workers, 0)
    # Step 1 with a heap of (target, -wanted, worker), the order `min` would choose in: a
    # placement costs log(workers), not a scan of every worker (planned after every checkpoint
    # by `unbalanced`, that scan cost subtasks x workers).
    heap = [(0, -wanted[w], w) for w in workers if slots[w] > 0]
    heapq.heapify(heap)
    for _ in subtasks:
        count, minus_wanted, fewest = heapq.heappop(heap)
        target[fewest] = count + 1
        if count + 1 < slots[fewest]:
            heapq.heappush(heap, (count + 1, minus_wanted, fewest))
    plan: dict[str, list[str]] = {w: [] for w in workers}
    rest: list[str] = []
    for subtask in subtasks:
        worker = previous.get(subtask)
        if worker in plan and len(plan[worker]) < target[worker]:
            plan[worker].append(subtask)
        else:
            rest.append(subtask)
    left = deque(rest)
    while left:  # round-robin, one per worker per turn: each gets a mix of operators
        for worker in workers:
            if left and len(plan[worker]) < target[worker]:
                plan[worker].append(left.popleft())
    return {w: tuple(s) for w, s in plan.items()}


def unbalanced(
    subtasks: Sequence[str], slots: Mapping[str, int], current: Assignment
) -> Assignment | None:
    """The plan the live workers' ``slots`` call for, if it differs from ``current`` (e.g. a
    worker joined and would idle); None when ``current`` stands or the slots are too few."""
    if sum(slots.values()) < len(subtasks):
        return None
    previous = {s: w for w, subs in current.items() for s in subs}
    plan = plan_assignment(subtasks, slots, previous)
    return None if _placement(plan) == _placement(current) else plan


def _placement(assignment: Assignment) -> dict[str, frozenset[str]]:
    return {w: frozenset(subs) for w, subs in assignment.items() if subs}


class StoredPlan(NamedTuple):
    """The newest stored plan: its attempt, worker -> subtasks, and the checkpoint it restores."""

    attempt: int
    assignment: Assignment
    restore_from: int | None


async def save_assignment(
    storage: Storage, attempt: int, assignment: Assignment, restore_from: int | None = None
) -> None:
    """Write the plan of ``attempt``, restoring ``restore_from`` (before it is broadcast), then
    delete the plans of older attempts: only the newest is ever read, and every recovery
    writes one."""
    body = {
        "schema_version": _SCHEMA_VERSION,
        "attempt": attempt,
        "assignment": assignment,
        "restore_from": restore_from,
    }
    await storage.put(_path(attempt), json.dumps(body, sort_keys=True).encode())
    for older in await _stored_attempts(storage):
        if older < attempt:
            await storage.delete(_path(older))


async def load_plan(storage: Storage) -> StoredPlan | None:
    """The newest stored plan; None if none (or unreadable, or written by a newer
    coordinator: plan afresh rather than misread it)."""
    attempts = await _stored_attempts(storage)
    if not attempts:
        return None
    try:
        body = json.loads(await storage.get(_path(max(attempts))))
    except (NotFoundError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("schema_version") != _SCHEMA_VERSION:
        return None
    plan = {str(w): tuple(str(s) for s in subs) for w, subs in body["assignment"].items()}
    restore_from = body.get("restore_from")
    if not isinstance(restore_from, int) or isinstance(restore_from, bool):
        restore_from = None  # absent (an older plan) or not an id: restores from none
    return StoredPlan(int(body["attempt"]), plan, restore_from)


async def load_assignment(storage: Storage) -> dict[str, str]:
    """subtask -> worker of the newest stored plan; empty if none (or unreadable)."""
    loaded = await load_plan(storage)
    if loaded is None:
        return {}
    return {s: worker for worker, subs in loaded.assignment.items() for s in subs}


def _path(attempt: int) -> str:
    return f"{ASSIGNMENTS}/{attempt}.json"


async def _stored_attempts(storage: Storage) -> list[int]:
    names = (path.rsplit("/", 1)[-1] for path in await storage.list(ASSIGNMENTS))
    return [int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()]

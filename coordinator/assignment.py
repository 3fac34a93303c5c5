"""Which worker runs which subtask, planned stickily and stored durably per attempt.

`plan_assignment` keeps every subtask on the worker that ran it in the previous attempt when
that worker is alive and has a free slot (its local copy of the state makes the restore a
hard link instead of a download), then spreads the rest round-robin over the free slots.
The plan of attempt ``A`` is written to ``assignments/<A>.json`` before it is broadcast (older
plans are then deleted), so a restarted coordinator plans its first attempt from the last one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from operators.storage import NotFoundError, Storage

__all__ = ["ASSIGNMENTS", "load_assignment", "plan_assignment", "save_assignment"]

ASSIGNMENTS = "assignments"
_SCHEMA_VERSION = 1

Assignment = dict[str, tuple[str, ...]]
"""worker id -> the subtasks it runs"""


def plan_assignment(
    subtasks: Sequence[str], slots: Mapping[str, int], previous: Mapping[str, str] | None = None
) -> Assignment:
    """Place ``subtasks`` on workers within their ``slots``; ``previous``: subtask -> worker."""
    free = dict(sorted(slots.items()))
    plan: dict[str, list[str]] = {w: [] for w in free}
    rest: list[str] = []
    for subtask in subtasks:
        worker = (previous or {}).get(subtask)
        if worker in free and len(plan[worker]) < free[worker]:
            plan[worker].append(subtask)
        else:
            rest.append(subtask)
    # Round-robin the rest over the free slots, one per worker per turn.
    while rest:
        placed = False
        for worker in free:
            if rest and len(plan[worker]) < free[worker]:
                plan[worker].append(rest.pop(0))
                placed = True
        if not placed:
            raise ValueError(f"{len(rest)} subtasks do not fit in {sum(free.values())} slots")
    return {w: tuple(s) for w, s in plan.items()}


async def save_assignment(storage: Storage, attempt: int, assignment: Assignment) -> None:
    """Write the plan of ``attempt`` (before it is broadcast), then delete the plans of older
    attempts: only the newest is ever read, and every recovery writes one."""
    body = {"schema_version": _SCHEMA_VERSION, "attempt": attempt, "assignment": assignment}
    await storage.put(_path(attempt), json.dumps(body, sort_keys=True).encode())
    for older in await _stored_attempts(storage):
        if older < attempt:
            await storage.delete(_path(older))


async def load_assignment(storage: Storage) -> dict[str, str]:
    """subtask -> worker of the newest stored plan; empty if none (or unreadable)."""
    attempts = await _stored_attempts(storage)
    if not attempts:
        return {}
    try:
        body = json.loads(await storage.get(_path(max(attempts))))
    except (NotFoundError, ValueError):
        return {}
    if body.get("schema_version") != _SCHEMA_VERSION:
        return {}  # a newer coordinator wrote it: plan afresh rather than misread it
    return {s: worker for worker, subs in body["assignment"].items() for s in subs}


def _path(attempt: int) -> str:
    return f"{ASSIGNMENTS}/{attempt}.json"


async def _stored_attempts(storage: Storage) -> list[int]:
    names = (path.rsplit("/", 1)[-1] for path in await storage.list(ASSIGNMENTS))
    return [int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()]

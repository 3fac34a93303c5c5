"""Where an attempt runs: adopt the running one, or place a new one on the live workers.

Steps 1 and 2 of `coordinator.service`, kept apart from the coordinator's loop. `Placement`
remembers what lies between a new attempt and its assignment; the coordinator applies what
it answers (the attempt, the tracker, the `Assign` it broadcasts):

1. `start`: with a stored plan whose workers may still run it, the coordinator waits for
   their heartbeats (`adopting`, then `decide`: `coordinator.adoption`); otherwise, and
   whenever that fails, it takes a new attempt (`new_attempt`);
2. a new attempt's phase one: every live worker retires its older subtasks (`retiring`, a
   `RetireGate`); `slots` then answers which workers the attempt may use, once they offer a
   slot for every subtask. Fewer is logged once for each change of the slots on offer (the
   pipeline waits, silent otherwise, for workers that may never come);
3. `plan`: the checkpoint to restore (`coordinator.restore_choice`) and the sticky plan
   (`coordinator.assignment`), stored before the coordinator broadcasts it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from sluicegate.coordinator.adoption import Adopt, Restart, Wait, decide_adoption
from sluicegate.coordinator.assignment import (
    Assignment,
    StoredPlan,
    load_assignment,
    load_plan,
    plan_assignment,
    save_assignment,
)
from sluicegate.coordinator.numbering import take_attempt
from sluicegate.coordinator.restore_choice import CannotRestore, choose_restore
from sluicegate.coordinator.retirement import RetireGate
from sluicegate.coordinator.savepoints.restoring import already_restored
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.protocol.messages import Heartbeat
from sluicegate.operators.storage import Storage
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

__all__ = ["Placed", "Placement"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Placed:
    """A new attempt's plan, stored: ``assignment`` restores from ``manifest``."""

    assignment: Assignment
    manifest: CheckpointManifest | None
    rebuilt: bool
    """``manifest`` is a checkpoint written for this restore (its id is used now)."""


class Placement:
    """Placement of ``graph``'s subtasks, attempt after attempt; steps in the module docstring."""

    def __init__(
        self,
        graph: JobGraph,
        subtasks: list[str],
        storage: Storage,
        manifests: ManifestStore,
        settings: CoordinatorSettings,
    ) -> None:
        self.graph = graph
        self.storage = storage
        self.manifests = manifests
        self.settings = settings
        self.subtasks = subtasks
        self.previous: dict[str, str] | None = None
        """subtask -> worker in the last attempt (None: this coordinator has placed nothing)."""
        self.retiring: RetireGate | None = None
        """Phase one of a new attempt, until it is assigned."""
        self._adoption: tuple[StoredPlan, float] | None = None
        """While deciding whether to adopt: the plan's attempt, the plan, and the deadline."""
        self._offered: dict[str, int] | None = None
        """The too few slots last logged for the attempt being placed."""

    @property
    def adopting(self) -> bool:
        """A stored plan's workers are being waited for (step 1)."""
        return self._adoption is not None

    async def start(self, now: float) -> bool:
        """Step 1: True to wait for the stored plan's workers, False for a new attempt."""
        adopt = self.settings.adopt_seconds > 0
        if adopt and (name := self.settings.from_savepoint) is not None:
            adopt = await already_restored(self.storage, name)  # else the savepoint's state
        loaded = await load_plan(self.storage) if adopt else None
        if loaded is not None:
            self._adoption = (loaded, now + self.settings.adopt_seconds)
        return loaded is not None

    def give_up_adoption(self) -> None:
        """A stop came before the decision: the caller takes a new attempt."""
        self._adoption = None

    def decide(self, alive: Mapping[str, Heartbeat], now: float) -> Adopt | Restart | None:
        """Step 1's decision from the ``alive`` workers' heartbeats: `Adopt`, `Restart` (take
        a new attempt: the plan's workers do not all run it, or the adoption window passed),
        or None to wait."""
        assert self._adoption is not None
        stored, deadline = self._adoption
        attempt = stored.attempt
        decision = decide_adoption(attempt, stored.assignment, alive)
        if isinstance(decision, Wait):
            if now < deadline:
                return None
            decision = Restart(f"no heartbeat from {', '.join(decision.missing)}")
        self._adoption = None
        if isinstance(decision, Adopt):
            self.previous = {s: w for w, subs in decision.assignment.items() for s in subs}
            decision = replace(decision, restore_from=stored.restore_from)
        else:
            logger.info(
                "pipeline %s: not adopting attempt %s: %s",
                self.graph.name,
                attempt,
                decision.reason,
            )
        return decision

    async def new_attempt(self, now: float) -> int:
        """Take the next attempt durably and open its phase one; the attempt."""
        attempt = await take_attempt(self.storage)
        first = self.previous is None
        settle = self.settings.settle_seconds if first else 0.0
        deadline = now + self.settings.retire_wait_seconds
        self.retiring = RetireGate(attempt, deadline, settle_seconds=settle)
        self._offered = None
        return attempt

    def slots(self, alive: Mapping[str, int], now: float) -> dict[str, int] | None:
        """Step 2: the slots (worker -> slots) the new attempt may use now, or None to wait."""
        assert self.retiring is not None
        slots = self.retiring.ready(alive, now)
        if slots is None:
            return None
        if sum(max(n, 0) for n in slots.values()) >= len(self.subtasks):
            return slots
        if slots != self._offered:
            self._offered = slots
            logger.warning(
                "pipeline %s: attempt %s waits for %s; start more workers or give them more "
                "--slots",
                self.graph.name,
                self.retiring.attempt,
                self.waiting_for,
            )
        return None

    @property
    def waiting_for(self) -> str | None:
        """What placing the attempt waits for now, in words (None: nothing is being placed)."""
        if self._adoption is not None:
            return f"the heartbeats of attempt {self._adoption[0].attempt}'s workers, to adopt it"
        if self.retiring is None:
            return None
        if self._offered is None:
            heard = self.retiring.first_seen is not None  # a live worker was seen
            return "the live workers to retire their older subtasks" if heard else "workers"
        offered = ", ".join(f"{w}: {n}" for w, n in sorted(self._offered.items()))
        return (
            f"slots: {len(self.subtasks)} subtasks, the live workers offer "
            f"{sum(self._offered.values())} ({offered or 'no worker'})"
        )

    async def plan(
        self, slots: Mapping[str, int], on_fallback: Callable[[], None]
    ) -> Placed | CannotRestore:
        """Step 3: choose the checkpoint to restore and store the plan for ``slots``."""
        assert self.retiring is not None
        attempt = self.retiring.attempt
        choice = await choose_restore(
            self.storage,
            self.manifests,
            self.graph,
            self.subtasks,
            attempt=attempt,
            settings=self.settings,
            on_fallback=on_fallback,
        )
        if isinstance(choice, CannotRestore):
            return choice
        if self.previous is None:
            self.previous = await load_assignment(self.storage)
        assignment = plan_assignment(self.subtasks, slots, self.previous)
        restore_from = choice.manifest.checkpoint_id if choice.manifest else None
        await save_assignment(self.storage, attempt, assignment, restore_from)
        self.previous = {s: w for w, subs in assignment.items() for s in subs}
        return Placed(assignment, choice.manifest, choice.rebuilt)

    def placed(self, alive: Mapping[str, int]) -> None:
        """The plan was taken up: phase one ends (logs the workers that never retired)."""
        assert self.retiring is not None
        if silent := self.retiring.waiting_for(alive):
            logger.warning(
                "attempt %s: workers %s did not retire their subtasks within %.0f s; assigned "
                "without them (a call they still run may be repeated)",
                self.retiring.attempt,
                silent,
                self.settings.retire_wait_seconds,
            )
        self.retiring = None

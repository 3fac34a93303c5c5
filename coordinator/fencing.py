"""One coordinator per pipeline: the newest coordinator's epoch fences an older one still alive.

A pipeline has one coordinator, but a second can start while the first still runs: a
Kubernetes node cut off from the control plane keeps its pod running while the Deployment
starts a replacement elsewhere, or someone starts ``sluicegate coordinator`` twice. Two
coordinators would each take attempts and send them to the same workers: every attempt a
global restart of the job, and a coordinator whose attempt the workers left behind would
trigger checkpoints nobody takes, forever.

Each coordinator takes an *epoch* when it starts, create-if-absent at ``coordinators/<E>`` in
checkpoint storage (`take_epoch`), so no two share one. It reads the newest epoch again
(`Fence.check`) every ``check_seconds``, and before it acts on a worker that runs an attempt
newer than its own; `Fence.on_newest` decides (sans-IO). Once a newer epoch exists, the
coordinator is *fenced*: it sends nothing more and stays idle until its process is stopped.
It does not exit: under a Deployment an exit restarts the pod, whose new coordinator would
take a newer epoch and fence the other in turn, over and over.

What fencing does not close: until its next check (``check_seconds``, default 1) a fenced
coordinator may still trigger or commit a checkpoint. Manifests and attempts are created
only if absent, and a worker takes only an attempt newer than any it retired for, so the
overlap repeats no output and loses none: at worst a checkpoint aborts, or a barrier sent
twice fails a subtask and the job recovers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sluicegate.coordinator.exceptions import FencedError
from sluicegate.coordinator.numbering import newest_number, take_next
from sluicegate.operators.storage import Storage, StorageError
from sluicegate.operators.storage.layout import COORDINATORS, attempt_marker, coordinator_marker

__all__ = ["Fence", "newest_epoch", "placed_elsewhere", "take_epoch"]

logger = logging.getLogger(__name__)


async def newest_epoch(storage: Storage) -> int:
    """The newest coordinator epoch taken (0: none). Keys that are not epochs are ignored."""
    return await newest_number(storage, COORDINATORS)


async def take_epoch(storage: Storage) -> int:
    """Take the next coordinator epoch durably and return it."""
    return await take_next(storage, COORDINATORS, coordinator_marker)


@dataclass(slots=True)
class Fence:
    """Coordinator epoch ``epoch``'s view of the newest epoch, read every ``check_seconds``."""

    epoch: int
    check_seconds: float
    last_check: float
    fenced_by: int | None = None
    """The newer epoch that fenced this coordinator (None: not fenced)."""

    def refuse(self) -> None:
        """Raise `FencedError` once fenced: a fenced coordinator takes no request."""
        if self.fenced_by is not None:
            raise FencedError(self.epoch, self.fenced_by)

    def due(self, now: float) -> bool:
        """Whether to read the newest epoch now (never again once fenced)."""
        return self.fenced_by is None and now >= self.last_check + self.check_seconds

    def on_newest(self, newest: int, now: float) -> bool:
        """The newest epoch was read at ``now``; whether this coordinator is fenced."""
        self.last_check = now
        if newest > self.epoch and self.fenced_by is None:
            self.fenced_by = newest
        return self.fenced_by is not None

    async def check(self, storage: Storage, now: float) -> bool:
        """Read the newest epoch from ``storage`` and apply it (`on_newest`; after a failed
        read the next check, ``check_seconds`` later, reads again); whether this coordinator
        is fenced."""
        if self.fenced_by is not None:
            return True
        try:
            newest = await newest_epoch(storage)
        except StorageError as exc:
            self.last_check = now  # not again on every tick
            logger.warning("reading coordinator epochs failed: %s", exc)
            return False
        if self.on_newest(newest, now):
            logger.error(
                "coordinator epoch %s started, so this one (epoch %s) is fenced: it sends "
                "nothing more and idles; stop this process (one coordinator per pipeline)",
                newest, self.epoch,
            )  # fmt: skip
        return self.fenced_by is not None


async def placed_elsewhere(
    fence: Fence | None, storage: Storage, worker: str, attempt: int, now: float
) -> str | None:
    """``worker`` reports ``attempt``, newer than the coordinator's own: the reason to take
    the workers back with a newer attempt still, or None to leave it: this coordinator is
    fenced, or no coordinator ever took that attempt (the report is wrong: logged, and it
    restarts nothing), or storage cannot tell now (the next heartbeat asks again)."""
    if fence is not None and await fence.check(storage, now):
        return None
    try:
        taken = await storage.exists(attempt_marker(attempt))
    except StorageError as exc:
        logger.warning("reading attempt %s failed: %s", attempt, exc)
        return None
    if not taken:
        logger.warning(
            "worker %s reports attempt %s, which no coordinator took: ignored", worker, attempt
        )
        return None
    return f"another coordinator placed attempt {attempt} on {worker}"

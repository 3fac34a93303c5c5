"""Whether a starting coordinator adopts the running attempt instead of restarting the job.

A coordinator that crashed and came back (its process SIGKILLed, its pod moved) finds the
workers still running the attempt it had assigned. Restarting the job from the last checkpoint
would cut off their work (an agent's tool call in flight) and replay everything since; Flink's
JobManager failover without HA costs exactly that. Instead the new coordinator adopts the
attempt when every worker of the newest stored plan reports, in its heartbeats, that attempt
and every subtask the plan gave it. Sans-IO: fed the plan and the live workers' heartbeats.

* `Adopt`: all planned workers are alive at the plan's attempt with all their subtasks;
* `Restart`: one of them reports another attempt or is missing subtasks (it restarted, or a
  newer attempt was being assigned when the coordinator died): take a new attempt;
* `Wait`: some planned worker has not been heard from yet (heartbeats arrive every second);
  the caller restarts when its adoption window has passed.

What adoption gives up: the checkpoint in flight when the old coordinator died never completes
(its id is used: the next one is newer, and subtasks aligning on it abort it on the newer
barrier, by the alignment rules), and the outputs it held are published with the next one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluicegate.operators.protocol.messages import Heartbeat

__all__ = ["Adopt", "Restart", "Wait", "decide_adoption"]


@dataclass(frozen=True, slots=True)
class Adopt:
    attempt: int
    assignment: dict[str, tuple[str, ...]]
    restore_from: int | None = None
    """The checkpoint the adopted attempt restored from (as its stored plan says)."""


@dataclass(frozen=True, slots=True)
class Restart:
    reason: str


@dataclass(frozen=True, slots=True)
class Wait:
    missing: tuple[str, ...]


def decide_adoption(
    attempt: int, plan: Mapping[str, tuple[str, ...]], alive: Mapping[str, Heartbeat]
) -> Adopt | Restart | Wait:
    """Adopt ``attempt`` with ``plan`` (worker -> subtasks) given the ``alive`` workers' last
    heartbeats, restart, or wait for the workers not heard from yet."""
    missing = []
    for worker, subtasks in sorted(plan.items()):
        if not subtasks:
            continue
        beat = alive.get(worker)
        if beat is None:
            missing.append(worker)
        elif beat.attempt != attempt:
            return Restart(f"worker {worker} runs attempt {beat.attempt}, not {attempt}")
        elif not set(subtasks) <= set(beat.subtasks):
            lost = sorted(set(subtasks) - set(beat.subtasks))
            return Restart(f"worker {worker} no longer runs {', '.join(lost)}")
    if missing:
        return Wait(tuple(missing))
    return Adopt(attempt, {w: tuple(s) for w, s in plan.items()})

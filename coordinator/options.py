"""How a coordinator behaves: checkpoint interval and timeouts, failure detection, retention,
stop, restarts, adoption and fencing (`Coordinator(settings=...)`; the CLI builds it from
`coordinator.config.CoordinatorSettings`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sluicegate.coordinator.restart import RestartPolicy

__all__ = ["CoordinatorOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorOptions:
    interval_seconds: float = 1.0
    min_pause_seconds: float = 0.0
    timeout_seconds: float = 60.0
    heartbeat_timeout_seconds: float = 6.0
    keep_checkpoints: int = 3
    audit_every: int = 10
    """Completed checkpoints between two orphan audits (each lists the whole storage)."""
    blob_gc_interval_seconds: float | None = 3600.0
    """At most this often, after a completed checkpoint, delete the blobs past their TTL
    (agents' payloads by reference, ``docs/blobs.md``); None: never (``sluicegate blobs gc``
    by hand or from cron)."""
    stop_timeout_seconds: float = 60.0
    """How long a graceful stop waits for subtasks to stop once told to (the final checkpoint
    before it is bounded by ``timeout_seconds``)."""
    restart_policy: RestartPolicy = field(
        default_factory=lambda: RestartPolicy(initial_delay_seconds=0.5, max_delay_seconds=30)
    )
    adopt_seconds: float = 3.0
    """How long a starting coordinator waits for the workers of the newest plan to report the
    attempt they run, to adopt it (0: always take a new attempt)."""
    from_savepoint: str | None = None
    """Restore the job from this savepoint (once: `coordinator.savepoints.restoring`)."""
    allow_non_restored_state: bool = False
    """Restore even if the savepoint or checkpoint holds state the pipeline cannot take (an
    operator it no longer has): that state is dropped."""
    full_checkpoint_every: int = 0
    """Every K-th checkpoint (its id a multiple of K) is full: its files are its own, shared
    with no other checkpoint (0: only on demand)."""
    retire_wait_seconds: float = 20.0
    """How long a new attempt waits for every live worker to retire its older subtasks before
    assigning without the silent ones; keep it above the workers' ``retire_seconds``."""
    settle_seconds: float = 1.0
    """A starting coordinator's first placement waits this long after it hears the first
    worker (one worker heartbeat), so workers started together all get subtasks (0: place as
    soon as the live workers have enough slots)."""
    fence_check_seconds: float = 1.0
    """How often a coordinator reads whether a newer coordinator of the pipeline started,
    which fences it (`coordinator.fencing`)."""
    periodic_checkpoints: bool = True
    """False: checkpoints only when asked (`Coordinator.trigger_checkpoint`, a stop)."""

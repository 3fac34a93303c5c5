"""What the coordinator's per-checkpoint and per-pass work costs, counted in operations (not
timed), at sizes where a scan of every subtask or worker per ack, per pass or per placement
shows: each of these grew with the square of the job's size until `bench.coordinator_scale`
found it (docs/performance.md, "The coordinator at scale").

Operations are counted in two ways that load does not change: hashes of subtask names (a
`str` whose ``__hash__`` counts, so a set operation over every name shows), and Python calls
(``sys.setprofile``), which a scan with a key function or a generator shows."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator, ValuesView
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest

from sluicegate.coordinator.assignment import plan_assignment
from sluicegate.coordinator.checkpoints.backoff import StorageBackoff
from sluicegate.coordinator.checkpoints.tracker import CheckpointTracker, CommitManifest
from sluicegate.coordinator.housekeeping import Housekeeping
from sluicegate.coordinator.liveness import LivenessTracker
from sluicegate.coordinator.running import Rebalance, Running, RunningAction
from sluicegate.operators.protocol.messages import Assign, CheckpointAck
from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import (
    CheckpointManifest,
    ManifestStore,
    SubtaskSnapshot,
)
from tests.helpers import fake_state_handle


class Counted(str):
    """A subtask name that counts how often it is hashed (`Counted.hashes`)."""

    hashes = 0

    def __hash__(self) -> int:
        Counted.hashes += 1
        return str.__hash__(self)


@contextmanager
def python_calls() -> Iterator[list[int]]:
    """Count Python function calls (and generator resumptions) in the block: ``[count]``."""
    count = [0]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            count[0] += 1

    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)


def calls_of(work: Callable[[], object]) -> int:
    with python_calls() as count:
        work()
    return count[0]


def test_a_checkpoint_of_n_subtasks_hashes_their_names_a_few_times_each_not_n_times() -> None:
    n = 2000
    names = [Counted(f"op#{i}") for i in range(n)]
    tracker = CheckpointTracker(
        subtasks=names, next_checkpoint_id=1, attempt=1, interval_seconds=1,
        min_pause_seconds=0, timeout_seconds=60,
    )  # fmt: skip
    trigger = tracker.trigger(0.0)
    assert trigger is not None
    acks = [
        CheckpointAck(s, 1, 1, {}, fake_state_handle(f"shared/{i}")) for i, s in enumerate(names)
    ]
    Counted.hashes = 0
    answers = [tracker.on_ack(ack) for ack in acks]
    for _ in range(100):  # passes of the loop while it is in flight: a timeout check each
        assert tracker.on_tick(1.0) is None
    commit = answers[-1]
    assert isinstance(commit, CommitManifest)
    assert len(commit.acks) == n
    assert all(a is None for a in answers[:-1])
    # a set difference per ack (the bug) hashed n**2 / 2 = 2,000,000 names here
    assert Counted.hashes <= 10 * n, Counted.hashes


def test_finding_the_dead_workers_looks_at_the_dead_ones_not_at_every_worker() -> None:
    tracker: LivenessTracker[None] = LivenessTracker(timeout_seconds=6)
    for i in range(2000):
        tracker.on_heartbeat(f"w{i:04d}", i / 1000, None)
    assert calls_of(lambda: [tracker.dead(5.0) for _ in range(100)]) <= 100 * 5
    assert tracker.dead(6.5) == [f"w{i:04d}" for i in range(500)]  # 0 .. 0.499 s old enough
    assert calls_of(lambda: tracker.dead(6.5)) <= 510
    assert tracker.next_deadline() == 6.0


def test_a_heartbeat_out_of_clock_order_keeps_dead_workers_found() -> None:
    tracker: LivenessTracker[None] = LivenessTracker(timeout_seconds=6)
    tracker.on_heartbeat("a", 10, None)
    tracker.on_heartbeat("b", 2, None)  # an injected clock going back for another worker
    tracker.on_heartbeat("c", 11, None)
    assert tracker.dead(9) == ["b"]
    assert tracker.alive(9) == ["a", "c"]
    assert tracker.next_deadline() == 8


@pytest.mark.parametrize("per_worker", [10, 100])
def test_planning_grows_linearly_with_the_subtasks_and_workers(per_worker: int) -> None:
    def plan(n: int) -> int:
        subtasks = [f"op#{i}" for i in range(n)]
        workers = {f"w{i:05d}": per_worker for i in range(n // per_worker)}
        previous = {s: f"w{i % (n // per_worker):05d}" for i, s in enumerate(subtasks)}
        return calls_of(lambda: plan_assignment(subtasks, workers, previous))

    small, large = plan(2000), plan(8000)
    # a scan of every worker per subtask (the bug) made 4x the subtasks 16x the calls here
    assert large <= 4.5 * small, (small, large)


def test_housekeeping_reads_no_manifest_it_committed_and_any_other_once() -> None:
    storage = open_storage("memory://")
    store = ManifestStore(storage)
    reads: list[str] = []
    get = storage.get

    async def counting_get(path: str) -> bytes:
        reads.append(path)
        return await get(path)

    storage.get = counting_get  # type: ignore[method-assign]

    def manifest(n: int) -> CheckpointManifest:
        acks = [
            CheckpointAck(f"op#{i}", n, 1, {}, fake_state_handle(f"shared/{i}-{n}", n))
            for i in range(3)
        ]
        return CheckpointManifest.from_acks("p", n, 1, acks)

    async def scenario() -> None:
        before = [manifest(n) for n in (1, 2)]  # committed by an earlier coordinator
        for m in before:
            await store.commit(m)
        housekeeping = Housekeeping(storage, keep=3, audit_every=4, blob_gc_interval_s=None)
        for n in range(3, 15):
            m = manifest(n)
            await store.commit(m)
            housekeeping.committed(m)
            await housekeeping.after_completed(n, pinned=())
        assert await store.completed() == [12, 13, 14]

    asyncio.run(scenario())
    manifest_reads = [p for p in reads if p.endswith("_manifest.json")]
    assert sorted(manifest_reads) == [
        "checkpoints/1/_manifest.json",
        "checkpoints/2/_manifest.json",
    ]


class Rows(dict[str, SubtaskSnapshot]):
    """A manifest's rows, counting the walks over them (`Rows.walks`: calls of ``values``)."""

    walks = 0

    def values(self) -> ValuesView[SubtaskSnapshot]:  # type: ignore[override]
        Rows.walks += 1
        return super().values()


def test_retention_walks_each_manifest_once_not_every_retained_one_per_checkpoint() -> None:
    """Retention after every checkpoint reference-counts the files of every retained manifest:
    walking their rows each time (the bug) cost ``keep`` walks of a row per subtask a
    checkpoint; each manifest's paths are now worked out once (`KnownManifests.paths`)."""
    storage = open_storage("memory://")
    store = ManifestStore(storage)
    keep = 5

    def manifest(n: int) -> CheckpointManifest:
        acks = [
            CheckpointAck(f"op#{i}", n, 1, {}, fake_state_handle(f"shared/{i}-{n}", n))
            for i in range(20)
        ]
        built = CheckpointManifest.from_acks("p", n, 1, acks)
        return built.model_construct(**{**dict(built), "subtasks": Rows(built.subtasks)})

    walks: list[int] = []

    async def scenario() -> None:
        housekeeping = Housekeeping(storage, keep=keep, audit_every=4, blob_gc_interval_s=None)
        for n in range(1, 16):
            m = manifest(n)
            await store.commit(m)
            housekeeping.committed(m)
            Rows.walks = 0
            await housekeeping.after_completed(n, pinned=())
            walks.append(Rows.walks)
        assert await store.completed() == list(range(11, 16))

    asyncio.run(scenario())
    # The new manifest's paths and whether it is full: once each; the code before walked
    # every retained manifest twice a checkpoint (12 walks here once 5 were retained).
    assert max(walks) <= 2, walks


def test_the_rebalance_check_plans_again_only_when_the_live_workers_changed() -> None:
    """After every completed checkpoint the coordinator asks whether the live workers call
    for another placement; planning every subtask each time (the bug) cost thousands of
    calls a checkpoint here, for an answer that changes only with the workers."""
    n = 2000
    subtasks = [f"op#{i}" for i in range(n)]
    slots = {f"w{i:04d}": 10 for i in range(n // 10)}
    tracker = CheckpointTracker(
        subtasks=subtasks, next_checkpoint_id=1, attempt=1, interval_seconds=0,
        min_pause_seconds=0, timeout_seconds=60,
    )  # fmt: skip
    assign = Assign(1, None, 1, plan_assignment(subtasks, slots))
    running = Running(tracker, assign, StorageBackoff(), subtasks=subtasks)
    handle = fake_state_handle("shared/x")

    def completed(checkpoint: int, live: dict[str, int]) -> tuple[int, list[RunningAction]]:
        assert running.tick(float(checkpoint))
        for s in subtasks:
            running.on_ack(CheckpointAck(s, checkpoint, 1, {}, handle))
        manifest = CheckpointManifest.model_construct(checkpoint_id=checkpoint)
        answers: list[RunningAction] = []
        calls = calls_of(lambda: answers.extend(running.on_manifest_committed(manifest, 0.0, live)))
        return calls, answers

    first, answers = completed(1, slots)
    assert not any(isinstance(a, Rebalance) for a in answers)
    again, answers = completed(2, dict(slots))
    assert not any(isinstance(a, Rebalance) for a in answers)
    assert first > n  # it planned
    assert again < 50, again  # it did not
    _, answers = completed(3, {**slots, "w9999": 10})  # a worker joined: it plans, and moves
    assert any(isinstance(a, Rebalance) for a in answers)

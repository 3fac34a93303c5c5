"""The coordinator at scale, simulated: its CPU per checkpoint at 100 to 10,000 subtasks.

    uv run python -m bench.coordinator_scale [--subtasks 100,1000,10000] [--checkpoints 8]
        [--rounds 3] [--per-worker 10]

The real `Coordinator` and its checkpoint tracker, driven over the in-memory control link
(`operators.runtime.control.InMemoryBus`, the link of `LocalJob`) with real checkpoint storage
(a temporary folder), and simulated workers in place of real ones: ``--per-worker`` subtasks
each, every worker heartbeating once a (simulated) second, every subtask acking every
checkpoint at once with a state handle of two files (uploaded to storage first, outside the
measured span, so that retention deletes files that exist) and its input positions. The job is two
operators of ``subtasks / 2`` each. Time is simulated: the coordinator gets the simulated
clock in every `Coordinator.step` (heartbeats, intervals and timeouts run on it), so a run
takes as long as the coordinator's own work. Its messages arrive a worker's at a time: one
`step` per worker's batch (its acks, or its heartbeat), as a busy control topic hands them over.

Measured around the coordinator's work only (the simulated workers' CPU is outside it):
``time.process_time`` and ``time.perf_counter`` over each `step` and the decoding of what it
receives (over Kafka the coordinator decodes every message; the in-memory bus decodes at the
sender, so the bench encodes in the simulated worker and decodes inside the measured span).
Per checkpoint:

* CPU per checkpoint: the coordinator's CPU seconds from the completion of the checkpoint
  before to this one's (the heartbeats, ticks and housekeeping of the interval included), and
  the part of it from the step that triggers it to the one that broadcasts ``completed(n)``;
* trigger to complete: the coordinator's wall time over the same steps; the subtasks ack at
  once, so this is the latency the coordinator itself adds (manifest commit included).

Each run takes ``--checkpoints`` checkpoints, fails one subtask half way (the coordinator then
recovers: a new attempt, phase one, a new plan, the assignment) and takes as many again; the
recovery's CPU and wall time are reported apart. ``--rounds`` rounds, each running every size
one after the other (paired), so a size's ratio against the smallest is taken within a round;
the table prints the median and the spread of those ratios over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from bench.stats import paired_ratios, percentile, spread
from bench.table import record, report_table
from sluicegate.coordinator.service import Coordinator
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.protocol.messages import (
    Assign,
    CheckpointAck,
    CheckpointCompleted,
    FromWorker,
    Heartbeat,
    Retire,
    Retired,
    SnapshotFile,
    StateHandle,
    SubtaskFailed,
    ToWorker,
    TriggerCheckpoint,
)
from sluicegate.operators.protocol.wire import decode_message, encode_message
from sluicegate.operators.runtime.control import CoordinatorLink, InMemoryBus
from sluicegate.operators.storage import open_storage

BENCH = "coordinator_scale"
HEARTBEAT_S = 1.0
TICK_S = 0.05
"""Simulated seconds between passes of the loop (the coordinator's own receive timeout)."""
SETTINGS = CoordinatorSettings(
    interval_seconds=1.0,
    settle_seconds=0,
    restart_delay_seconds=0,
    adopt_seconds=0,
    heartbeat_timeout_seconds=6.0,
)


def build_graph(subtasks: int) -> JobGraph:
    """Two operators of ``subtasks / 2`` subtasks each (one input partition a subtask)."""
    half = max(subtasks // 2, 1)
    p = Pipeline("scale")
    p.source("scale-in", partitions=half)
    p.topic("scale-mid", partitions=half)
    p.sink("scale-out", partitions=half)
    p.operator("a", lambda r, c: None, inputs="scale-in", outputs="scale-mid", parallelism=half)
    p.operator("b", lambda r, c: None, inputs="scale-mid", outputs="scale-out", parallelism=half)
    return p.build()


@dataclass
class Measured:
    """What the coordinator spent, per checkpoint and on the recovery, in one run."""

    cpu_s: list[float] = field(default_factory=list)
    """From the completion of the checkpoint before to this one's: the whole interval."""
    span_cpu_s: list[float] = field(default_factory=list)
    """From this checkpoint's trigger to its completion (housekeeping after it excluded)."""
    wall_s: list[float] = field(default_factory=list)
    recovery_cpu_s: float = 0.0
    recovery_wall_s: float = 0.0


class SimulatedWorkers:
    """Workers that do what the coordinator asks at once: retire, run their assignment, ack
    every checkpoint; and heartbeat every `HEARTBEAT_S` simulated seconds, spread evenly."""

    def __init__(self, graph: JobGraph, per_worker: int) -> None:
        subtasks = [str(s) for s in graph.subtasks()]
        count = -(-len(subtasks) // per_worker)
        self.ids = [f"w{i:05d}" for i in range(count)]
        self.slots = per_worker
        self.attempt = 0
        self.assignment: dict[str, tuple[str, ...]] = {}
        self.completed: list[int] = []
        self._positions = {
            str(s): dict.fromkeys(graph.input_partitions(s), 1000) for s in graph.subtasks()
        }
        self._next_beat = {w: i * HEARTBEAT_S / count for i, w in enumerate(self.ids)}
        self.uploads: list[str] = []
        """Files the acks name that storage does not hold yet: the driver writes them before
        it hands the acks over (outside the measured span), as subtasks upload before they
        ack, so that retention deletes files that exist."""
        self._uploaded: set[str] = set()

    def react(self, sent: Iterable[ToWorker]) -> list[list[bytes]]:
        """Batches (one per worker) of what the workers answer to ``sent``, in wire form."""
        batches: list[list[bytes]] = []
        for message in sent:
            if isinstance(message, Retire):
                batches.extend([encode_message(Retired(w, message.attempt))] for w in self.ids)
            elif isinstance(message, Assign):
                self.attempt, self.assignment = message.attempt, message.assignment
                batches.extend([self._beat(w)] for w in self.ids)
            elif isinstance(message, TriggerCheckpoint) and message.attempt == self.attempt:
                batches.extend(self._acks(w, message.checkpoint_id) for w in self.ids)
            elif isinstance(message, CheckpointCompleted):
                self.completed.append(message.checkpoint_id)
        return batches

    def heartbeats(self, now: float) -> list[list[bytes]]:
        """The heartbeats due by ``now``, a batch each."""
        due = [w for w, at in self._next_beat.items() if at <= now]
        for w in due:
            self._next_beat[w] += HEARTBEAT_S
        return [[self._beat(w)] for w in due]

    def failure(self) -> bytes:
        subtask = next(s for subs in self.assignment.values() for s in subs)
        return encode_message(SubtaskFailed(subtask, self.attempt, "simulated failure"))

    def _beat(self, worker: str) -> bytes:
        hosted = self.assignment.get(worker, ())
        return encode_message(Heartbeat(worker, f"{worker}-1", self.slots, self.attempt, hosted))

    def _acks(self, worker: str, n: int) -> list[bytes]:
        for s in self.assignment.get(worker, ()):
            for f in _handle(s, n).files:
                if f.path not in self._uploaded:
                    self._uploaded.add(f.path)
                    self.uploads.append(f.path)
        return [
            encode_message(
                CheckpointAck(
                    s, n, self.attempt, self._positions[s], _handle(s, n), 0.01, 0.002, 0.05
                )
            )
            for s in self.assignment.get(worker, ())
        ]


def _handle(subtask: str, n: int) -> StateHandle:
    """A state handle as an incremental checkpoint's: a file kept from the first checkpoint
    and one new file."""
    name = subtask.replace("#", "-")
    kept = SnapshotFile(name="000001.sst", path=f"shared/{name}-1", size=4096, sha256="a" * 64)
    new = SnapshotFile(name=f"{n:06d}.sst", path=f"shared/{name}-{n}", size=512, sha256="b" * 64)
    return StateHandle(checkpoint_id=n, files=(kept, new), full_bytes=4608, uploaded_bytes=512)


class _Recording:
    """The coordinator's end of the bus, noting when (in the coordinator's own time) it sends
    a trigger and a completion."""

    def __init__(self, link: CoordinatorLink, driver: Driver) -> None:
        self._link, self._driver = link, driver

    async def __aenter__(self) -> _Recording:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def send(self, message: ToWorker) -> None:
        if isinstance(message, TriggerCheckpoint):
            self._driver.triggered[message.checkpoint_id] = self._driver.elapsed()
        elif isinstance(message, CheckpointCompleted):
            self._driver.completed[message.checkpoint_id] = self._driver.elapsed()
        await self._link.send(message)

    async def receive(self, timeout_s: float) -> list[FromWorker]:
        return await self._link.receive(timeout_s)


class Driver:
    """The coordinator, the bus and the simulated workers, on a simulated clock."""

    def __init__(self, subtasks: int, per_worker: int, root: Path) -> None:
        self.graph = build_graph(subtasks)
        self.bus = InMemoryBus()
        self.link = _Recording(self.bus.coordinator_end(), self)
        self.inbox = self.bus.worker_end()
        self.storage = open_storage(root)
        self.coordinator = Coordinator(
            self.graph, bootstrap="127.0.0.1:1", storage=self.storage, settings=SETTINGS,
            link=self.link,
        )  # fmt: skip
        self.workers = SimulatedWorkers(self.graph, per_worker)
        self.now = 0.0
        self.triggered: dict[int, tuple[float, float]] = {}
        self.completed: dict[int, tuple[float, float]] = {}
        """Checkpoint id -> the coordinator's (CPU, wall) seconds when it sent its trigger /
        its completion (`elapsed`)."""
        self._cpu = self._wall = 0.0
        self._since: tuple[float, float] | None = None

    def elapsed(self) -> tuple[float, float]:
        """The coordinator's CPU and wall seconds so far (its steps only)."""
        if self._since is None:
            return self._cpu, self._wall
        cpu, wall = self._since
        return self._cpu + time.process_time() - cpu, self._wall + time.perf_counter() - wall

    async def coordinated(self, batch: list[bytes]) -> None:
        """One step of the coordinator on ``batch``, decoded as it would be off Kafka."""
        self._since = time.process_time(), time.perf_counter()
        for message in batch:
            self.bus.to_coordinator.put_nowait(_from_worker(decode_message(message)))
        received = await self.link.receive(TICK_S) if batch else []
        await self.coordinator.step(received, self.now)
        self._cpu, self._wall = self.elapsed()
        self._since = None

    async def start(self) -> None:
        await self.inbox.__aenter__()
        self._since = time.process_time(), time.perf_counter()
        await self.coordinator.start(self.now)
        self._cpu, self._wall = self.elapsed()
        self._since = None

    async def pass_(self, extra: Sequence[list[bytes]] = ()) -> None:
        """One pass of the loop: the heartbeats due and ``extra``, a step per batch; then the
        workers' answers to what the coordinator sent, until it sends nothing more."""
        self.now += TICK_S
        batches = [*self.workers.heartbeats(self.now), *extra]
        for batch in batches or [[]]:
            await self.coordinated(batch)
        while sent := await self.inbox.receive(0):
            batches = self.workers.react(sent)
            uploads, self.workers.uploads = self.workers.uploads, []
            for path in uploads:  # the subtasks' uploads: not the coordinator's work
                await self.storage.put(path, b"sst")
            for batch in batches:
                await self.coordinated(batch)

    async def until(self, done: Callable[[], bool], *, passes: int = 100_000) -> None:
        """Passes until ``done()``."""
        for _ in range(passes):
            if done():
                return
            await self.pass_()
        raise RuntimeError("the simulated job did not get there")


def _from_worker(message: FromWorker | ToWorker) -> FromWorker:
    assert isinstance(message, (Heartbeat, Retired, CheckpointAck, SubtaskFailed))
    return message


async def measure(subtasks: int, checkpoints: int, per_worker: int, root: Path) -> Measured:
    """One run: ``checkpoints`` checkpoints, a subtask failure and its recovery, as many again.
    A checkpoint's CPU is the coordinator's from the completion of the one before to its own
    (every heartbeat and tick of its interval included); its wall time, from its trigger to
    its completion."""
    driver = Driver(subtasks, per_worker, root)
    workers, measured = driver.workers, Measured()
    await driver.start()
    await driver.until(lambda: bool(workers.assignment))

    def completed_more_than(count: int) -> Callable[[], bool]:
        return lambda: len(workers.completed) > count

    for half in (0, 1):
        if half:
            (cpu, wall), attempt = driver.elapsed(), workers.attempt
            await driver.pass_([[workers.failure()]])
            await driver.until(lambda: workers.attempt > attempt)  # noqa: B023 (awaited here)
            after = driver.elapsed()
            measured.recovery_cpu_s, measured.recovery_wall_s = after[0] - cpu, after[1] - wall
        done = len(workers.completed)  # the first after (re)assignment: its baseline
        await driver.until(completed_more_than(done))
        first = workers.completed[-1]
        await driver.until(completed_more_than(done + checkpoints))
        ids = workers.completed[-checkpoints - 1 :]
        assert ids == list(range(first, first + checkpoints + 1)), ids
        for previous, n in itertools.pairwise(ids):
            measured.cpu_s.append(driver.completed[n][0] - driver.completed[previous][0])
            measured.span_cpu_s.append(driver.completed[n][0] - driver.triggered[n][0])
            measured.wall_s.append(driver.completed[n][1] - driver.triggered[n][1])
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subtasks", default="100,1000,10000")
    parser.add_argument("--checkpoints", type=int, default=8, help="before and after the failure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-worker", type=int, default=10)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the failure's recovery logs at WARNING: expected here
    sizes = [int(s) for s in args.subtasks.split(",")]
    runs: dict[int, list[Measured]] = {n: [] for n in sizes}
    for round_ in range(args.rounds):
        for n in sizes:
            with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as root:
                m = asyncio.run(measure(n, args.checkpoints, args.per_worker, Path(root)))
            runs[n].append(m)
            print(f"round {round_ + 1}: {n:,} subtasks, {median(m.cpu_s) * 1000:.1f} ms CPU a "
                  f"checkpoint", flush=True)  # fmt: skip
    rows = []
    base = sizes[0]
    for n in sizes:
        per_round = [median(m.cpu_s) for m in runs[n]]
        ratios = paired_ratios([m.cpu_s for m in runs[n]], [b.cpu_s for b in runs[base]])
        walls = [w for m in runs[n] for w in m.wall_s]
        low, high = spread(per_round)
        rlow, rhigh = spread(ratios)
        rows.append((
            f"{n:,}",
            str(sum(len(m.cpu_s) for m in runs[n])),
            f"{median(per_round) * 1000:.1f} ({low * 1000:.1f}-{high * 1000:.1f})",
            f"{median(per_round) / n * 1e6:.1f}",
            f"{median(s for m in runs[n] for s in m.span_cpu_s) * 1000:.1f}",
            f"{percentile(walls, 50) * 1000:.1f}",
            f"{percentile(walls, 99) * 1000:.1f}",
            f"{median(ratios):.2f}x ({rlow:.2f}-{rhigh:.2f}); {n / base:g}x subtasks",
            f"{median(m.recovery_cpu_s for m in runs[n]) * 1000:.0f}",
            f"{median(m.recovery_wall_s for m in runs[n]) * 1000:.0f}",
        ))  # fmt: skip
        record(BENCH, "size", subtasks=n, cpu_s=per_round, ratios=ratios,
               wall_p50_s=percentile(walls, 50), wall_p99_s=percentile(walls, 99))  # fmt: skip
    report_table(
        BENCH,
        "Coordinator at scale, simulated: CPU per checkpoint vs subtasks",
        (
            "subtasks",
            "checkpoints",
            "CPU ms a checkpoint, median (rounds)",
            "CPU us a subtask",
            "of it trigger to complete ms",
            "trigger to complete wall p50 ms",
            "p99 ms",
            f"CPU vs {base:,} subtasks (rounds)",
            "recovery CPU ms",
            "recovery wall ms",
        ),
        rows,
        [
            f"{args.rounds} paired rounds, {args.checkpoints} checkpoints before a subtask "
            f"failure and {args.checkpoints} after its recovery; {args.per_worker} subtasks a "
            "worker, each worker heartbeating every second; the coordinator's CPU and wall "
            "time only (simulated workers outside the measured span). Target: growth at most "
            "linear, <= 1 s of CPU a checkpoint at 10,000 subtasks."
        ],
    )


if __name__ == "__main__":
    main()

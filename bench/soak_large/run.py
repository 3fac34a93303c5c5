"""The soak itself (`soak`): start everything, submit the runs, follow the `Plan` while results
arrive, then gather what the checks need.

In order:

1. start the service, a development broker (own data folder, so it can restart in place),
   checkpoint storage (moto S3 behind an `OutageProxy`), a coordinator and the workers;
2. start the approver (it grants every irreversible call's approval) and the readers of the
   results topic and of checkpoint storage, then submit every run;
3. while results arrive: send each planned SIGKILL at its moment and start the victim again
   (as ``sluicegate up`` would), restart any process that ended by itself, restart the
   broker once and take storage away once;
4. once every run has a result (or the time is up), read the events topic to its end.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError

from bench.processes import ProcessCluster
from bench.soak_large.agent import soak_graph, topics_of
from bench.soak_large.checks import Findings, KillRecord
from bench.soak_large.ledger import SoakLedger
from bench.soak_large.plan import Kill, Plan, Timing
from bench.soak_large.rates import CheckpointRecord, fifths
from bench.soak_large.storage import S3Storage, s3_storage
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.messages import TaskRequest
from sluicegate.demos.refund_desk.approver import Approver
from sluicegate.devkafka import DevBroker
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.storage import Storage, StorageError
from sluicegate.operators.storage.layout import (
    CHECKPOINTS,
    checkpoint_manifest,
    parse_checkpoint_id,
)
from sluicegate.operators.storage.manifest import ManifestStore

__all__ = ["Sizes", "soak"]

logger = logging.getLogger(__name__)

_WAIT_FOR_MOMENT_S = 10.0
"""How long a timed kill waits for its moment before it lands anyway."""


@dataclass(frozen=True, slots=True)
class Sizes:
    runs: int
    kills: int
    workers: int
    seed: int
    partitions: int
    outage_s: float
    timeout_s: float
    window: int
    """Runs submitted and not finished at most: the work is spread over the whole schedule."""


class Checkpoints:
    """Checkpoints as the harness sees them in storage: each completed one (its manifest read
    once, when first seen: when it was triggered and completed, what it uploaded), and the
    newest triggered."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._manifests = ManifestStore(storage)
        self.seen: dict[int, CheckpointRecord] = {}
        self.newest_triggered = 0

    async def poll(self) -> None:
        try:
            paths = await self._storage.list(CHECKPOINTS)
        except StorageError:
            logger.warning("checkpoint storage unreadable for a moment")
            return
        now = time.time()
        for path in paths:
            n = parse_checkpoint_id(path)
            if n is None:
                continue
            self.newest_triggered = max(self.newest_triggered, n)
            if path == checkpoint_manifest(n) and n not in self.seen:
                self.seen[n] = await self._record(n, now)

    async def _record(self, n: int, seen_at: float) -> CheckpointRecord:
        """Checkpoint ``n`` from its manifest; only its id and ``seen_at`` if the manifest
        cannot be read (gone, storage away, or not a manifest this build reads)."""
        try:
            m = await self._manifests.load(n)
        except (StorageError, ValidationError) as exc:
            logger.warning("manifest of checkpoint %d unreadable: %s", n, exc)
            return CheckpointRecord(n, seen_at)
        return CheckpointRecord(n, m.completed_at, m.triggered_at, m.uploaded_bytes, m.full_bytes)

    def in_flight(self) -> bool:
        """A checkpoint was triggered and has not completed (as of the last `poll`)."""
        return self.newest_triggered > max(self.seen, default=0)

    def completed_after(self, checkpoint_id: int) -> float | None:
        """When the first checkpoint newer than ``checkpoint_id`` completed."""
        return min(
            (c.completed_at for n, c in self.seen.items() if n > checkpoint_id), default=None
        )


class Soak:
    def __init__(self, sizes: Sizes, root: Path, broker: DevBroker, storage: S3Storage) -> None:
        self.sizes, self.root, self.broker, self.storage = sizes, root, broker, storage
        self.rng = random.Random(sizes.seed)
        self.tag = f"{sizes.seed:x}{int(time.time()) % 100000:05d}"
        self.topics = topics_of(self.tag)
        self.ledger = SoakLedger()
        self.workers = [f"worker-{i + 1}" for i in range(sizes.workers)]
        expr = (f"soak_graph({self.tag!r}, {self.ledger.url!r}, {sizes.partitions}, "
                f"{sizes.partitions})")  # fmt: skip
        self.cluster = ProcessCluster(
            root, broker.bootstrap, "from bench.soak_large.agent import soak_graph", expr
        )
        self.cluster.env.update(storage.env)
        self.checkpoints = Checkpoints(storage.monitor)
        self.results: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._seen_offsets: set[tuple[int, int]] = set()
        self.kills: list[KillRecord] = []
        self.other_exits = 0
        self.broker_restarts = 0
        self.storage_outages = 0
        self.faults: list[tuple[float, int]] = []
        """The broker's restart and storage's outage: when each began, and the newest
        checkpoint triggered when it ended (recovered once a newer one completed)."""
        self._sending = asyncio.Lock()
        """Held by a submission and by the broker's restart: no send is retried across it into
        a second copy of a task."""

    def start(self, name: str) -> None:
        if name == "coordinator":
            self.cluster.start_coordinator(interval=1.0, heartbeat_timeout=4.0)
        else:
            slots = -(-(self.sizes.partitions * 2 + 2) // self.sizes.workers)
            self.cluster.start_worker(name, slots=slots + 1)

    def done(self) -> int:
        return sum(1 for rs in self.results.values() if rs)

    async def run(self) -> Findings:
        graph = soak_graph(self.tag, self.ledger.url, self.sizes.partitions, self.sizes.partitions)
        await ensure_topics(self.broker.bootstrap, graph)
        began = time.time()
        for name in ["coordinator", *self.workers]:
            self.start(name)
        tasks = [TaskRequest(run_id=f"run-{i:06d}", goal="call every tool")
                 for i in range(self.sizes.runs)]  # fmt: skip
        background = [
            asyncio.create_task(_forever(self._approve)),
            asyncio.create_task(_forever(self._read_results)),
            asyncio.create_task(_forever(self._watch_checkpoints)),
        ]
        try:
            plan = Plan.of(self.sizes.runs, self.sizes.kills, self.sizes.seed)
            await self._follow(plan, tasks)
            finished = time.time()
            events = await self._read_events()
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            self.cluster.stop_all()
            self.ledger.close()
        for kill in self.kills:
            kill.recovered_at = self.checkpoints.completed_after(kill.newest_triggered)
        disruptions = [(k.killed_at, k.recovered_at) for k in self.kills] + [
            (began_at, self.checkpoints.completed_after(n)) for began_at, n in self.faults
        ]
        parts = fifths(list(self.checkpoints.seen.values()), disruptions, finished)
        findings = Findings(
            self.sizes.runs, self.results, events, self.ledger, self.kills,
            parts, self.other_exits, self.broker_restarts,
            self.storage_outages, finished - began, len(plan.kills),
        )  # fmt: skip
        findings.check()
        return findings

    async def _follow(self, plan: Plan, tasks: list[TaskRequest]) -> None:
        deadline = time.monotonic() + self.sizes.timeout_s
        pending = list(plan.kills)
        feeding = asyncio.create_task(self._feed(tasks))
        try:
            await self._follow_plan(plan, pending, deadline, feeding)
        finally:
            feeding.cancel()
            await asyncio.gather(feeding, return_exceptions=True)
        for kill in pending:
            logger.warning("planned kill never came (every run finished first): %s", kill)

    async def _feed(self, tasks: list[TaskRequest]) -> None:
        """Keep at most ``window`` runs submitted and unfinished."""
        submitted = 0
        while submitted < len(tasks):
            if submitted - self.done() < self.sizes.window // 2:
                more = tasks[submitted : self.done() + self.sizes.window]
                async with self._sending:
                    sent = await submit_tasks(self.broker.bootstrap, self.topics.tasks, more)
                submitted += sent
            await asyncio.sleep(0.2)

    async def _follow_plan(
        self, plan: Plan, pending: list[Kill], deadline: float, feeding: asyncio.Task[None]
    ) -> None:
        while self.done() < self.sizes.runs and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            if feeding.done() and feeding.exception() is not None:
                await feeding  # submitting failed: the soak cannot go on
            self._restart_ended()
            if pending and self.done() >= pending[0].after_results:
                await self._kill(pending.pop(0))
            if not self.broker_restarts and self.done() >= plan.broker_restart_after:
                await self._restart_broker()
            if not self.storage_outages and self.done() >= plan.storage_outage_after:
                await self._storage_outage()

    def _restart_ended(self) -> None:
        for name, process in list(self.cluster.processes.items()):
            if process.poll() is not None:
                logger.warning("%s ended with %s; starting it again", name, process.returncode)
                self.other_exits += 1
                del self.cluster.processes[name]
                self.start(name)

    async def _kill(self, kill: Kill) -> None:
        """Wait for ``kill``'s moment, SIGKILL its victim, start it again. Checkpoint storage
        is read just before the signal (the newest triggered checkpoint is where recovery is
        measured from), and for a mid-write kill before the look at the writes in flight, so
        that the write is still on the wire when the signal comes."""
        victim = "coordinator" if kill.coordinator else self.rng.choice(self.workers)
        timing, victim = await self._wait_for_moment(kill, victim)
        if victim not in self.cluster.processes:
            self._restart_ended()
        killed_at = self.cluster.kill(victim)
        self.kills.append(KillRecord(victim, timing, killed_at, self.checkpoints.newest_triggered))
        logger.info("SIGKILL %s (%s) at %d results", victim, timing, self.done())
        self.start(victim)

    async def _wait_for_moment(self, kill: Kill, victim: str) -> tuple[Timing, str]:
        """Wait for ``kill``'s moment; the timing it got and the victim (a mid-write kill's is
        the worker with the write)."""
        deadline = time.monotonic() + _WAIT_FOR_MOMENT_S
        asked = kill.timing is Timing.SAVEPOINT and await self._ask_savepoint()
        while True:
            await self.checkpoints.poll()
            if asked:
                return kill.timing, victim
            if kill.timing is Timing.MID_WRITE:
                pids = {p.pid: n for n, p in self.cluster.processes.items()}
                writers = [pids[pid] for pid in self.ledger.in_flight() if pid in pids]
                if writers:
                    return kill.timing, writers[0]
            elif kill.timing is Timing.MID_CHECKPOINT and self.checkpoints.in_flight():
                return kill.timing, victim
            if kill.timing is Timing.ANY or time.monotonic() > deadline:
                return Timing.ANY, victim
            await asyncio.sleep(0.05)

    async def _ask_savepoint(self) -> bool:
        log = self.cluster.log_paths["coordinator"]
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("coordinator API at "):
                url = line.removeprefix("coordinator API at ").strip()
                break
        else:
            return False
        try:
            async with httpx.AsyncClient(timeout=10) as client:
                answer = await client.post(
                    f"{url}/savepoints", params={"name": f"soak-{len(self.kills)}"}
                )
        except httpx.HTTPError:
            return False
        return answer.status_code == 202

    async def _restart_broker(self) -> None:
        self.broker_restarts += 1
        logger.info("stopping the broker at %d results", self.done())
        began_at = time.time()
        async with self._sending:
            await asyncio.to_thread(self.broker.stop)
            await self.broker.start_async()
        logger.info("broker started again")
        await self.checkpoints.poll()
        self.faults.append((began_at, self.checkpoints.newest_triggered))

    async def _storage_outage(self) -> None:
        self.storage_outages += 1
        logger.info("storage down for %.0f s at %d results", self.sizes.outage_s, self.done())
        began_at = time.time()
        self.storage.proxy.down = True
        try:
            end = time.monotonic() + self.sizes.outage_s
            while time.monotonic() < end:
                await asyncio.sleep(0.2)
                self._restart_ended()
        finally:
            self.storage.proxy.down = False
        logger.info("storage back")
        await self.checkpoints.poll()
        self.faults.append((began_at, self.checkpoints.newest_triggered))

    async def _approve(self) -> None:
        await Approver(
            self.broker.bootstrap, events=self.topics.events, approvals=self.topics.approvals,
            partitions=self.sizes.partitions, by="soak",
        ).run()  # fmt: skip

    async def _read_results(self) -> None:
        async with committed_from_start(
            self.broker.bootstrap, self.topics.results, self.sizes.partitions
        ) as consumer:
            while True:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    for r in records:
                        if (r.partition, r.offset) not in self._seen_offsets:
                            self._seen_offsets.add((r.partition, r.offset))
                            result = json.loads(r.value or b"{}")
                            self.results[str(result.get("run_id"))].append(result)

    async def _watch_checkpoints(self) -> None:
        while True:
            await self.checkpoints.poll()
            await asyncio.sleep(0.5)

    async def _read_events(self, idle_s: float = 5.0) -> dict[str, list[int]]:
        """Every run's committed event seqs, read until nothing new came for ``idle_s``."""
        seqs: dict[str, list[int]] = defaultdict(list)
        async with committed_from_start(
            self.broker.bootstrap, self.topics.events, self.sizes.partitions
        ) as consumer:
            quiet_since = time.monotonic()
            while time.monotonic() - quiet_since < idle_s:
                batches = (await consumer.getmany(timeout_ms=500)).values()
                for records in batches:
                    for r in records:
                        quiet_since = time.monotonic()
                        try:
                            event = json.loads(r.value or b"")
                        except ValueError:
                            continue
                        if isinstance(event, dict) and "seq" in event:
                            seqs[str(event.get("run_id"))].append(int(event["seq"]))
        return seqs


async def _forever(step: Callable[[], Awaitable[None]]) -> None:
    """``step`` again whenever it fails (the broker's restart ends a client's session)."""
    while True:
        try:
            await step()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("%s failed; starting it again", step.__name__, exc_info=True)
            await asyncio.sleep(1)


async def soak(sizes: Sizes, root: Path) -> Findings:
    """Run the soak of ``sizes`` in folder ``root``; its findings, checked."""
    broker = DevBroker(port=0, data_dir=root / "kafka")
    await broker.start_async()
    try:
        with s3_storage() as storage:
            return await Soak(sizes, root, broker, storage).run()
    finally:
        broker.stop()

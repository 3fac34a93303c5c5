"""Runs parked waiting for approval: what they cost a checkpoint, memory and a recovery.

    uv run python -m bench.parked_runs [--parked 100,10000,100000] [--memory-keys 100,1000000]
                                       [--rounds 5] [--active 20]

One agent operator's state per size (real RocksDB, real snapshots uploaded to local storage in
a temporary folder, as `bench.checkpoint_cost` drives them, no broker): ``--parked`` runs
waiting for approval, stored as the agent operator stores them. One run is driven by the real
`AgentOperator` (an in-memory journal, a scripted model) until it asks to run an irreversible
tool and parks (``waiting_approval``, a pending approval); its rows (``run/<id>`` and its
``history/<id>/...``) are copied under every other run id. Then ``--rounds`` rounds, each size
one after the other in every round (paired): ``--active`` other runs make progress through the
operator (a task each, their model calls, the approval, the tool call, the answer), then a
checkpoint is taken (the sync part: write batch, memtable flush, RocksDB checkpoint) and
uploaded (incremental: the files storage lacks); the full first checkpoint and the one after
it (the bulk load's compaction) are not measured. Printed per size: the checkpoint's duration
(sync + upload) and uploaded bytes, medians over the rounds, and the per-round ratio against
the smallest size.

Idle memory: the agent has memory per customer (`Memory`, a summary of each answer), and each
state also holds ``--memory-keys`` keys of memory nobody touches (3 entries each, copies of one
key's rows written by `MemoryRows.append`). The parked sizes hold the first count (100 by
default); each further count is one more size with the fewest parked runs, so 1,000,000 idle
keys are compared with 100 as 100,000 parked runs are with 100. The active runs remember under
20 keys of their own, the same on every size.

Memory: a new operator is opened over each state (what a restore does), and the memory its
own structures keep afterwards (``tracemalloc``, traced bytes still held once `open` returned,
divided by the parked runs) is printed with the process's RSS growth over another such open
(without tracemalloc, whose own bookkeeping would count).
Recovery, at the largest size: the last checkpoint fetched from storage into an empty folder,
opened, a new operator opened over it, then one parked run approved and woken until its tool
call is made and saved (the first step of a woken run), timed from the fetch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from prometheus_client import CollectorRegistry

from bench.stats import paired_ratios, spread
from bench.table import record, report_table
from sluicegate.agents.declaration import Agent, AgentTopics
from sluicegate.agents.journal import InMemoryJournal
from sluicegate.agents.memory.config import Memory
from sluicegate.agents.memory.rows import MemoryRows, NewEntry
from sluicegate.agents.messages import ApprovalDecision, TaskRequest
from sluicegate.agents.models import ScriptedModel
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.operator import AgentOperator
from sluicegate.agents.runs.state import RunState, RunStatus, run_key
from sluicegate.agents.tools import ToolContext, ToolKind, tool
from sluicegate.operators.contract import Record
from sluicegate.operators.runtime.state_transfer import SnapshotStore, fetch
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import Storage, open_storage

BENCH = "parked_runs"
TOPICS = AgentTopics.named("desk")
TEMPLATE = "run-0000000"
"""The run driven to its approval; every parked run is a copy under an id of the same length."""
IDLE_KEY = "idle-0000000"
"""The memory key written by `MemoryRows`; every idle key is a copy under a key of its length."""
IDLE_ENTRIES = 3


# -- the agent and its operator over a real state store --------------------------------------


@tool(kind=ToolKind.IRREVERSIBLE)
async def refund(ctx: ToolContext, order: str, amount: float) -> str:
    """Refund ``amount`` on ``order`` (waits for a person's approval)."""
    return f"refunded {amount} on {order}"


def _policy(messages: Sequence[ChatMessage]) -> ChatMessage:
    """First a refund, then, once its result is in, the answer."""
    if any(m.role == "tool" for m in messages):
        return ChatMessage(role="assistant", content="refund made; the customer is told")
    arguments = json.dumps({"order": "A-1042", "amount": 19.5})
    call = ToolCall(id="call-1", name="refund", arguments=arguments)
    return ChatMessage(role="assistant", tool_calls=(call,))


def operator(registry: CollectorRegistry | None = None) -> AgentOperator:
    memory = Memory(key="customer", summary=True)
    agent = Agent("desk", ScriptedModel(_policy), [refund], "Settle refunds.", memory=memory)
    return AgentOperator(
        agent, TOPICS, pipeline="parked", journal=InMemoryJournal(),
        registry=registry or CollectorRegistry(),
    )  # fmt: skip


@dataclass
class Subtask:
    """The operator's contexts over one RocksDB store (partition 0 of tasks and approvals)."""

    store: RocksDBStateStore
    storage: Storage
    wakes: list[bytes] = field(default_factory=list)
    """Run ids woken now (the timed wakes of approval timeouts are not set by this agent)."""
    emitted: int = 0

    # OpenContext
    subtask: str = "desk#0"
    attempt: int = 1
    bootstrap: str = "no-kafka:9092"

    @property
    def input_partitions(self) -> list[tuple[str, int]]:
        return [(TOPICS.tasks, 0), (TOPICS.approvals, 0)]

    def owned_topic(self, suffix: str) -> str:
        raise AssertionError("an operator given a journal needs no topic of its own")

    def state(self, topic: str, partition: int) -> Any:
        return self.store.partition(topic, partition)

    def wake(self, topic: str, partition: int, key: bytes, *, after_s: float = 0.0) -> None:
        assert after_s == 0.0, "no approval timeout here"
        self.wakes.append(key)


@dataclass
class RecordContext:
    """`operators.contract.Context` of partition 0 of ``topic``."""

    subtask: Subtask
    topic: str
    partition: int = 0

    @property
    def state(self) -> Any:
        return self.subtask.store.partition(self.topic, 0)

    def state_of(self, topic: str) -> Any:
        return self.subtask.store.partition(topic, 0)

    def emit(
        self, topic: str, value: bytes, *, key: bytes | None = None, partition: int | None = None
    ) -> None:
        self.subtask.emitted += 1

    def wake(self, key: bytes, *, topic: str | None = None, after_s: float = 0.0) -> None:
        assert after_s == 0.0, "no approval timeout here"
        self.subtask.wakes.append(key)


async def send(op: AgentOperator, sub: Subtask, topic: str, run_id: str, body: bytes) -> None:
    record = Record(topic, 0, 0, run_id.encode(), body, 0)
    await op.process(record, RecordContext(sub, topic))


async def drain(op: AgentOperator, sub: Subtask) -> None:
    """Perform every wake-up due now (and those they ask for)."""
    while sub.wakes:
        key = sub.wakes.pop(0)
        await op.on_wake(key, RecordContext(sub, TOPICS.tasks))


def status_of(sub: Subtask, run_id: str) -> RunStatus:
    raw = sub.store.partition(TOPICS.tasks, 0).get(run_key(run_id))
    assert raw is not None, run_id
    return RunState.decode(raw).status


async def park(op: AgentOperator, sub: Subtask, run_id: str, customer: str = "c-0") -> None:
    """Start ``run_id`` (remembering under ``customer``) and drive it until it waits for
    approval."""
    task = TaskRequest(
        run_id=run_id, goal="refund order A-1042, 19.50", metadata={"customer": customer}
    )
    await send(op, sub, TOPICS.tasks, run_id, task.model_dump_json().encode())
    await drain(op, sub)
    assert status_of(sub, run_id) is RunStatus.WAITING_APPROVAL


async def approve(op: AgentOperator, sub: Subtask, run_id: str) -> None:
    decision = ApprovalDecision(run_id=run_id, approved=True, call_id="call-1", by="ann")
    await send(op, sub, TOPICS.approvals, run_id, decision.model_dump_json().encode())


async def finish(op: AgentOperator, sub: Subtask, run_id: str, customer: str) -> None:
    """Start ``run_id``, let it park, approve it, and drive it to its answer."""
    await park(op, sub, run_id, customer)
    await approve(op, sub, run_id)
    await drain(op, sub)
    assert status_of(sub, run_id) is RunStatus.DONE


def template_rows(sub: Subtask) -> list[tuple[bytes, bytes]]:
    state = sub.store.partition(TOPICS.tasks, 0)
    rows = [(run_key(TEMPLATE), state.get(run_key(TEMPLATE)))]
    rows += list(state.items(prefix=b"history/" + TEMPLATE.encode() + b"/"))
    assert all(v is not None for _, v in rows)
    return [(k, v) for k, v in rows if v is not None]


Rename = tuple[tuple[bytes, bytes], tuple[bytes, bytes]]
"""((old, new) in keys, (old, new) in values)."""


def copy_rows(sub: Subtask, rows: list[tuple[bytes, bytes]], names: list[Rename]) -> int:
    """A copy of ``rows`` per rename of ``names`` (in keys, then in values); the bytes
    written."""
    state = sub.store.partition(TOPICS.tasks, 0)
    written = 0
    for n, ((key_old, key_new), (value_old, value_new)) in enumerate(names, 1):
        for key, value in rows:
            k, v = key.replace(key_old, key_new), value.replace(value_old, value_new)
            state.put(k, v)
            written += len(k) + len(v)
        if n % 10_000 == 0:
            sub.store.flush_batch()
    sub.store.flush_batch()
    return written


def copy_parked(sub: Subtask, rows: list[tuple[bytes, bytes]], parked: int) -> int:
    """Copies of the template run's rows under ``parked - 1`` other ids; the bytes written."""
    old = TEMPLATE.encode()
    names = [((old, b"run-%07d" % i), (old, b"run-%07d" % i)) for i in range(1, parked)]
    return copy_rows(sub, rows, names)


def copy_memory(sub: Subtask, keys: int) -> int:
    """``keys`` idle memory keys of `IDLE_ENTRIES` entries each; the bytes written."""
    state = sub.store.partition(TOPICS.tasks, 0)
    rows = MemoryRows(state)
    for n in range(IDLE_ENTRIES):
        text = f"customer asked about order A-{n:04d} twice; refunded 12.50 EUR on {n + 1} May"
        entry = NewEntry(IDLE_KEY, "note", text, f"{TEMPLATE}", n + 1, f"{TEMPLATE}/{n + 1}/0")
        rows.append(entry, now=1.0e9 + n, ttl_s=None)
    sub.store.flush_batch()
    old_hex, old = IDLE_KEY.encode().hex().encode(), IDLE_KEY.encode()
    template = [(k, v) for k, v in state.items() if old_hex in k]
    assert len(template) == IDLE_ENTRIES + 1, template
    names = [((old_hex, (b"idle-%07d" % i).hex().encode()), (old, b"idle-%07d" % i))
             for i in range(1, keys)]  # fmt: skip
    return copy_rows(sub, template, names) + sum(len(k) + len(v) for k, v in template)


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class Size:
    parked: int
    memory_keys: int
    root: Path
    sub: Subtask
    op: AgentOperator
    snapshots: SnapshotStore
    checkpoint: int = 0
    seconds: list[float] = field(default_factory=list)
    sync_seconds: list[float] = field(default_factory=list)
    uploaded: list[int] = field(default_factory=list)
    state_bytes: int = 0
    template_bytes: int = 0
    handle: Any = None
    active: int = 0


async def build(parked: int, memory_keys: int, root: Path) -> Size:
    store = RocksDBStateStore.open(root / "db")
    storage = open_storage(root / "storage")
    sub = Subtask(store, storage)
    op = operator()
    await op.open(sub)
    await park(op, sub, TEMPLATE)
    rows = template_rows(sub)
    size = Size(parked, memory_keys, root, sub, op, SnapshotStore(storage))
    size.template_bytes = sum(len(k) + len(v) for k, v in rows)
    size.state_bytes = size.template_bytes + copy_parked(sub, rows, parked)
    size.state_bytes += copy_memory(sub, memory_keys)
    await take(size)  # the first, full checkpoint: not measured
    # Nor the next: it uploads what compaction makes of the bulk load of the parked runs
    # (7.9 MB at 100,000), a one-off of writing them all at once here.
    await round_of(size, 1)
    for measured in (size.seconds, size.sync_seconds, size.uploaded):
        measured.clear()
    return size


async def take(size: Size) -> tuple[float, float, int]:
    """A checkpoint of ``size``'s store, uploaded: (seconds, sync seconds, uploaded bytes)."""
    size.checkpoint += 1
    started = time.perf_counter()
    local = size.sub.store.take_local_checkpoint(
        size.checkpoint, size.root / "cp", uploaded=size.snapshots.uploaded
    )
    result = await size.snapshots.upload(local)
    size.handle = result.handle
    seconds = time.perf_counter() - started
    return seconds, local.inventory.sync_duration_seconds, result.handle.uploaded_bytes


async def round_of(size: Size, active: int) -> None:
    """``active`` runs make progress to their answers, then a checkpoint is measured."""
    for _ in range(active):
        size.active += 1
        customer = f"c-{size.active % 20}"
        await finish(size.op, size.sub, f"act-{size.active:07d}", customer)
    seconds, sync_s, uploaded = await take(size)
    size.seconds.append(seconds)
    size.sync_seconds.append(sync_s)
    size.uploaded.append(uploaded)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


async def memory_kept(size: Size) -> tuple[int, int, int]:
    """A new operator opened over ``size``'s state, as a restore opens it: (traced bytes it
    keeps, RSS growth, runs it keeps decoded)."""
    rss = _rss_bytes()
    untraced = operator()
    await untraced.open(size.sub)  # RSS without tracemalloc's own bookkeeping
    grown = _rss_bytes() - rss
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    op = operator()
    await op.open(size.sub)
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    decoded = len(op._runs)  # the cache: the runs it keeps decoded
    for opened in (untraced, op):
        await opened.close()
    return kept, grown, decoded


@dataclass(frozen=True)
class Recovery:
    restore_s: float
    """Fetch the checkpoint into an empty folder and open it."""
    open_s: float
    """The operator's `open`."""
    step_s: float
    """A parked run approved, to its tool call made and saved."""

    @property
    def total_s(self) -> float:
        return self.restore_s + self.open_s + self.step_s

    def said(self, what: str) -> str:
        return (
            f"Recovery at {what}: fetch and open the checkpoint {self.restore_s:.2f} s, the "
            f"operator's open {self.open_s:.2f} s, approval to the woken run's step saved "
            f"{self.step_s * 1000:.1f} ms; {self.total_s:.2f} s in all."
        )


async def recovery(size: Size) -> Recovery:
    """Restore of ``size``'s last checkpoint and the first step of a woken parked run."""
    into = size.root / f"restore-{size.checkpoint}"
    started = time.perf_counter()
    folder = await fetch(size.sub.storage, size.handle, into / "files")
    store = RocksDBStateStore.restore(folder, into / "db")
    restored = time.perf_counter()
    try:
        sub = Subtask(store, size.sub.storage)
        op = operator()
        await op.open(sub)
        opened = time.perf_counter()
        woken = f"run-{size.parked // 2:07d}"
        await approve(op, sub, woken)
        await drain(op, sub)
        assert status_of(sub, woken) is RunStatus.DONE
        stepped = time.perf_counter()
    finally:
        store.close()
    return Recovery(restored - started, opened - restored, stepped - opened)


def shapes(parked: list[int], memory_keys: list[int]) -> list[tuple[int, int]]:
    """The sizes measured: every parked count with the fewest idle memory keys, then every
    further memory count with the fewest parked runs."""
    return [(p, memory_keys[0]) for p in parked] + [(parked[0], m) for m in memory_keys[1:]]


async def bench(sizes: list[tuple[int, int]], rounds: int, active: int, root: Path) -> None:
    built = []
    for parked, memory_keys in sizes:
        started = time.perf_counter()
        built.append(await build(parked, memory_keys, root / f"parked-{parked}-{memory_keys}"))
        print(f"{parked:,} parked runs and {memory_keys:,} idle memory keys written in "
              f"{time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
    for _ in range(rounds):
        for size in built:
            await round_of(size, active)
    base = built[0]
    rows = []
    for size in built:
        idle_memory = size.memory_keys > base.memory_keys
        kept, grown, decoded = await memory_kept(size)
        items = size.memory_keys if idle_memory else size.parked
        memory = (kept / items, grown / items, decoded)
        ratio = paired_ratios([[s] for s in size.seconds], [[s] for s in base.seconds])
        bytes_ratio = [u / b for u, b in zip(size.uploaded, base.uploaded, strict=True)]
        low, high = spread(ratio)
        blow, bhigh = spread(bytes_ratio)
        rows.append((
            f"{size.parked:,}",
            f"{size.memory_keys:,}",
            f"{size.state_bytes / 1e6:.1f}",
            f"{median(size.sync_seconds) * 1000:.1f}",
            f"{median(size.seconds) * 1000:.1f}",
            f"{median(ratio):.2f}x ({low:.2f}-{high:.2f})",
            f"{median(size.uploaded) / 1e3:.1f}",
            f"{median(bytes_ratio):.2f}x ({blow:.2f}-{bhigh:.2f})",
            f"{memory[0]:.0f}" + (" a key" if idle_memory else ""),
            f"{memory[1]:.0f}" + (" a key" if idle_memory else ""),
            str(memory[2]),
        ))  # fmt: skip
        record(BENCH, "size", parked=size.parked, memory_keys=size.memory_keys,
               seconds=size.seconds, uploaded=size.uploaded, kept_per_run=memory[0],
               rss_per_run=memory[1], kept_bytes=kept, rss_bytes=grown)  # fmt: skip
    most_parked = max(built, key=lambda s: (s.parked, -s.memory_keys))
    most_memory = max(built, key=lambda s: (s.memory_keys, -s.parked))
    recoveries = [(most_parked, await recovery(most_parked))]
    if most_memory.memory_keys > base.memory_keys:
        recoveries.append((most_memory, await recovery(most_memory)))
    for size, found in recoveries:
        record(BENCH, "recovery", parked=size.parked, memory_keys=size.memory_keys,
               restore_s=found.restore_s, open_s=found.open_s, step_s=found.step_s)  # fmt: skip
    report_table(
        BENCH,
        "Runs parked for approval and idle memory: checkpoint cost and memory vs idle items",
        (
            "parked runs",
            "idle memory keys",
            "state MB",
            "sync ms",
            "checkpoint ms",
            "vs smallest (rounds)",
            "uploaded KB",
            "bytes vs smallest",
            "kept B a run",
            "RSS B a run",
            "decoded kept",
        ),
        rows,
        [
            f"{rounds} paired rounds; each round {active} other runs go from task to answer "
            "(approval included, remembering a summary) through the operator, then a "
            "checkpoint (sync part + incremental upload) is timed; medians. 'kept B a run': "
            "what a newly opened operator keeps (tracemalloc) per parked run (per idle key on "
            "the rows marked so); 'RSS B a run': the process's RSS growth over another open "
            "(no tracemalloc), likewise; one parked run is "
            f"{base.template_bytes} bytes of state, an idle key {IDLE_ENTRIES} entries. "
            "Targets: checkpoint and bytes within 10% of the smallest, <= 2 KB a parked run.",
            *(
                found.said(f"{s.parked:,} parked runs and {s.memory_keys:,} idle memory keys")
                for s, found in recoveries
            ),
            "Target: <= 5 s from SIGKILL; a worker's start and the broker are not in these "
            "figures.",
        ],
    )
    for size in built:
        await size.op.close()
        size.sub.store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parked", default="100,10000,100000")
    parser.add_argument("--memory-keys", default="100,1000000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--active", type=int, default=20)
    args = parser.parse_args()
    sizes = shapes(
        [int(s) for s in args.parked.split(",")], [int(s) for s in args.memory_keys.split(",")]
    )
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as root:
        asyncio.run(bench(sizes, args.rounds, args.active, Path(root)))


if __name__ == "__main__":
    main()

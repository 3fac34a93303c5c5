"""Durable agent steps per second, and the per-step cost of durability, vs LangGraph + SQLite.

    uv run --frozen python -m bench.agent_steps [--runs 20] [--steps 40,200] [--interval 1]
        [--parallelism 2] [--fetch-timeout-ms 50] [--job-rounds 3] [--processes 2]

One agent whose scripted model (no latency) makes a ``--steps``-step run: ``steps - 1`` model
calls each asking for one read-only in-process tool call (``add(a, b)``), then a final answer.
A step is one model call and the tool call it asked for. Everything below runs, and prints a
table, for each run length of ``--steps`` (40 and 200 by default: with 40, 800 steps take
about the checkpoint interval, so submit→result mostly measures that interval). Measured, in
this order:

1. **LocalJob**: the agent in a pipeline (4 partitions, ``--parallelism`` subtasks) run by
   `LocalJob` with a checkpoint every ``--interval`` s. ``--runs`` tasks are submitted at once;
   steps/s = runs x steps / (submit → last result read from the results sink, read_committed),
   and also over the first model call → the last final answer (the engine's own pace, without
   the wait for the checkpoint that publishes the results); ``--job-rounds`` rounds, each a
   new job, the table giving the median round and the notes the range. In each round
   (LocalJob, worker processes, LangGraph; reversed in odd rounds), the same submit → last result
   with the agent's subtasks in ``--processes`` worker processes (one agent subtask each; one
   of them also runs the approvals router) and a
   coordinator process, as a deployment runs them (0: not run; a warm-up run's result is read
   first; the engine's pace is not measured across processes). Every model and tool
   call is journaled (``issued`` then ``done``, ``acks=all``; these calls may be retried, so
   ``issued`` is sent beside the call and ``done`` behind it, and a model call's entries and
   those of the read-only tool call it asked for are awaited together before the step's safe
   points are written: one produce round trip a step) in the compacted journal topic; every
   safe point writes the run to the subtask's RocksDB (pending batch, made durable by the next
   checkpoint) and its event/result to the exactly-once sinks' write-ahead state.
2. **Direct, one run at a time** (less noisy; each the median of 3 interleaved repetitions):
   the same run through `agents.runs.machine` with the model and tool called directly and nothing
   persisted (``plain``); then an `AgentOperator` driven
   by hand (its ``process`` and ``on_wake``, as a subtask would call them) over a
   `RocksDBStateStore` whose batch is applied after every call, with an `InMemoryJournal` and
   with a `KafkaJournal`. Per-step overhead of durability = Kafka-journal ms/step - plain.
3. **LangGraph** (``bench/langgraph_steps.py``, in a throwaway environment made by ``uv run
   --isolated --no-project --with langgraph==… --with langgraph-checkpoint-sqlite==…``; nothing
   from LangGraph is imported here): the same policy as a `StateGraph` (``model`` and ``tool``
   nodes, a conditional edge back), in every mode side by side (`LANGGRAPH_MODES`): without a
   checkpointer, `SqliteSaver` with ``durability="sync"`` and ``"async"`` under ``invoke``,
   `AsyncSqliteSaver` with both under ``ainvoke`` (``async def`` nodes), one run at a time
   and all at once; a thread id per run. It runs in every round of 1 (all its modes), so each
   ratio is taken between measurements minutes apart at most, not between the start and the
   end of the benchmark: the last column is our LocalJob's submit→result steps/s over each
   mode, the median of the rounds' ratios and their spread; the notes compare with
   LangGraph's fastest durable mode all at once the same way. If uv cannot fetch LangGraph it
   prints ``langgraph: unavailable (<reason>)`` instead.

What is not comparable:

* LangGraph's checkpoint is a local SQLite transaction per super-step (WAL mode; the pragmas
  are printed: ``synchronous=2`` is FULL, an fsync per commit) of the whole graph state. Ours
  is four appends per step to a replicated log with ``acks=all`` (one produce round trip: the
  model call's ``issued`` and ``done`` and the tool call's share it), awaited before the
  step's safe points are written and the run goes on, plus RocksDB. On
  the development broker (one replica, no fsync: Kafka relies on replication) ``acks=all``
  means the leader's page cache; on a real cluster it means every in-sync replica, over the
  network.
* Our results are exactly-once (published in a Kafka transaction when the checkpoint covering
  them completes: up to one interval later), and a crashed run resumes from its last safe point
  without repeating an effect; LangGraph resumes from its last checkpoint with no record of a
  tool call made after it.
* LocalJob runs all runs at once in one process; LangGraph's row runs them one after another
  (and, for comparison, concurrently). Neither side does any real model or tool work, so this
  measures framework + persistence cost only; a real model call (seconds) dwarfs both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import ConsumerRecord
from prometheus_client import CollectorRegistry

from bench.cpu import CpuSpan
from bench.processes import ProcessCluster, kafka_bootstrap
from bench.stats import median_spread, paired_ratios
from bench.table import report_table
from sluicegate import Agent, AgentTopics, add_agent
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.declaration import JOURNAL_SUFFIX
from sluicegate.agents.journal import InMemoryJournal, Journal
from sluicegate.agents.journal.kafka import KafkaJournal
from sluicegate.agents.messages import TaskRequest
from sluicegate.agents.models.contract import ChatMessage, ToolCall
from sluicegate.agents.models.scripted import ScriptedModel
from sluicegate.agents.operator import AgentOperator
from sluicegate.agents.runs import machine
from sluicegate.agents.runs.state import Budget, RunStatus
from sluicegate.agents.tools import ToolContext, tool
from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.contract import Record
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.context import OperatorOpenContext, RecordContext
from sluicegate.operators.runtime.subtask import SubtaskSettings
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.operators.runtime.wakes import WakeUp
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.storage import open_storage
from sluicegate.testing import read_committed

PARTITIONS = 4  # what sluicegate.testing.read_committed reads
DIRECT_ROUNDS = 3
LANGGRAPH = ("langgraph==1.2.24", "langgraph-checkpoint-sqlite==3.1.2")
LANGGRAPH_MODES = {  # the keys of bench/langgraph_steps.py's JSON: (name, all runs at once)
    "plain": ("no checkpointer, invoke", False),
    "plain_async": ("no checkpointer, ainvoke", False),
    "plain_concurrent": ("no checkpointer, ainvoke", True),
    "sqlite_sync": ("SqliteSaver, durability=sync, invoke", False),
    "sqlite_async": ("SqliteSaver, durability=async (default), invoke", False),
    "aiosqlite_sync": ("AsyncSqliteSaver, durability=sync, ainvoke", False),
    "aiosqlite_async": ("AsyncSqliteSaver, durability=async, ainvoke", False),
    "sqlite_sync_concurrent": ("AsyncSqliteSaver, durability=sync, ainvoke", True),
    "aiosqlite_async_concurrent": ("AsyncSqliteSaver, durability=async, ainvoke", True),
}
DURABLE_AT_ONCE = ("sqlite_sync_concurrent", "aiosqlite_async_concurrent")
_REPO = Path(__file__).resolve().parent.parent
INSTRUCTIONS = "You add numbers with the add tool, then answer."


@tool()
async def add(ctx: ToolContext, a: int, b: int) -> int:
    """Return ``a + b``."""
    return a + b


@dataclass(slots=True)
class Window:
    """When the first model call of any run started and the last final answer was written."""

    first: float | None = None
    last: float = 0.0


def calls_so_far(messages: Sequence[ChatMessage]) -> int:
    """The assistant messages so far: one past the last one's call number (``call-<n>``). It
    reads back to the last assistant message only (LangGraph's side does the same): counting
    every assistant message walked a conversation that grows every step, on both sides
    (docs/performance.md, "The benchmark's policy no longer walks the conversation")."""
    for m in reversed(messages):
        if m.role == "assistant":
            return int(m.tool_calls[0].id.removeprefix("call-")) + 1
    return 0


def counting_agent(steps: int, window: Window | None = None) -> Agent:
    """``add(n, 1)`` for the first ``steps - 1`` model calls, then the answer."""

    def policy(messages: Sequence[ChatMessage]) -> ChatMessage:
        n = calls_so_far(messages)
        if window is not None and window.first is None:
            window.first = time.monotonic()
        if n + 1 < steps:
            args = json.dumps({"a": n, "b": 1})
            call = ToolCall(id=f"call-{n}", name="add", arguments=args)
            return ChatMessage(role="assistant", tool_calls=(call,))
        if window is not None:
            window.last = time.monotonic()
        return ChatMessage(role="assistant", content=f"done after {n} tool calls")

    return Agent("adder", model=ScriptedModel(policy), tools=[add], instructions=INSTRUCTIONS,
                 budget=Budget(max_steps=steps))  # fmt: skip


def task(i: int) -> TaskRequest:
    return TaskRequest(run_id=f"run-{i:03d}", goal=f"run {i}: count with add, then say done")


def agent_graph(agent: Agent, tag: str, parallelism: int) -> tuple[JobGraph, AgentTopics]:
    p = Pipeline(f"steps-{tag}")
    topics = AgentTopics(
        tasks=f"tasks-{tag}", approvals=f"approvals-{tag}",
        events=f"events-{tag}", results=f"results-{tag}",
    )  # fmt: skip
    add_agent(p, agent, partitions=PARTITIONS, parallelism=parallelism, topics=topics)
    return p.build(), topics


@dataclass(frozen=True, slots=True)
class Measured:
    """A timed span: wall seconds, and CPU seconds of the processes doing the work (``cpu``)
    and of the broker (``broker_cpu``) when known."""

    elapsed: float
    runs: int
    steps: int
    cpu: float | None = None
    broker_cpu: float | None = None

    @property
    def cpu_ms_per_step(self) -> str:
        return "-" if self.cpu is None else f"{self.cpu * 1000 / (self.runs * self.steps):.2f}"

    @property
    def with_broker_ms_per_step(self) -> str:
        if self.cpu is None or self.broker_cpu is None:
            return "-"
        return f"{(self.cpu + self.broker_cpu) * 1000 / (self.runs * self.steps):.2f}"

    @property
    def steps_per_s(self) -> float:
        return self.runs * self.steps / self.elapsed

    @property
    def ms_per_step(self) -> float:
        return self.elapsed * 1000 / (self.runs * self.steps)


def check_result(result: dict[str, Any], steps: int) -> None:
    if result["status"] != "done" or result["steps"] != steps:
        raise RuntimeError(
            f"run {result['run_id']} ended {result['status']} after {result['steps']} steps "
            f"({result['reason']}), not done after {steps}"
        )


# -- 1. LocalJob ------------------------------------------------------------------------------


async def local_job(
    bootstrap: str, runs: int, steps: int, interval: float, parallelism: int, fetch_ms: int
) -> tuple[Measured, Measured]:
    """(submit → last result, first model call → last answer) for ``runs`` runs at once."""
    window = Window()
    graph, topics = agent_graph(counting_agent(steps, window), uuid.uuid4().hex[:8], parallelism)
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as tmp:
        root = Path(tmp)
        job = LocalJob(
            graph,
            bootstrap=bootstrap,
            storage=open_storage(root / "storage"),
            work_dir=root / "work",
            settings=CoordinatorSettings(interval_seconds=interval),
            subtask_settings=SubtaskSettings(fetch_timeout_ms=fetch_ms),
        )
        await job.start()
        try:
            # Warm: topics made, subtasks assigned, journals rebuilt, sinks' producers fenced.
            await job.wait_for_checkpoints(1, timeout_s=120)
            span = CpuSpan(bootstrap)
            span.start()
            elapsed, results = await submit_and_read(bootstrap, topics, runs, steps, earlier=0)
            cpu, broker = span.stop()
            job.raise_failure()
        finally:
            await job.crash()
    check_results(results, runs, steps)
    assert window.first is not None
    return Measured(elapsed, runs, steps, cpu, broker), Measured(
        window.last - window.first, runs, steps
    )


async def process_job(
    bootstrap: str, runs: int, steps: int, interval: float, workers: int
) -> Measured:
    """submit → last result with the agent's ``workers`` subtasks in as many worker processes
    and the coordinator in one more, as a deployment runs them."""
    tag = uuid.uuid4().hex[:8]
    graph, topics = agent_graph(counting_agent(steps), tag, workers)
    await ensure_topics(bootstrap, graph)
    imports = "from bench.agent_steps import agent_graph, counting_agent"
    expr = f"agent_graph(counting_agent({steps}), {tag!r}, {workers})[0]"
    with (
        tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as tmp,
        ProcessCluster(Path(tmp), bootstrap, imports, expr) as cluster,
    ):
        cluster.start_coordinator(interval=interval)
        for n in range(1, workers + 1):  # 2 slots: the agent's subtask, and room for its router
            cluster.start_worker(f"w{n}", slots=2)
        # Warm: one run through every stage, its result published by a completed checkpoint.
        await submit_tasks(bootstrap, topics.tasks, [task(-1)])
        if len(await read_committed(bootstrap, topics.results, 1, timeout_s=180)) != 1:
            cluster.check_alive()
            raise RuntimeError(f"the warm-up run's result did not arrive; logs in {tmp}")
        span = CpuSpan(bootstrap, [p.pid for p in cluster.processes.values()])
        span.start()
        elapsed, results = await submit_and_read(bootstrap, topics, runs, steps, earlier=1)
        cpu, broker = span.stop()
        cluster.check_alive()
    check_results(results, runs + 1, steps)  # the warm-up run's result among them
    return Measured(elapsed, runs, steps, cpu, broker)


async def submit_and_read(
    bootstrap: str, topics: AgentTopics, runs: int, steps: int, *, earlier: int
) -> tuple[float, list[ConsumerRecord[bytes, bytes]]]:
    """Submit ``runs`` tasks at once; the seconds until every result is readable
    read_committed (``earlier`` results were there before), and the results read."""
    reader = asyncio.create_task(
        read_committed(bootstrap, topics.results, earlier + runs, timeout_s=60 + runs * steps * 0.1)
    )
    started = time.monotonic()
    await submit_tasks(bootstrap, topics.tasks, [task(i) for i in range(runs)])
    results = await reader
    return time.monotonic() - started, results


def check_results(results: list[ConsumerRecord[bytes, bytes]], runs: int, steps: int) -> None:
    if len(results) != runs:
        raise RuntimeError(f"{len(results)} of {runs} results arrived in time")
    for record in results:
        check_result(json.loads(record.value), steps)


# -- 2. Direct, one run at a time ----------------------------------------------------------


async def plain_runs(runs: int, steps: int) -> Measured:
    """The run's transitions with the model and tool called directly; nothing persisted."""
    agent = counting_agent(steps)
    model, schemas = agent.make_model(), [add.schema()]
    tools = {t.name: t for t in agent.declared_tools}

    async def one(i: int) -> None:
        request = task(i)
        state = machine.start_run(request.run_id, request.goal, INSTRUCTIONS, agent.budget,
                                  time.time()).state  # fmt: skip
        while not isinstance(action := machine.next_action(state, tools), machine.Idle):
            now = time.time()
            if isinstance(action, machine.CallModel):
                response = await model.complete(
                    list(state.messages), schemas, idempotency_key=action.key
                )
                state = machine.after_model(state, response, now).state
            elif isinstance(action, machine.CallTool):
                context = ToolContext(state.run_id, state.step, action.key)
                value = await action.tool.call(context, action.arguments)
                state = machine.after_tool(state, action, value, None, now).state
            else:
                raise RuntimeError(f"run {state.run_id}: unexpected action {action}")
        if state.status is not RunStatus.DONE or state.step != steps:
            raise RuntimeError(f"run {state.run_id} ended {state.status} at step {state.step}")

    await one(-1)
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(runs):
        await one(i)
    return Measured(time.perf_counter() - started, runs, steps, time.process_time() - cpu, 0.0)


async def operator_runs(bootstrap: str | None, root: Path, runs: int, steps: int) -> Measured:
    """An `AgentOperator` driven by hand over RocksDB; a `KafkaJournal` if ``bootstrap``."""
    agent = counting_agent(steps)
    graph, topics = agent_graph(agent, uuid.uuid4().hex[:8], parallelism=1)
    journal: Journal
    kafka: KafkaJournal | None = None
    if bootstrap is None:
        journal = InMemoryJournal()
    else:
        await ensure_topics(bootstrap, graph)
        topic = graph.operators[agent.name].owned_topic_name(graph.name, JOURNAL_SUFFIX)
        journal = kafka = KafkaJournal(bootstrap, topic, [0])
        await kafka.start()
    store = RocksDBStateStore.open(root / uuid.uuid4().hex)
    wal = store.metadata()  # where a subtask keeps exactly-once sink outputs until published
    operator = AgentOperator(agent, topics, pipeline=graph.name, journal=journal,
                             registry=CollectorRegistry())  # fmt: skip
    wakes: list[WakeUp] = []
    await operator.open(OperatorOpenContext(
        subtask=f"{agent.name}#0", attempt=1, bootstrap=bootstrap or "", owned_topics={},
        storage=open_storage("memory://"),
        input_partitions=[(topics.tasks, 0), (topics.approvals, 0)],
        _states=store.partition, _schedule=wakes.append, _clock=time.monotonic,
    ))  # fmt: skip
    emitted = 0
    results: dict[bytes, bytes] = {}

    def settle(ctx: RecordContext) -> None:
        """What a subtask does when a call returns: outputs to the WAL, wakes queued."""
        nonlocal emitted
        for out in ctx.emitted:
            wal.put(b"wal/%012d" % emitted, out.value)
            emitted += 1
            if out.topic == topics.results:
                results[out.key or b""] = out.value
        store.flush_batch()
        wakes.extend(ctx.wakes)

    async def one(i: int) -> None:
        request = task(i)
        value = request.model_dump_json().encode()
        record = Record(topics.tasks, 0, i + 1, request.run_id.encode(), value, 0)
        ctx = RecordContext(topics.tasks, 0, record, store.partition, time.monotonic)
        await operator.process(record, ctx)
        settle(ctx)
        while wakes:
            wake = wakes.pop(0)
            ctx = RecordContext(wake.topic, wake.partition, None, store.partition, time.monotonic)
            await operator.on_wake(wake.key, ctx)
            settle(ctx)
        # The run's result, as LangGraph's side checks the state its invoke returns.
        check_result(json.loads(results.pop(request.run_id.encode())), steps)

    try:
        await one(-1)
        span = CpuSpan(bootstrap or "")
        span.start()
        started = time.perf_counter()
        for i in range(runs):
            await one(i)
        elapsed = time.perf_counter() - started
        cpu, broker = span.stop()
        return Measured(elapsed, runs, steps, cpu, broker if bootstrap else 0.0)
    finally:
        await operator.close()
        store.close()
        if kafka is not None:
            await kafka.stop()


# -- 3. LangGraph ---------------------------------------------------------------------------


def langgraph(runs: int, steps: int) -> dict[str, Any] | str:
    """The JSON line of ``bench/langgraph_steps.py``, or why it could not run."""
    uv = shutil.which("uv") or str(_REPO / ".tools" / "bin" / "uv")
    with_ = [arg for spec in LANGGRAPH for arg in ("--with", spec)]
    command = [uv, "run", "--isolated", "--no-project", *with_, "python",
               str(_REPO / "bench" / "langgraph_steps.py"), "--runs", str(runs),
               "--steps", str(steps)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800,
                              check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return lines[-1]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- the table ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Round:
    """One paired round: our job in one process and in worker processes, and LangGraph's
    every mode (its JSON, or why it could not run), measured one after another."""

    job: Measured
    engine: Measured
    processes: Measured | None
    langgraph: dict[str, Any] | str


async def paired_rounds(
    bootstrap: str,
    runs: int,
    steps: int,
    interval: float,
    parallelism: int,
    fetch_ms: int,
    job_rounds: int,
    processes: int,
) -> list[Round]:
    """``job_rounds`` rounds of LocalJob, worker processes and LangGraph, in that order in
    even rounds and the reverse in odd ones (ABBA), so that the ratios are taken within a
    round and a drift of the machine favours no side."""
    rounds: list[Round] = []
    for round_no in range(job_rounds):
        job: tuple[Measured, Measured] | None = None
        in_processes: Measured | None = None
        theirs: dict[str, Any] | str = ""
        order = ["job", "processes", "langgraph"]
        for name in order if round_no % 2 == 0 else order[::-1]:
            if name == "job":
                job = await local_job(bootstrap, runs, steps, interval, parallelism, fetch_ms)
            elif name == "processes" and processes:
                in_processes = await process_job(bootstrap, runs, steps, interval, processes)
            elif name == "langgraph":
                theirs = await asyncio.to_thread(langgraph, runs, steps)
        assert job is not None
        rounds.append(Round(job[0], job[1], in_processes, theirs))
    return rounds


async def sluicegate(
    bootstrap: str, rounds: list[Round], runs: int, steps: int
) -> dict[str, Measured]:
    """Our rows: the rounds' medians, then the direct runs one at a time."""
    measured: dict[str, Measured] = {}
    _keep_median(measured, "job", [r.job for r in rounds])
    _keep_median(measured, "job_engine", [r.engine for r in rounds])
    in_processes = [r.processes for r in rounds if r.processes is not None]
    if in_processes:
        _keep_median(measured, "processes", in_processes)
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as tmp:
        # Interleaved, the median of DIRECT_ROUNDS each: one repetition moves by 15%.
        direct: dict[str, list[Measured]] = {"plain": [], "memory": [], "kafka": []}
        for round_no in range(DIRECT_ROUNDS):
            order = ["plain", "memory", "kafka"]
            for name in order if round_no % 2 == 0 else order[::-1]:  # alternating order
                if name == "plain":
                    direct[name].append(await plain_runs(runs, steps))
                else:
                    kafka = bootstrap if name == "kafka" else None
                    direct[name].append(await operator_runs(kafka, Path(tmp), runs, steps))
    for name, repetitions in direct.items():
        measured[name] = _median_round(repetitions)
    return measured


def _median_round(rounds: list[Measured]) -> Measured:
    """The median round by elapsed time (the upper of two)."""
    return sorted(rounds, key=lambda m: m.elapsed)[len(rounds) // 2]


def _keep_median(measured: dict[str, Measured], name: str, rounds: list[Measured]) -> None:
    """The median round as ``name``, its fastest and slowest beside it."""
    measured[name] = _median_round(rounds)
    fastest, slowest = min(rounds, key=lambda m: m.elapsed), max(rounds, key=lambda m: m.elapsed)
    measured[f"{name}_fastest"], measured[f"{name}_slowest"] = fastest, slowest


def _langgraph_measured(theirs: dict[str, Any], runs: int) -> dict[str, Measured]:
    """LangGraph's modes of one round (its durability is in its process: SQLite's fsync is
    its system time, so no broker share)."""
    return {
        k: Measured(theirs[k]["elapsed_s"], runs, theirs["steps"], theirs[k]["cpu_s"], 0.0)
        for k in LANGGRAPH_MODES
    }


def report(
    ours: dict[str, Measured],
    rounds: list[Round],
    runs: int,
    steps: int,
    processes: int,
) -> None:
    job_rounds = len(rounds)
    failed = [r.langgraph for r in rounds if isinstance(r.langgraph, str)]
    theirs: dict[str, Any] | str = failed[0] if failed else rounds[0].langgraph
    per_round: list[tuple[Round, dict[str, Measured]]] = []
    lg: dict[str, Measured] = {}
    if not failed:
        per_round = [
            (r, _langgraph_measured(r.langgraph, runs))
            for r in rounds
            if not isinstance(r.langgraph, str)  # none is, but mypy needs telling
        ]
        lg = {key: _median_round([m[key] for _, m in per_round]) for key in LANGGRAPH_MODES}

    def paired(a: str, b: str) -> str:
        """Per round, our ``a`` (a round's job or processes, or the direct runs) over
        LangGraph's mode ``b`` of the same round, in steps/s: median (lowest-highest)."""
        mine = [[(ours[a] if a == "kafka" else getattr(r, a)).steps_per_s] for r, _ in per_round]
        baseline = [[m[b].steps_per_s] for _, m in per_round]
        return median_spread(paired_ratios(mine, baseline), digits=2, unit="x")

    def row(name: str, at_once: str, m: Measured, per_step: bool) -> tuple[str, ...]:
        ms = f"{m.ms_per_step:.2f}" if per_step else "-"
        return (name, at_once, f"{m.steps_per_s:,.0f}", ms, m.cpu_ms_per_step,
                m.with_broker_ms_per_step)  # fmt: skip

    def ours_row(name: str, at_once: str, m: Measured, per_step: bool) -> tuple[str, ...]:
        return (*row(name, at_once, m, per_step), "-")

    overhead = ours["kafka"].ms_per_step - ours["plain"].ms_per_step
    rows = [
        ours_row("sluicegate LocalJob (Kafka journal + RocksDB + checkpoints), submit→result",
            str(runs), ours["job"], per_step=False),
        ours_row("  same, first model call→last answer", str(runs), ours["job_engine"], False),
        *([ours_row(f"sluicegate, {processes} worker processes + coordinator, submit→result",
               str(runs), ours["processes"], False)] if "processes" in ours else []),
        ours_row("sluicegate direct, plain loop (no durability)", "1", ours["plain"], True),
        ours_row("sluicegate direct, AgentOperator + in-memory journal + RocksDB", "1",
            ours["memory"], True),
        ours_row("sluicegate direct, AgentOperator + Kafka journal + RocksDB", "1",
            ours["kafka"], True),
        ("sluicegate per-step overhead of durability (Kafka+RocksDB - plain)", "1", "-",
         f"{overhead:.2f}", "-", "-", "-"),
    ]  # fmt: skip
    if isinstance(theirs, str):
        rows.append(("langgraph: unavailable (below)", "-", "-", "-", "-", "-", "-"))
    else:
        lg_overhead = lg["sqlite_sync"].ms_per_step - lg["plain"].ms_per_step
        for key, (name, at_once) in LANGGRAPH_MODES.items():
            over = paired("job", key)
            rows.append((*row(f"langgraph, {name}", str(runs) if at_once else "1", lg[key],
                              per_step=not at_once), over))  # fmt: skip
        rows.append(("langgraph per-step overhead of checkpointing (SqliteSaver sync - none)",
                     "1", "-", f"{lg_overhead:.2f}", "-", "-", "-"))  # fmt: skip
    notes = [
        f"LocalJob rows: the median of {job_rounds} rounds (a new job each); steps/s "
        f"{ours['job_slowest'].steps_per_s:,.0f}-{ours['job_fastest'].steps_per_s:,.0f} "
        f"submit→result, {ours['job_engine_slowest'].steps_per_s:,.0f}-"
        f"{ours['job_engine_fastest'].steps_per_s:,.0f} first call→last answer (results are "
        "published by the checkpoint after the last answer, so submit→result moves by up to "
        "one interval between rounds); LangGraph rows: each mode's median round. Each round "
        "runs LocalJob, the worker processes and LangGraph one after another (reversed in odd "
        "rounds), and every ratio is taken within a round"
    ]
    notes.append(
        "CPU ms/step: CPU seconds of the processes doing the work over the timed span, per step "
        "(LocalJob: this process, the client submitting and reading included; worker "
        "processes: coordinator and workers, plus this process; LangGraph: its process); with "
        "broker: plus the broker JVM's (bench.cpu; '-' when it is not a local process). Who "
        "fsyncs what: LangGraph's SQLite commits each checkpoint with synchronous=FULL in WAL "
        "mode, an fsync of the WAL per commit, counted as its process's system time; the "
        "broker fsyncs no write (Kafka's default flush policy; one replica here, so acks=all "
        "is the leader's page cache: on a real cluster durability is replication); RocksDB "
        "syncs only at a checkpoint."
    )
    if "processes" in ours:
        notes.append(
            f"worker processes rows: {processes} `sluicegate worker` processes (one agent "
            f"subtask each) and a `sluicegate coordinator`, paired with each LocalJob round; "
            f"{ours['processes_slowest'].steps_per_s:,.0f}-"
            f"{ours['processes_fastest'].steps_per_s:,.0f} steps/s submit→result"
        )
    if isinstance(theirs, str):
        notes.append(f"langgraph: unavailable ({theirs.strip()})")
    else:
        best = max(DURABLE_AT_ONCE, key=lambda k: lg[k].steps_per_s)
        ratios = [
            ("LocalJob submit→result", "langgraph+SqliteSaver sync, one at a time", "job",
             "sqlite_sync"),
            ("LocalJob submit→result", f"langgraph's fastest durable mode all at once "
             f"({LANGGRAPH_MODES[best][0]})", "job", best),
            *([(f"{processes} worker processes submit→result",
                "langgraph's fastest durable mode all at once", "processes", best)]
              if "processes" in ours else []),
            ("LocalJob submit→result", "langgraph without a checkpointer, all at once", "job",
             "plain_concurrent"),
            ("direct Kafka journal + RocksDB", "langgraph+SqliteSaver sync, one at a time",
             "kafka", "sqlite_sync"),
        ]  # fmt: skip
        for ours_name, theirs_name, a, b in ratios:
            notes.append(
                f"sluicegate/langgraph steps/s: {paired(a, b)}  ({ours_name} vs "
                f"{theirs_name}; median (lowest-highest) of the ratios within each of "
                f"{job_rounds} paired rounds)"
            )
        versions = ", ".join(f"{k}=={v}" for k, v in theirs["versions"].items())
        notes.append(f"{versions}; sqlite {theirs['sqlite_pragmas']}; "
                     f"{theirs['checkpoints_per_run']} checkpoints per langgraph run")  # fmt: skip
    title = f"Durable agent steps: sluicegate and LangGraph, {runs} runs of {steps} steps"
    header = ("", "runs at once", "steps/s", "ms/step", "CPU ms/step", "with broker CPU ms/step",
              "LocalJob submit→result / it")  # fmt: skip
    report_table("agent_steps", title, header, rows, notes)


async def measure(
    bootstrap: str, args: argparse.Namespace, steps: int
) -> tuple[list[Round], dict[str, Measured]]:
    rounds = await paired_rounds(
        bootstrap, args.runs, steps, args.interval, args.parallelism, args.fetch_timeout_ms,
        args.job_rounds, args.processes,
    )  # fmt: skip
    return rounds, await sluicegate(bootstrap, rounds, args.runs, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs (R)")
    parser.add_argument(
        "--steps",
        type=lambda given: [int(n) for n in given.split(",")],
        default=[40, 200],
        help="model calls per run; a table for each of these (comma-separated)",
    )
    parser.add_argument("--interval", type=float, default=1.0, help="checkpoint interval (s)")
    parser.add_argument("--parallelism", type=int, default=2, help="subtasks of the agent")
    parser.add_argument("--job-rounds", type=int, default=3, help="LocalJob rounds (median)")
    parser.add_argument(
        "--processes", type=int, default=2, help="worker processes of the paired job (0: none)"
    )
    parser.add_argument(
        "--fetch-timeout-ms",
        type=int,
        default=SubtaskSettings().fetch_timeout_ms,
        help="SubtaskSettings.fetch_timeout_ms: an idle subtask runs due wake-ups this often",
    )
    args = parser.parse_args()
    if min(args.steps) < 1 or args.runs < 1 or args.job_rounds < 1 or args.processes < 0:
        parser.error("--runs, --steps and --job-rounds are at least 1, --processes at least 0")
    # Leader elections on new topics: the journal's rebuild retries until the leader is there.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    started = time.monotonic()
    for steps in args.steps:
        with kafka_bootstrap() as bootstrap:
            rounds, ours = asyncio.run(measure(bootstrap, args, steps))
        print(
            f"{args.runs} runs of {steps} steps (model call + tool call; the last step "
            f"answers); LocalJob: checkpoint interval {args.interval} s, {args.parallelism} "
            f"subtasks, fetch timeout {args.fetch_timeout_ms} ms"
        )
        report(ours, rounds, args.runs, steps, args.processes)
    print(f"benchmark took {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()

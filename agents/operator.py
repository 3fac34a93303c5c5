"""`AgentOperator`: agent runs as a stateful stream operator.

Each run lives in the keyed state of its tasks partition (`RunState` under ``run/<run_id>``)
and moves one step at a time: a task record starts it, then each wake-up performs one action of
`agents.runs.machine.next_action` (a model call, a tool call, or a safe-point write), then at
once every read-only tool call that follows it (the tool calls a model reply asked for), and
wakes the run again. The calls of a wake-up share their journal round trip: none waits for the
acknowledgement of the entries before it, and their safe points are written in order once all
are durable. Between two wake-ups the run is at a safe point, which is the only moment a
snapshot can see, because the engine snapshots only between calls.

Every model and tool call goes through the effect journal (`agents.journal.perform`) with an
attempt-independent key, so after a restore the re-driven run gets the recorded results and
takes the same decisions, and effects are not repeated.

Fault points (for tests, see `agents.faults`): ``tool.before_call``, ``tool.after_call``,
``model.before_call``, ``model.after_call``, and the same per name (``tool.send_email.after_call``);
``tool.after_call`` is the moment between a tool's effect and its journal ``done`` write.

Payloads by reference (with `Agent.blobs`, ``docs/blobs.md``): a large tool result or model
reply is stored by `agents.blobs.references.BlobReferences` inside the journaled call, before
its ``done``; the run's handles are resolved in `EffectCalls.call_model`, and each one that
cannot be read is saved as a ``blob_unavailable`` safe point before the model is called.
A `RollbackRun` command on the approvals topic puts a run into ``rolling_back``; from then on
each wake-up performs one action of its rollback (`agents.rollback.compensation`,
`agents.rollback.machine`).
Commands and wake-ups of one run never interleave: the engine runs `process` and `on_wake` of
one key one after the other, and a command's record key must be its run id (the routing
stage writes it so; any other is dead-lettered).

Memory (with `Agent.memory`, ``docs/memory.md``): `agents.memory.keeper.MemoryKeeper` gives
each model call the key's entries (`EffectCalls.call_model`) and writes what a safe point puts
into memory in `_save`, in the same call as the run's state. The router places a key's runs in
one partition and sends decisions and rollbacks to every partition, so one for a run this
partition does not hold is ignored instead of dead-lettered; `EraseMemory` deletes a key.

Runs are read and written through `agents.runs.cache.RunCache`: the decoded state of a run is
kept between its wake-ups (written through to the state at every safe point, dropped on every
`open`, since a restore rewinds the state) and its next document reuses the encoded messages
and effects it still holds (`agents.runs.encoding`).

Journal retention (`agents.journal.retention.Retention`): a finished run's entries are
tombstoned once checkpoint ``n + JOURNAL_LAG`` has completed, where ``n`` is the first
checkpoint holding the run's final state; a rollback calls it off.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable

from prometheus_client import CollectorRegistry
from pydantic_core import to_json

from sluicegate.agents.blobs.references import BlobReferences, Inline
from sluicegate.agents.declaration import JOURNAL_SUFFIX, Agent, AgentTopics
from sluicegate.agents.effect_calls import EffectCalls
from sluicegate.agents.fork.patch import fork_run
from sluicegate.agents.journal import (
    Deferred,
    Journal,
    OnUnknown,
    all_settled,
)
from sluicegate.agents.journal.kafka import KafkaJournal
from sluicegate.agents.journal.retention import JOURNAL_LAG, Retention
from sluicegate.agents.memory.keeper import MemoryKeeper
from sluicegate.agents.memory.tool import remember_tool
from sluicegate.agents.messages import (
    ApprovalDecision,
    EraseMemory,
    ForkRun,
    RollbackRun,
    RunResult,
    TaskRequest,
    parse_command,
)
from sluicegate.agents.metrics import AgentMetrics
from sluicegate.agents.models.contract import ModelClient
from sluicegate.agents.rollback import machine as rollback
from sluicegate.agents.rollback.compensation import Compensator
from sluicegate.agents.runs import machine
from sluicegate.agents.runs.approval_timeouts import ApprovalTimeouts
from sluicegate.agents.runs.cache import DEFAULT_CAPACITY, RunCache
from sluicegate.agents.runs.header import RunHeader
from sluicegate.agents.runs.state import RunState, RunStatus, run_key
from sluicegate.agents.runs.tracker import RunTracker
from sluicegate.agents.tools import Tool, ToolDeclarationError, ToolSource, tool_schemas
from sluicegate.agents.tracing import RunTracing
from sluicegate.operators.contract import Context, OpenContext, Operator, Record
from sluicegate.operators.exceptions import RetryableError
from sluicegate.operators.state.store import PartitionState
from sluicegate.operators.storage.blobs import BlobStore
from sluicegate.operators.tracing import tracer

__all__ = ["JOURNAL_LAG", "AgentOperator"]

logger = logging.getLogger(__name__)

_MAX_BACKOFF_S = 30.0


class AgentOperator(Operator):
    """One subtask's share of an agent's runs; see the module docstring."""

    def __init__(
        self,
        agent: Agent,
        topics: AgentTopics,
        *,
        pipeline: str,
        journal: Journal | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
        run_cache_size: int = DEFAULT_CAPACITY,
    ) -> None:
        self.agent, self.topics, self.pipeline = agent, topics, pipeline
        self._memory = None if agent.memory is None else MemoryKeeper(agent.memory, clock)
        self._builtin = (
            [] if agent.memory is None else [remember_tool(agent.memory.max_entry_chars)]
        )
        declared = [*agent.declared_tools, *self._builtin]
        self._tools = {t.name: t for t in declared}
        self._schemas = tool_schemas(declared)  # EffectCalls reads this list
        self._sources: list[ToolSource] = []
        self._journal = journal
        self._kafka_journal: KafkaJournal | None = None
        self._acquired = False
        self._registry = registry
        self._clock = clock
        self._timeouts = ApprovalTimeouts(
            agent.approval_timeout_s, agent.on_approval_timeout, clock
        )
        self._model: ModelClient | None = None
        self._attempt = 0
        self._subtask = ""
        self._retries: Counter[str] = Counter()
        self._retention = Retention()
        self._tracker: RunTracker | None = None
        self._blobs: BlobReferences | None = None
        self._compensator: Compensator | None = None
        self._runs = RunCache(run_cache_size)

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self, ctx: OpenContext) -> None:
        """Start the journal, then re-drive every run whose restored state has work pending."""
        self._attempt, self._subtask = ctx.attempt, ctx.subtask
        self._runs.clear()  # the state may have been restored: never read a run from before
        self._metrics = AgentMetrics.of(self._registry)
        self._labels = (self.pipeline, self.agent.name, ctx.subtask)
        self._metrics.start(*self._labels)
        self._tracker = tracker = RunTracker(self._metrics, self._labels, self._clock)
        partitions = [p for t, p in ctx.input_partitions if t == self.topics.tasks]
        if self._journal is None:
            topic = ctx.owned_topic(JOURNAL_SUFFIX)
            journal = KafkaJournal(ctx.bootstrap, topic, partitions)
            await journal.start()
            self._kafka_journal = journal
            self._journal = journal
        if (policy := self.agent.blobs) is not None:
            self._blobs = BlobReferences(
                policy,
                BlobStore(policy.storage or ctx.storage),
                agent=self.agent.name,
                metrics=self._metrics,
                labels=self._labels,
                clock=self._clock,
            )
        self._model = self.agent.make_model()
        self._tracing = RunTracing(
            tracer("sluicegate.agents"), pipeline=self.pipeline, agent=self.agent.name,
            provider=_provider_name(self._model),
        )  # fmt: skip
        self._calls = calls = EffectCalls(
            journal=self._journal, model=self._model, model_name=self.agent.model_name,
            schemas=self._schemas, payloads=self._blobs or Inline(), attempt=ctx.attempt,
            metrics=self._metrics, labels=self._labels,
            save=lambda step, context: self._save(step, context.state, context),
            tracing=self._tracing, memory=self._memory,
        )  # fmt: skip
        self._compensator = Compensator(
            self.agent, self._journal, self._metrics, self._labels, calls, pipeline=self.pipeline,
        )  # fmt: skip
        if self.agent.resources is not None:
            await self.agent.resources.acquire()
            self._acquired = True
        for source in self.agent.tool_sources:
            await source.acquire()
            self._sources.append(source)
        if self._sources:
            try:
                await self._list_tools()
            except RetryableError as exc:  # listed again before each step until it works
                logger.warning("%s: tools not listed yet: %s", ctx.subtask, exc)
        for partition in partitions:
            for _, value in ctx.state(self.topics.tasks, partition).items(prefix=b"run/"):
                header = RunHeader.peek(value)  # parked or finished: no full decode
                if header is not None:
                    tracker.track_header(header)
                    if header.status.finished:  # its entries may still be journaled
                        self._retention.finished(header.run_id, partition)
                    elif (since := header.waiting_since) is not None:
                        delay = self._timeouts.remaining_since(since)
                        if delay is not None:
                            key = header.run_id.encode()
                            ctx.wake(self.topics.tasks, partition, key, after_s=delay)
                    continue
                state = RunState.decode(value)
                self._runs.keep(partition, state, len(value))
                tracker.track(state)
                if state.status is RunStatus.RUNNING or self._rollback_busy(state):
                    ctx.wake(self.topics.tasks, partition, state.run_id.encode())
                elif state.status is RunStatus.WAITING_APPROVAL:
                    delay = self._timeouts.remaining(state)
                    if delay is not None:
                        ctx.wake(self.topics.tasks, partition, state.run_id.encode(), after_s=delay)
                else:
                    self._retention.finished(state.run_id, partition)
        tracker.publish_counts()  # every status has a series, zeros included
        logger.info("%s: %d runs restored (%s)", ctx.subtask, len(tracker), tracker.counts())

    def on_snapshot(self, checkpoint_id: int) -> None:
        self._retention.snapshot(checkpoint_id)

    async def on_completed(self, checkpoint_id: int) -> None:
        assert self._journal is not None
        for run_id, partition in self._retention.completed(checkpoint_id):
            await self._journal.forget_run(run_id, partition=partition)
        self._export_journal_counts()

    async def close(self) -> None:
        try:
            if self._kafka_journal is not None:
                await self._kafka_journal.stop()
        finally:
            if self._acquired and self.agent.resources is not None:
                self._acquired = False
                await self.agent.resources.release()
            sources, self._sources = self._sources, []
            for source in sources:
                await source.release()
            close = getattr(self._model, "aclose", None)
            if close is not None:
                await close()

    # -- inputs ---------------------------------------------------------------------------

    async def process(self, record: Record, ctx: Context) -> None:
        if record.topic == self.topics.tasks:
            self._on_task(TaskRequest.model_validate_json(record.value), ctx)
            return
        command = parse_command(record.value)
        if isinstance(command, EraseMemory):
            self._on_erase(command, ctx)
            return
        if record.key is not None and record.key != command.run_id.encode():
            # Commands of a run are ordered with its wake-ups by the record key.
            raise ValueError(
                f"a command for run {command.run_id!r} under record key {record.key!r}: the "
                "routing stage keys commands by run_id"
            )
        if isinstance(command, ForkRun):
            self._on_fork(command, ctx)
        elif isinstance(command, RollbackRun):
            self._on_rollback(command, ctx)
        else:
            self._on_decision(command, ctx)

    def _on_task(self, task: TaskRequest, ctx: Context) -> None:
        if ctx.state.get(run_key(task.run_id)) is not None:
            logger.info("run %s exists: task record ignored", task.run_id)
            return
        budget = self.agent.budget_for(task.budget)
        if task.budget is not None and budget != task.budget:
            logger.debug(
                "run %s: budget %s asked for, %s granted", task.run_id, task.budget, budget
            )
        start = machine.start_run(
            task.run_id,
            task.goal,
            self.agent.instructions,
            budget,
            self._clock(),
            metadata=task.metadata,
        )
        self._save(start, ctx.state, ctx)
        ctx.wake(task.run_id.encode())

    def _on_decision(self, decision: ApprovalDecision, ctx: Context) -> None:
        tasks = ctx.state_of(self.topics.tasks)
        state = self._runs.get(tasks, ctx.partition, decision.run_id)
        if state is None:
            if self._memory is not None:  # sent to every partition: another one holds it
                logger.debug("run %s is not in this partition: decision ignored", decision.run_id)
                return
            raise ValueError(f"approval for unknown run {decision.run_id!r}")
        if rollback.in_rollback(state):
            step = rollback.decide_compensation(
                state, decision.approved, decision.by, decision.reason, self._clock()
            )
        else:
            step = machine.decide_approval(
                state, decision.call_id, decision.approved, decision.by, decision.reason,
                self._clock(),
            )  # fmt: skip
        if step is None:
            logger.info("run %s: decision ignored (no matching pending call)", decision.run_id)
            return
        self._tracing.approval(state, step.event, step.state.updated_at)
        self._save(step, tasks, ctx)
        ctx.wake(decision.run_id.encode(), topic=self.topics.tasks)

    def _on_fork(self, fork: ForkRun, ctx: Context) -> None:
        """Start fork ``fork.run_id`` from its seed (`agents.fork.patch.fork_run`), unless a run of
        that id exists (ignored like a duplicate task). Its budget is the seed's, capped at
        the agent's ceiling; a seed that does not check out raises (dead-lettered)."""
        tasks = ctx.state_of(self.topics.tasks)
        if tasks.get(run_key(fork.run_id)) is not None:
            logger.info("run %s exists: fork record ignored", fork.run_id)
            return
        agent = self.agent
        ceiling = agent.budget if agent.budget_ceiling is None else agent.budget_ceiling
        start = fork_run(
            fork.run_id,
            fork.origin(),
            goal=fork.goal,
            messages=fork.messages,
            usage=fork.usage,
            budget=fork.budget.capped_by(ceiling),
            metadata=fork.metadata,
            now=self._clock(),
            note=fork.note,
            blobs=fork.blobs,
            offered_tools=fork.offered_tools,
        )
        logger.info(
            "run %s forked from %s after step %d by %s",
            fork.run_id, fork.parent_run_id, fork.from_step, fork.by,
        )  # fmt: skip
        if self._memory is not None and fork.memory_as_of is not None:
            self._memory.as_of(fork.run_id, fork.memory_as_of, tasks)
        self._save(machine.Transition(start.state, start.event | {"by": fork.by}), tasks, ctx)
        ctx.wake(fork.run_id.encode(), topic=self.topics.tasks)

    def _on_rollback(self, command: RollbackRun, ctx: Context) -> None:
        """Start the rollback; a run that cannot be rolled back is dead-lettered with why."""
        tasks = ctx.state_of(self.topics.tasks)
        state = self._runs.get(tasks, ctx.partition, command.run_id)
        if state is None:
            if self._memory is not None:  # sent to every partition: another one holds it
                logger.debug("run %s is not in this partition: rollback ignored", command.run_id)
                return
            raise ValueError(f"rollback of unknown run {command.run_id!r}")
        step = rollback.start_rollback(
            state, command.to_step, command.by, command.reason, self._clock()
        )
        logger.info(
            "run %s: rollback to step %d asked by %s (%d effects to undo)",
            command.run_id, command.to_step, command.by, len(step.event["effects"]),
        )  # fmt: skip
        self._retention.call_off(command.run_id)  # its journal must outlive the rollback
        self._save(step, tasks, ctx)
        if state.status is not RunStatus.RUNNING:  # a running run has a wake-up pending
            ctx.wake(command.run_id.encode(), topic=self.topics.tasks)

    def _on_erase(self, command: EraseMemory, ctx: Context) -> None:
        """Delete every memory entry of the key (the router placed the command with them)."""
        if self._memory is None:
            raise ValueError("erase_memory: this agent has no memory")
        erased = self._memory.erase(command.key, ctx.state_of(self.topics.tasks))
        self._metrics.memory_entries.labels(*self._labels, "erased").inc(erased)
        logger.info(
            "memory of %r erased by %s: %d entries (%s)",
            command.key, command.by, erased, command.reason or "no reason given",
        )  # fmt: skip

    def _rollback_busy(self, state: RunState) -> bool:
        """Whether the run's rollback has an action to perform now."""
        assert self._compensator is not None
        return not isinstance(self._compensator.next_action(state), machine.Idle)

    # -- driving a run --------------------------------------------------------------------

    async def on_wake(self, key: bytes, ctx: Context) -> None:
        """Perform one step of run ``key`` (`_step`; one action of a rollback) and, if it has
        more to do, wake it again."""
        state = self._runs.get(ctx.state, ctx.partition, key.decode())
        if state is None:
            return
        now = self._clock()
        in_rollback = rollback.in_rollback(state)
        try:
            with self._tracing.wake(state, rollback=in_rollback):
                if in_rollback:
                    assert self._compensator is not None
                    with self._tracing.compensation(state):
                        step = await self._compensator.perform(state, ctx, now)
                    steps = [] if step is None else [step]
                else:
                    steps = await self._step(state, ctx, now)
        except RetryableError as exc:
            self._retries[state.run_id] += 1
            delay = min(_MAX_BACKOFF_S, 0.5 * 2 ** self._retries[state.run_id])
            logger.warning("run %s: %s; retrying in %.1f s", state.run_id, exc, delay)
            ctx.wake(key, after_s=delay)
            return
        self._retries.pop(state.run_id, None)
        if not steps:
            delay = self._timeouts.remaining(state)
            if state.status is RunStatus.WAITING_APPROVAL and delay is not None:
                ctx.wake(key, after_s=delay)  # woken early: keep the timeout
            return
        for step in steps[:-1]:  # saved with the last, no await between: no checkpoint
            self._record(step, ctx.state, ctx)  # could see their run documents
        self._save(steps[-1], ctx.state, ctx)
        state = steps[-1].state
        if state.status is RunStatus.RUNNING or self._rollback_busy(state):
            ctx.wake(key)
        elif state.status is RunStatus.WAITING_APPROVAL:
            delay = self._timeouts.remaining(state)
            if delay is not None:
                ctx.wake(key, after_s=delay)

    async def _step(self, state: RunState, ctx: Context, now: float) -> list[machine.Transition]:
        """The next action of a running run, then every read-only tool call that follows it
        at once (the tool calls a model reply asked for): their safe points, to be saved in
        order. Every journal write these actions made is durable when this returns.

        The calls may all be called again, so none waits for the acknowledgement of the
        journal writes before it (`Deferred`): the writes share a round trip, and the safe
        points are saved only once all are durable. If a write fails or the journal keeps
        another outcome than a call returned, no safe point is saved; the next wake-up
        replays the calls from the journal (or calls again what it lacks)."""
        pending: list[Deferred] = []
        steps: list[machine.Transition] = []
        calls = state.pending_calls
        if self._sources and calls and calls[0].name not in self._tools:
            for source in self._sources:  # listed since? (the refresh rule, `agents.mcp.source`)
                source.invalidate()
        if any(source.stale for source in self._sources):
            await self._list_tools()
        action = machine.next_action(state, self._tools)
        try:
            step = await self._perform(state, action, ctx, now, pending)
            while step is not None:
                steps.append(step)
                action = machine.next_action(step.state, self._tools)
                if not (isinstance(action, machine.CallTool) and _may_repeat(action.tool)):
                    break
                try:
                    step = await self._perform(step.state, action, ctx, self._clock(), pending)
                except RetryableError:
                    break  # the steps so far stand; this call is retried at the next wake-up
        finally:
            if pending:  # every write settled, whatever the steps raised
                await all_settled([d.settled for d in pending])
        for deferred in pending:
            settled = deferred.settled
            if settled.cancelled():
                raise asyncio.CancelledError(f"the journal writes of {deferred.key} were dropped")
            if (error := settled.exception()) is not None:
                raise error
            if settled.result().replayed != deferred.provisional.replayed:
                raise _EarlierOutcomeKeptError(deferred.key)
        return steps

    async def _list_tools(self) -> None:
        """The declared tools and those the sources list now, in the order the agent names
        them; the model is offered them from its next call on."""
        tools = [*self.agent.declared_tools, *self._builtin]
        for source in self._sources:
            tools.extend(await source.tools())
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            duplicates = sorted({n for n in names if names.count(n) > 1})
            raise ToolDeclarationError(self.agent.name, f"duplicate tool names {duplicates}")
        self._tools = {t.name: t for t in tools}
        self._schemas[:] = tool_schemas(tools)

    async def _perform(
        self,
        state: RunState,
        action: machine.Action,
        ctx: Context,
        now: float,
        pending: list[Deferred],
    ) -> machine.Transition | None:
        if isinstance(action, machine.Idle):
            return self._maybe_time_out(state, now)
        if isinstance(action, machine.Fail):
            return machine.fail(state, action.reason, now)
        if isinstance(action, machine.CallModel):
            return await self._calls.call_model(state, action, ctx, now, pending)
        if isinstance(action, machine.RejectCall):
            return machine.reject_call(state, action, now)
        if isinstance(action, machine.AskApproval):
            return machine.ask_approval(state, action, now)
        if isinstance(action, machine.RecordIntent):
            return machine.record_intent(state, action, now)
        if isinstance(action, machine.ReuseRecorded):
            return machine.after_tool(state, action, action.result, action.error, now)
        return await self._calls.call_tool(state, action, ctx, now, pending)

    # -- safe points ----------------------------------------------------------------------

    def _save(self, step: machine.Transition, state: PartitionState, ctx: Context) -> None:
        """Write the run's document, then `_record` the safe point."""
        self._runs.put(state, ctx.partition, step.state)
        self._record(step, state, ctx)

    def _record(self, step: machine.Transition, state: PartitionState, ctx: Context) -> None:
        """A safe point but for the run's document: what the run puts into memory, its history
        row, its event (and result, if finished). Alone for the safe points of a wake-up
        before its last: writing their documents, a whole conversation each, only to
        overwrite them before any checkpoint could see them cost an encoding and a RocksDB
        write of the run a safe point."""
        if self._memory is not None:
            step = self._memory.written(step, state)
            for field, action in (("memory_written", "written"), ("memory_removed", "removed")):
                if count := len(step.event.get(field, ())):
                    self._metrics.memory_entries.labels(*self._labels, action).inc(count)
        run = step.state
        key = run.run_id.encode()
        history = {k: step.event[k] for k in ("seq", "step", "type", "status")}
        # pydantic-core's JSON: a quarter of the json module's time; keys in the order the
        # run's machine wrote them (the same on a replay), non-ASCII as UTF-8.
        state.put(b"history/" + key + b"/" + b"%08d" % step.event["seq"], to_json(history))
        ctx.emit(self.topics.events, to_json(step.event), key=key)
        if run.status.finished:
            ctx.emit(self.topics.results, RunResult.of(run).model_dump_json().encode(), key=key)
            self._retention.finished(run.run_id, ctx.partition)
            self._metrics.runs_finished.labels(*self._labels, run.status.value).inc()
            if not step.event.get("replayed", False):  # a replayed end was traced already
                self._tracing.finished(run)
        assert self._tracker is not None
        self._tracker.track(run)

    def status_counts(self) -> dict[str, dict[str, int]]:
        """Runs by status, for ``sluicegate status``."""
        if self._tracker is None:
            return {"runs": {}}
        return {"runs": {status.value: n for status, n in self._tracker.counts().items()}}

    def _export_journal_counts(self) -> None:
        assert self._journal is not None
        for status, count in self._journal.entries_by_status().items():
            self._metrics.journal_entries.labels(*self._labels, status).set(count)

    def _maybe_time_out(self, state: RunState, now: float) -> machine.Transition | None:
        step = self._timeouts.expire(state, now)
        if step is not None:
            self._tracing.approval(state, {"approved": False, "by": "timeout"}, now)
        return step


class _EarlierOutcomeKeptError(RetryableError):
    """The journal kept another writer's outcome of an effect than the call returned."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the journal kept an earlier outcome of {key}; replaying it")
        self.key = key


def _provider_name(model: ModelClient) -> str:
    """The ``gen_ai.provider.name`` of a model client: ``openai`` for `OpenAIModel`."""
    return type(model).__name__.removesuffix("Model").lower() or "unknown"


def _may_repeat(tool: Tool) -> bool:
    """Whether a call of ``tool`` may follow another in one wake-up, before the journal has
    acknowledged the writes of the first: a read-only tool that may be called again."""
    return not tool.kind.has_effect and tool.on_unknown is OnUnknown.RETRY

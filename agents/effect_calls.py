"""`EffectCalls`: an agent's model and tool calls, each performed through the effect journal.

The agent operator (`agents.operator`) decides which action a run takes; this module carries
out the two that call out, one per method: `EffectCalls.call_model` resolves the run's payload
handles, calls the model and stores a large reply by reference; `EffectCalls.call_tool` calls a
tool (or its lookup). Each call is an `agents.journal.Effect`; `EffectCalls.perform` performs
it through the journal's `EffectDriver` and counts it, and both return the run's next safe
point, timed (``duration_ms``) and marked ``replayed`` when the journal answered. Payloads cross
the operator boundary through one wrapper around each effect, `Payloads.offloading` (by
reference, or inline without a blob policy). Each call is a span of `agents.tracing.RunTracing`
(``tracing``), whose W3C trace headers a tool receives in ``ToolContext.trace_headers``.

Given a ``pending`` list, a call that may be made again is not awaited durable: its writes stay
in flight (`agents.journal.Deferred`) and the caller settles them before it saves anything
that depends on them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sluicegate.agents.blobs.handle import unavailable_marker
from sluicegate.agents.blobs.references import Payloads
from sluicegate.agents.faults import fault_point
from sluicegate.agents.journal import (
    Deferred,
    Effect,
    EffectDriver,
    EffectKind,
    EffectResult,
    EffectUnknown,
    Journal,
    LookupResult,
    OnUnknown,
)
from sluicegate.agents.memory.keeper import MemoryKeeper, with_context
from sluicegate.agents.metrics import AgentMetrics, StepCounters
from sluicegate.agents.models.contract import ChatMessage, ModelClient, ModelResponse, ToolSchema
from sluicegate.agents.runs import machine
from sluicegate.agents.runs.cache import json_value
from sluicegate.agents.runs.state import RunState
from sluicegate.agents.tools import Tool, ToolContext, offered_digests
from sluicegate.agents.tracing import RunTracing
from sluicegate.operators.contract import Context

__all__ = ["EffectCalls"]

logger = logging.getLogger(__name__)


class EffectCalls:
    """The model and tool calls of one operator's runs; see the module docstring."""

    def __init__(
        self,
        *,
        journal: Journal,
        model: ModelClient,
        model_name: str,
        schemas: list[ToolSchema],
        payloads: Payloads,
        attempt: int,
        metrics: AgentMetrics,
        labels: tuple[str, str, str],
        save: Callable[[machine.Transition, Context], None],
        tracing: RunTracing,
        memory: MemoryKeeper | None = None,
    ) -> None:
        self._driver = EffectDriver(journal, attempt=attempt, fault=_fault)
        self._model, self._model_name, self._schemas = model, model_name, schemas
        self._offered_for: tuple[ToolSchema, ...] = ()
        self._offered_now: dict[str, str] = {}
        self._payloads, self._metrics, self._labels = payloads, metrics, labels
        self._counters: StepCounters = metrics.step_counters(*labels)
        self._save = save
        self.tracing = tracing
        self._memory = memory

    async def call_model(
        self,
        state: RunState,
        action: machine.CallModel,
        ctx: Context,
        now: float,
        pending: list[Deferred],
    ) -> machine.Transition:
        """Resolve the run's handles (each one lost is saved as its own safe point first),
        call the model through the journal, store a large reply by reference. Resolution runs
        also when the journal replays the call, so a replayed step loses what the first
        attempt lost (or more, if a payload went since)."""
        state, messages = await self._resolved(state, ctx, now)
        read: list[str] = []
        if self._memory is not None:  # the read rule: `agents.memory.keeper`
            context, read = self._memory.context(state, ctx.state, now)
            messages = with_context(messages, context)
        model = self._model

        async def call() -> Any:
            response = await model.complete(messages, self._schemas, idempotency_key=action.key)
            return response.model_dump(mode="json")

        effect = Effect(
            key=action.key,
            run_id=state.run_id,
            partition=ctx.partition,
            kind=EffectKind.MODEL,
            name=self._model_name,
            request={},
            on_unknown=OnUnknown.RETRY,
            call=call,
        )
        started = time.monotonic()
        with self.tracing.model_call(state, self._model_name, action.key) as span:
            outcome = await self.perform(self._payloads.offloading(state, effect), pending)
            assert isinstance(outcome, EffectResult)  # a model call can always be retried
            self.tracing.model_outcome(span, outcome)
        if outcome.error is not None:
            return machine.fail(state, f"model_error: {outcome.error}", now)
        response = ModelResponse.model_validate(outcome.value)
        if not outcome.replayed:
            usage, counters = response.usage, self._counters
            counters.steps.inc()
            counters.prompt_tokens.inc(usage.prompt_tokens)
            counters.completion_tokens.inc(usage.completion_tokens)
            counters.cost.inc(usage.cost_usd)
        handle = self._payloads.stored(state, effect, outcome.value)
        step = machine.after_model(
            state, response, now, blob=handle.id if handle else None, offered=self._offered()
        )
        if read:
            step = machine.Transition(step.state, step.event | {"memory_read": read})
            self._metrics.memory_entries.labels(*self._labels, "read").inc(len(read))
        return _timed(step, started, outcome.replayed)

    def _offered(self) -> dict[str, str]:
        """The digests of the schemas offered now (computed again only when they changed:
        the operator replaces the list's items when its tools are listed again)."""
        schemas = tuple(self._schemas)
        if self._offered_for != schemas:
            self._offered_for, self._offered_now = schemas, offered_digests(schemas)
        return self._offered_now

    async def call_tool(
        self,
        state: RunState,
        action: machine.CallTool,
        ctx: Context,
        now: float,
        pending: list[Deferred],
    ) -> machine.Transition:
        tool = action.tool
        started = time.monotonic()
        with self.tracing.tool_call(state, tool, action.key) as (span, headers):
            tool_ctx = replace(machine.tool_context(state, action), trace_headers=headers)
            effect = self.tool_effect(state, ctx, tool, tool_ctx, action.key, action.arguments)
            outcome = await self.perform(self._payloads.offloading(state, effect), pending)
            self.tracing.tool_outcome(span, outcome)
        if isinstance(outcome, EffectUnknown):
            self._metrics.outcome_unknown.labels(*self._labels).inc()
            logger.error(
                "run %s: outcome of %s (%s) is unknown and %s cannot settle it: run parked",
                state.run_id, tool.name, action.key, tool.on_unknown.value,
            )  # fmt: skip
            failed = machine.fail(state, "outcome_unknown", now, unknown_key=action.key)
            which = {"tool": tool.name, "call_id": action.call.id}
            which["on_unknown"] = tool.on_unknown.value
            return machine.Transition(failed.state, failed.event | which)
        handle = self._payloads.stored(state, effect, outcome.value)
        blob = handle.id if handle else None
        step = machine.after_tool(state, action, outcome.value, outcome.error, now, blob=blob)
        if outcome.settled_by is not None:  # from the journal's done: it survives a crash
            step = machine.Transition(step.state, step.event | {"settled_by": outcome.settled_by})
        return _timed(step, started, outcome.replayed)

    def tool_effect(
        self,
        state: RunState,
        ctx: Context,
        tool: Tool,
        tool_ctx: ToolContext,
        key: str,
        arguments: dict[str, Any],
    ) -> Effect:
        """A call of ``tool`` (and its lookup) as the effect ``key`` of the run; its result
        crosses the operator boundary as it is (`Payloads.offloading` wraps it otherwise)."""
        find = tool.lookup

        async def call() -> Any:
            return await tool.call(tool_ctx, arguments)

        async def lookup() -> LookupResult:
            assert find is not None
            return await find(tool_ctx)

        return Effect(
            key=key,
            run_id=state.run_id,
            partition=ctx.partition,
            kind=EffectKind.TOOL,
            name=tool.name,
            request=arguments,
            on_unknown=tool.on_unknown,
            call=call,
            lookup=lookup if find is not None else None,
        )

    async def perform(
        self, effect: Effect, pending: list[Deferred] | None = None
    ) -> EffectResult | EffectUnknown:
        """Perform ``effect`` through the journal, with its metrics. Given ``pending``, an
        effect that may be called again is not awaited durable: its `Deferred` joins
        ``pending`` and the call's own outcome is returned."""
        if pending is None:
            outcome: EffectResult | EffectUnknown = await self._driver.perform(effect)
        else:
            deferred = await self._driver.perform_deferred(effect)
            if isinstance(deferred, Deferred):
                pending.append(deferred)
                deferred = deferred.provisional
            outcome = deferred
        if isinstance(outcome, EffectUnknown):
            result = "unknown"
        else:
            result = "replayed" if outcome.replayed else "executed"
            if effect.kind is EffectKind.TOOL:  # kept in the cached run: as its document decodes
                outcome = replace(outcome, value=json_value(outcome.value))
        self._counters.effects[effect.kind, result].inc()
        return outcome

    async def _resolved(
        self, state: RunState, ctx: Context, now: float
    ) -> tuple[RunState, list[ChatMessage]]:
        """The run (after a safe point for each payload lost) and the messages of its next
        model call, every handle it can read resolved and each lost one marked."""
        resolved = await self._payloads.resolve(state)
        markers: dict[str, str] = {}
        for lost in resolved.lost:
            marker = markers[lost.content] = unavailable_marker(lost.handle, lost.reason)
            step = machine.blob_unavailable(
                state, lost.handle.id, lost.reason, lost.content, marker, now
            )
            self._save(step, ctx)
            state = step.state
        if not markers:  # the usual case: no pass over a conversation that grows every step
            return state, list(resolved.messages)
        messages = [
            m.model_copy(update={"content": markers[m.content]})
            if m.content is not None and m.content in markers
            else m
            for m in resolved.messages
        ]
        return state, messages


def _timed(step: machine.Transition, started: float, replayed: bool) -> machine.Transition:
    """``step`` with its event saying how long the call took (``duration_ms``; a journal
    replay's is the lookup's) and whether the journal replayed it."""
    duration_ms = round((time.monotonic() - started) * 1000, 3)
    event = step.event | {"duration_ms": duration_ms, "replayed": replayed}
    return machine.Transition(step.state, event)


def _fault(effect: Effect, point: str) -> None:
    """Fault points ``<kind>.<moment>`` and ``<kind>.<name>.<moment>`` (`agents.faults`)."""
    moment = point.removeprefix("effect.")
    fault_point(f"{effect.kind.value}.{moment}")
    fault_point(f"{effect.kind.value}.{effect.name}.{moment}")

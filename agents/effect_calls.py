"""`EffectCalls`: an agent's model and tool calls, each performed through the effect journal.

The agent operator (`agents.operator`) decides which action a run takes; this module carries
out the two that call out, one per method: `EffectCalls.call_model` resolves the run's payload
handles, calls the model and stores a large reply by reference; `EffectCalls.call_tool` calls a
tool (or its lookup). Both go through `EffectCalls.effect`, which performs the call with
`agents.journal.perform` under the effect's key and counts it, and both return the run's next
safe point, timed (``duration_ms``) and marked ``replayed`` when the journal answered.

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
from sluicegate.agents.blobs.references import BlobReferences
from sluicegate.agents.faults import fault_point
from sluicegate.agents.journal import (
    Deferred,
    EffectKind,
    EffectResult,
    EffectUnknown,
    Journal,
    LookupFound,
    OnUnknown,
    perform,
)
from sluicegate.agents.metrics import AgentMetrics, StepCounters
from sluicegate.agents.models.contract import ModelClient, ModelResponse, ToolSchema
from sluicegate.agents.runs import machine
from sluicegate.agents.runs.cache import json_value
from sluicegate.agents.runs.state import RunState
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
        blobs: BlobReferences | None,
        attempt: int,
        metrics: AgentMetrics,
        labels: tuple[str, str, str],
        save: Callable[[machine.Transition, Context], None],
    ) -> None:
        self._journal, self._model, self._model_name = journal, model, model_name
        self._schemas, self._blobs, self._attempt = schemas, blobs, attempt
        self._metrics, self._labels = metrics, labels
        self._counters: StepCounters = metrics.step_counters(*labels)
        self._save = save

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
        model, refs = self._model, self._blobs
        messages, schemas = list(state.messages), self._schemas
        if refs is not None:
            resolved = await refs.resolve(state)
            markers: dict[str, str] = {}
            for lost in resolved.lost:
                marker = markers[lost.content] = unavailable_marker(lost.handle, lost.reason)
                step = machine.blob_unavailable(
                    state, lost.handle.id, lost.reason, lost.content, marker, now
                )
                self._save(step, ctx)
                state = step.state
            messages = [
                m.model_copy(update={"content": markers[m.content]})
                if m.content is not None and m.content in markers
                else m
                for m in resolved.messages
            ]
        run = state

        async def call() -> Any:
            response = await model.complete(messages, schemas, idempotency_key=action.key)
            document = response.model_dump(mode="json")
            if refs is None:
                return document
            return await refs.offload_response(run, action.key, document)

        started = time.monotonic()
        outcome = await self.effect(state, ctx, EffectKind.MODEL, self._model_name, action.key,
                                    {}, OnUnknown.RETRY, call, None, pending)  # fmt: skip
        assert isinstance(outcome, EffectResult)  # a model call can always be retried
        if outcome.error is not None:
            return machine.fail(state, f"model_error: {outcome.error}", now)
        response = ModelResponse.model_validate(outcome.value)
        if not outcome.replayed:
            usage, counters = response.usage, self._counters
            counters.steps.inc()
            counters.prompt_tokens.inc(usage.prompt_tokens)
            counters.completion_tokens.inc(usage.completion_tokens)
            counters.cost.inc(usage.cost_usd)
        handle = refs.stored_content(state, action.key, response.message.content) if refs else None
        blob = None if handle is None else handle.id
        step = machine.after_model(state, response, now, blob=blob)
        return _timed(step, started, outcome.replayed)

    async def call_tool(
        self,
        state: RunState,
        action: machine.CallTool,
        ctx: Context,
        now: float,
        pending: list[Deferred],
    ) -> machine.Transition:
        tool, refs = action.tool, self._blobs
        tool_ctx = machine.tool_context(state, action)

        async def call() -> Any:
            result = await tool.call(tool_ctx, action.arguments)
            return result if refs is None else await refs.offload_result(state, action.key, result)

        lookup = None
        if tool.lookup is not None:
            find = tool.lookup

            async def lookup_call() -> Any:
                found = await find(tool_ctx)
                if refs is None or not isinstance(found, LookupFound):
                    return found
                return LookupFound(await refs.offload_result(state, action.key, found.value))

            lookup = lookup_call
        started = time.monotonic()
        outcome = await self.effect(state, ctx, EffectKind.TOOL, tool.name, action.key,
                                     action.arguments, tool.on_unknown, call, lookup,
                                     pending)  # fmt: skip
        if isinstance(outcome, EffectUnknown):
            self._metrics.outcome_unknown.labels(*self._labels).inc()
            logger.error(
                "run %s: outcome of %s (%s) is unknown and %s cannot settle it: run parked",
                state.run_id, tool.name, action.key, tool.on_unknown.value,
            )  # fmt: skip
            return machine.fail(state, "outcome_unknown", now, unknown_key=action.key)
        handle = refs.stored_result(state, action.key, outcome.value) if refs else None
        blob = None if handle is None else handle.id
        step = machine.after_tool(state, action, outcome.value, outcome.error, now, blob=blob)
        return _timed(step, started, outcome.replayed)

    async def effect(
        self,
        state: RunState,
        ctx: Context,
        kind: EffectKind,
        name: str,
        key: str,
        request: dict[str, Any],
        on_unknown: OnUnknown,
        call: Callable[[], Any],
        lookup: Callable[[], Any] | None,
        pending: list[Deferred] | None = None,
    ) -> EffectResult | EffectUnknown:
        """Perform the effect through the journal, with its metrics. Given ``pending``, an
        effect that may be called again is not awaited durable: its `Deferred` joins
        ``pending`` and the call's own outcome is returned."""
        outcome = await perform(
            self._journal,
            key=key,
            run_id=state.run_id,
            partition=ctx.partition,
            kind=kind,
            name=name,
            request=request,
            attempt=self._attempt,
            on_unknown=on_unknown,
            call=call,
            lookup=lookup,
            fault=lambda point: _fault(kind, name, point),
            defer=pending is not None,
        )
        if isinstance(outcome, Deferred):
            assert pending is not None
            pending.append(outcome)
            outcome = outcome.provisional
        if isinstance(outcome, EffectUnknown):
            result = "unknown"
        else:
            result = "replayed" if outcome.replayed else "executed"
            if kind is EffectKind.TOOL:  # kept in the cached run: as its document decodes
                outcome = replace(outcome, value=json_value(outcome.value))
        self._counters.effects[kind, result].inc()
        return outcome


def _timed(step: machine.Transition, started: float, replayed: bool) -> machine.Transition:
    """``step`` with its event saying how long the call took (``duration_ms``; a journal
    replay's is the lookup's) and whether the journal replayed it."""
    duration_ms = round((time.monotonic() - started) * 1000, 3)
    event = step.event | {"duration_ms": duration_ms, "replayed": replayed}
    return machine.Transition(step.state, event)


def _fault(kind: EffectKind, name: str, point: str) -> None:
    """Fault points ``<kind>.<moment>`` and ``<kind>.<name>.<moment>`` (see module doc)."""
    moment = point.removeprefix("effect.")
    fault_point(f"{kind.value}.{moment}")
    fault_point(f"{kind.value}.{name}.{moment}")

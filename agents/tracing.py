"""`RunTracing`: the OpenTelemetry spans of an agent's runs (``docs/tracing.md``).

One trace per run, the same across crashes, recoveries and workers: its trace id, and the span
id of its root span, are derived from (pipeline, agent, run id) (`run_ids`), so every span a
wake-up of the run emits, in whichever process and attempt, is a child of the run's root::

    invoke_agent <agent>                 the run, from created_at to its end (emitted when it ends)
    ├── sluicegate.wake                  one wake-up: one step (its tool calls too), or one
    │   │                                action of a rollback
    │   ├── chat <model>                 a model call (GenAI semantic conventions)
    │   ├── execute_tool <tool>          a tool call
    │   └── sluicegate.compensate        one action of a rollback (its compensating tool call)
    ├── sluicegate.approval              an approval wait, from the proposal to the decision
    └── sluicegate.rollback              a rollback, from its request to its end

A call the journal answered instead of performing it (after a recovery) is marked
``sluicegate.replayed=true`` and carries no token usage: its usage was reported by the span of
the call that executed it, and is never counted twice. The root is emitted when the run ends,
unless that end was replayed (it was emitted the first time).

With tracing off (`operators.tracing.tracer` is None) every method returns at once.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context as TraceContext
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from sluicegate.agents.journal import EffectResult, EffectUnknown
from sluicegate.agents.models.contract import ModelResponse
from sluicegate.agents.runs.state import RunState, RunStatus
from sluicegate.agents.tools import Tool
from sluicegate.operators.tracing import fixed_ids

__all__ = ["REPLAYED", "RunTracing", "run_ids"]

REPLAYED = "sluicegate.replayed"
_RUN_ID = "sluicegate.run_id"
_W3C = TraceContextTextMapPropagator()
_NS = 1_000_000_000
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


def run_ids(pipeline: str, agent: str, run_id: str) -> tuple[int, int]:
    """The trace id of run ``run_id`` and the span id of its root span: a hash of the three,
    so that every process derives the same."""
    digest = hashlib.sha256(f"{pipeline}\0{agent}\0{run_id}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id


class RunTracing:
    """The spans of one agent's runs; ``tracer`` None: none (see the module docstring)."""

    def __init__(self, tracer: Tracer | None, *, pipeline: str, agent: str, provider: str) -> None:
        self._tracer, self._pipeline, self._agent = tracer, pipeline, agent
        self._provider = provider

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def _parent(self, run_id: str) -> TraceContext:
        """A context whose current span is the run's root (remote: it may not exist yet)."""
        trace_id, span_id = run_ids(self._pipeline, self._agent, run_id)
        root = SpanContext(trace_id, span_id, is_remote=True, trace_flags=_SAMPLED)
        return trace.set_span_in_context(NonRecordingSpan(root))

    @contextlib.contextmanager
    def wake(self, state: RunState, *, rollback: bool) -> Iterator[None]:
        """The span of one wake-up of the run, current in the block."""
        if self._tracer is None:
            yield
            return
        attributes: dict[str, AttributeValue] = {
            _RUN_ID: state.run_id,
            "sluicegate.step": state.step,
            "gen_ai.agent.name": self._agent,
            "sluicegate.rollback": rollback,
        }
        with self._tracer.start_as_current_span(
            "sluicegate.wake", context=self._parent(state.run_id), attributes=attributes
        ):
            yield

    @contextlib.contextmanager
    def model_call(self, state: RunState, model: str, key: str) -> Iterator[Span | None]:
        """The span of a model call (GenAI ``chat``); end it with `model_outcome`."""
        if self._tracer is None:
            yield None
            return
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": model,
            "gen_ai.agent.name": self._agent,
            _RUN_ID: state.run_id,
            "sluicegate.effect.key": key,
        }
        with self._tracer.start_as_current_span(
            f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            yield span

    @staticmethod
    def model_outcome(span: Span | None, outcome: EffectResult) -> None:
        """What a model call returned, on its span: its usage only if it was executed."""
        if span is None:
            return
        span.set_attribute(REPLAYED, outcome.replayed)
        if outcome.error is not None:
            span.set_status(Status(StatusCode.ERROR, outcome.error))
            span.set_attribute("error.type", "model_error")
            return
        response = ModelResponse.model_validate(outcome.value)
        if response.model:
            span.set_attribute("gen_ai.response.model", response.model)
        if response.stop_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", (response.stop_reason,))
        if not outcome.replayed:
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.completion_tokens)

    @contextlib.contextmanager
    def tool_call(
        self, state: RunState, tool: Tool, key: str
    ) -> Iterator[tuple[Span | None, Mapping[str, str]]]:
        """The span of a tool call (GenAI ``execute_tool``), and the W3C trace headers
        (``traceparent``) a tool passes on to the services it calls; end it with
        `tool_outcome`."""
        if self._tracer is None:
            yield None, _NO_HEADERS
            return
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "sluicegate.tool.kind": tool.kind.value,
            _RUN_ID: state.run_id,
            "sluicegate.effect.key": key,
        }
        with self._tracer.start_as_current_span(
            f"execute_tool {tool.name}", kind=SpanKind.INTERNAL, attributes=attributes
        ) as span:
            headers: dict[str, str] = {}
            _W3C.inject(headers)
            yield span, MappingProxyType(headers)

    @staticmethod
    def tool_outcome(span: Span | None, outcome: EffectResult | EffectUnknown) -> None:
        """What a tool call came to (``sluicegate.tool.outcome``: ``ok``, ``error`` or
        ``unknown``), on its span, and whether it was replayed."""
        if span is None:
            return
        if isinstance(outcome, EffectUnknown):
            span.set_attribute("sluicegate.tool.outcome", "unknown")
            span.set_status(Status(StatusCode.ERROR, outcome.reason))
            return
        span.set_attribute(REPLAYED, outcome.replayed)
        if outcome.error is None:
            span.set_attribute("sluicegate.tool.outcome", "ok")
        else:
            span.set_attribute("sluicegate.tool.outcome", "error")
            span.set_attribute("error.type", "tool_error")

    @contextlib.contextmanager
    def compensation(self, state: RunState) -> Iterator[None]:
        """The span of one action of the run's rollback, current in the block."""
        if self._tracer is None or state.rollback is None:
            yield
            return
        rollback = state.rollback
        attributes: dict[str, AttributeValue] = {
            _RUN_ID: state.run_id,
            "sluicegate.rollback.number": rollback.number,
            "sluicegate.rollback.to_step": rollback.to_step,
            "sluicegate.rollback.queue": len(rollback.queue),
        }
        with self._tracer.start_as_current_span("sluicegate.compensate", attributes=attributes):
            yield

    def approval(self, before: RunState, event: Mapping[str, Any], now: float) -> None:
        """The span of an approval wait that a decision (``event``) just ended: from the
        proposal to ``now``."""
        pending = before.pending_approval
        if self._tracer is None or pending is None:
            return
        attributes: dict[str, AttributeValue] = {
            _RUN_ID: before.run_id,
            "gen_ai.tool.name": pending.tool,
            "sluicegate.approval.kind": pending.kind,
            "sluicegate.approval.approved": bool(event.get("approved")),
            "sluicegate.approval.by": str(event.get("by")),
        }
        span = self._tracer.start_span(
            "sluicegate.approval", context=self._parent(before.run_id),
            attributes=attributes, start_time=_ns(pending.proposed_at),
        )  # fmt: skip
        span.end(end_time=_ns(now))

    def finished(self, state: RunState) -> None:
        """The run ended: its root span, from its creation to now; if a rollback ended it,
        the rollback's span (``sluicegate.rollback``), and the root only if the run had not
        ended before the rollback started (its root was emitted then)."""
        if self._tracer is None:
            return
        rollback = state.rollback
        if rollback is None or not rollback.was.finished:
            self._root(self._tracer, state)
        if rollback is not None:
            attributes: dict[str, AttributeValue] = {
                _RUN_ID: state.run_id,
                "sluicegate.rollback.number": rollback.number,
                "sluicegate.rollback.to_step": rollback.to_step,
                "sluicegate.rollback.by": rollback.by,
                "sluicegate.status": state.status.value,
            }
            span = self._tracer.start_span(
                "sluicegate.rollback", context=self._parent(state.run_id),
                attributes=attributes, start_time=_ns(rollback.requested_at),
            )  # fmt: skip
            span.end(end_time=_ns(state.updated_at))

    def _root(self, tracer: Tracer, state: RunState) -> None:
        trace_id, span_id = run_ids(self._pipeline, self._agent, state.run_id)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self._agent,
            "sluicegate.pipeline": self._pipeline,
            _RUN_ID: state.run_id,
            "sluicegate.status": state.status.value,
            "sluicegate.steps": state.step,
            "gen_ai.usage.input_tokens": state.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": state.usage.completion_tokens,
        }
        with fixed_ids(trace_id, span_id):  # a root: no parent, the run's ids
            span = tracer.start_span(
                f"invoke_agent {self._agent}", context=TraceContext(), attributes=attributes,
                start_time=_ns(state.created_at),
            )  # fmt: skip
        if state.status is not RunStatus.DONE:
            span.set_status(Status(StatusCode.ERROR, state.reason or state.status.value))
        span.end(end_time=_ns(state.updated_at))


def _ns(seconds: float) -> int:
    return int(seconds * _NS)

"""OpenTelemetry tracing of a process: off unless configured, installed once by the process.

A worker or coordinator process (``sluicegate worker``, ``sluicegate coordinator``) calls
`start_tracing` with its ``otlp_endpoint`` setting; with neither it nor the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` set, nothing is installed, and `tracer` answers None, so the
instrumented code does one ``is None`` check per span and creates nothing (no SDK object, not
even the API's no-op spans). ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` are honoured
as the SDK reads them; the default service name is the process kind's.

Spans go through a batch processor to an OTLP/HTTP exporter (``<endpoint>/v1/traces``), off the
hot path. `stop_tracing` flushes and shuts it down; tests install and stop their own.

The installed provider generates ids with `RunIds`: random, except a span id asked for with
`fixed_ids`. That is how a span with a deterministic id (an agent run's root span, whose id
its children named across crashes and processes) is created through the ordinary SDK.

`checkpoint_ids` derives a checkpoint's trace id and root span id from (pipeline, checkpoint
id, attempt), so that the coordinator's checkpoint span and the subtasks' spans of their part of
it land in one trace without any trace context on the wire.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
from collections.abc import Iterator

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Tracer

__all__ = [
    "ENDPOINT_ENV",
    "RunIds",
    "checkpoint_ids",
    "fixed_ids",
    "start_tracing",
    "stop_tracing",
    "tracer",
    "tracer_provider",
]

logger = logging.getLogger(__name__)

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
_SERVICE_ENV = "OTEL_SERVICE_NAME"

_FIXED: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "sg_fixed_ids", default=None
)

_provider: TracerProvider | None = None
"""The process's provider: like logging's handlers, one per process, set by its entry point."""


class RunIds(RandomIdGenerator):
    """Random ids, except the trace and span id that `fixed_ids` asks for."""

    def generate_span_id(self) -> int:
        fixed = _FIXED.get()
        return super().generate_span_id() if fixed is None else fixed[1]

    def generate_trace_id(self) -> int:
        fixed = _FIXED.get()
        return super().generate_trace_id() if fixed is None else fixed[0]


@contextlib.contextmanager
def fixed_ids(trace_id: int, span_id: int) -> Iterator[None]:
    """The root span started in this block (one, with a `RunIds` provider) gets these ids."""
    token = _FIXED.set((trace_id, span_id))
    try:
        yield
    finally:
        _FIXED.reset(token)


def checkpoint_ids(pipeline: str, checkpoint_id: int, attempt: int) -> tuple[int, int]:
    """The trace id of checkpoint ``checkpoint_id`` of ``pipeline`` at job ``attempt``, and the
    span id of its root span (the coordinator's ``sluicegate.checkpoint``): a hash of the three,
    so that the coordinator and every subtask derive the same."""
    key = f"checkpoint\0{pipeline}\0{checkpoint_id}\0{attempt}"
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


def start_tracing(
    endpoint: str | None, *, service: str, processor: SpanProcessor | None = None
) -> TracerProvider | None:
    """Install the process's provider, exporting to the OTLP/HTTP receiver at ``endpoint``
    (unset: ``OTEL_EXPORTER_OTLP_ENDPOINT``; neither: no tracing, None). ``processor``: send
    the spans there instead (a test's in-memory exporter). Installing twice replaces the first
    provider, which is shut down."""
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or None
    if endpoint is None and processor is None:
        return None
    attributes = {} if os.environ.get(_SERVICE_ENV) else {SERVICE_NAME: service}
    provider = TracerProvider(resource=Resource.create(attributes), id_generator=RunIds())
    if processor is None:
        assert endpoint is not None
        url = endpoint.rstrip("/") + "/v1/traces"
        processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=url))
        logger.info("tracing: spans of %s go to %s", service, url)
    provider.add_span_processor(processor)
    stop_tracing()
    global _provider
    _provider = provider
    return provider


def stop_tracing() -> None:
    """Flush the spans not yet exported and uninstall the provider (nothing if none)."""
    global _provider
    provider, _provider = _provider, None
    if provider is not None:
        provider.force_flush()
        provider.shutdown()


def tracer_provider() -> TracerProvider | None:
    """The installed provider, if tracing is on."""
    return _provider


def tracer(name: str) -> Tracer | None:
    """The tracer ``name`` of the installed provider; None when tracing is off."""
    return None if _provider is None else _provider.get_tracer(name)

"""A process's tracing (`operators.tracing`): off unless configured, the standard variables."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sluicegate.operators import tracing


@pytest.fixture(autouse=True)
def stopped() -> Iterator[None]:
    yield
    tracing.stop_tracing()


def test_tracing_is_off_without_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tracing.ENDPOINT_ENV, raising=False)
    assert tracing.start_tracing(None, service="sluicegate-worker") is None
    assert (tracing.tracer_provider(), tracing.tracer("x")) == (None, None)


def test_the_standard_variables_turn_it_on_and_name_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(tracing.ENDPOINT_ENV, "http://127.0.0.1:9")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    provider = tracing.start_tracing(None, service="sluicegate-worker")
    assert provider is not None
    assert tracing.tracer("x") is not None
    assert provider.resource.attributes["service.name"] == "sluicegate-worker"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "billing-agents")
    provider = tracing.start_tracing(None, service="sluicegate-worker")
    assert provider is not None
    assert provider.resource.attributes["service.name"] == "billing-agents"


def test_a_root_started_with_fixed_ids_has_them_and_the_next_span_does_not() -> None:
    exporter = InMemorySpanExporter()
    tracing.start_tracing(None, service="t", processor=SimpleSpanProcessor(exporter))
    tracer = tracing.tracer("x")
    assert tracer is not None
    with tracing.fixed_ids(0xABC, 0xDEF):
        tracer.start_span("root").end()
    tracer.start_span("other").end()
    root, other = exporter.get_finished_spans()
    assert (root.context.trace_id, root.context.span_id) == (0xABC, 0xDEF)
    assert (other.context.trace_id, other.context.span_id) != (0xABC, 0xDEF)

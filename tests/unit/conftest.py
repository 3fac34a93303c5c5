"""Fixtures shared by the unit tests of several packages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sluicegate.operators import tracing


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for the test, every finished span kept in memory (the SDK's exporter)."""
    exporter = InMemorySpanExporter()
    tracing.start_tracing(None, service="test", processor=SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        tracing.stop_tracing()

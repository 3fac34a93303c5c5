"""Fixtures shared by the unit tests of several packages."""

from __future__ import annotations

import logging
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


@pytest.fixture(autouse=True)
def _root_logging_as_it_was() -> Iterator[None]:
    """Every test leaves the root logger as it found it: a command run in-process (`main`)
    installs a handler on the stream pytest captured for that test, which is closed after it,
    and later tests' logging would fail on it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)

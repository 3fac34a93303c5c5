"""Every agent operator in these tests checks its cached runs against their stored documents."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sluicegate.agents.runs.cache import RunCache


@pytest.fixture(autouse=True)
def verify_cached_runs() -> Iterator[None]:
    RunCache.verify_all = True
    try:
        yield
    finally:
        RunCache.verify_all = False

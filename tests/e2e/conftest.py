"""End-to-end tests: real coordinator and worker processes on the real broker, killed with
SIGKILL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.ledger import Ledger

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[list[Cluster]]:
    """Clusters appended to this list are stopped (SIGKILL) when the test ends."""
    made: list[Cluster] = []
    yield made
    for cluster in made:
        cluster.stop_all()


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    """A service that executes every write it gets (no deduplication), see `Ledger`."""
    service = Ledger()
    try:
        yield service
    finally:
        service.close()

"""What the console reads of the coordinator: the API's views, its facts, its graph and its
checkpoints' manifests (`inbox` is what it reads and writes of the agents)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sluicegate.coordinator.facts import CoordinatorFacts
from sluicegate.coordinator.httpapi.savepoints import SavepointView
from sluicegate.coordinator.httpapi.view import CoordinatorView
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.storage.manifest import CheckpointManifest

__all__ = ["ConsoleJob", "ManifestReader"]


class ManifestReader(Protocol):
    """Reads a committed checkpoint's manifest (`ManifestStore` does)."""

    async def load(self, checkpoint_id: int) -> CheckpointManifest:
        """Raises `NotFoundError` when there is none (never completed, or retention removed
        it)."""
        ...


@dataclass(frozen=True, slots=True)
class ConsoleJob:
    """What the console reads of the coordinator: the API's views, its facts, its graph and
    its checkpoints' manifests."""

    view: CoordinatorView
    savepoints: SavepointView
    facts: Callable[[], CoordinatorFacts]
    graph: JobGraph
    manifests: ManifestReader

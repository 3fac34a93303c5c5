"""The coordinator's long-lived objects, kept out of the cyclic garbage collector's full passes.

A checkpoint of thousands of subtasks leaves hundreds of thousands of small objects alive in
the coordinator (its acks, the manifest's rows), and CPython starts a full collection whenever
the objects that survived since the last one reach a quarter of the old ones: each walks every
object alive. At 10,000 subtasks those passes were 31% of the coordinator's CPU
(`bench.coordinator_scale`; docs/performance.md, "The coordinator at scale").

So after each completed checkpoint's housekeeping `HeapFreezer.after_checkpoint` calls
`gc.freeze()`: what is alive then moves to the permanent generation, which collections skip.
Nothing else changes for those objects: reference counting still frees them when they are
dropped (manifests and acks hold no cycles). What freezing would keep is cyclic garbage made
of frozen objects (a traceback, a finished task), so every ``thaw_every`` checkpoints
`gc.unfreeze()` hands everything back to the oldest generation, whose next full collection
frees it: at most ``thaw_every`` checkpoints' worth is held meanwhile.
"""

from __future__ import annotations

import gc
from typing import Protocol

__all__ = ["HeapFreezer"]


class _Collector(Protocol):
    """The two calls of the `gc` module used here (a test passes a recorder)."""

    def freeze(self) -> None: ...

    def unfreeze(self) -> None: ...


class HeapFreezer:
    """Freezes the heap after each completed checkpoint and thaws it every ``thaw_every``;
    see the module docstring."""

    def __init__(self, *, thaw_every: int = 10, collector: _Collector = gc) -> None:
        if thaw_every < 1:
            raise ValueError(f"thaw_every must be >= 1, got {thaw_every}")
        self._thaw_every = thaw_every
        self._collector = collector
        self._checkpoints = 0

    def after_checkpoint(self) -> None:
        """A checkpoint completed and its housekeeping is done."""
        self._checkpoints += 1
        if self._checkpoints % self._thaw_every == 0:
            self._collector.unfreeze()
        else:
            self._collector.freeze()

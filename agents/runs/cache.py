"""`RunCache`: decoded `RunState`s kept between wake-ups, written through to the state.

Before, every wake-up of a run parsed and validated its whole stored ``RunState`` again (a
document that grows with the run). The cache keeps the decoded state of recently used runs:

* **Write-through.** `put` writes the encoded run to the partition's state, exactly as
  before, and keeps the object it encoded. The state stays the truth: a snapshot copies the
  state, never the cache.
* **One path to a run.** Every read (`get`) and write (`put`) of a run by the agent operator
  goes through the cache, so the cached object is always the last one written. Anything that
  changes stored runs another way must `clear` it.
* **Never outlives a restore.** A restore rewinds the state to a checkpoint; the operator
  `clear`\\s the cache whenever it is opened, so no run is read as it was after the
  checkpoint.
* **Bounded.** At most ``capacity`` runs and ``max_bytes`` of their documents, least
  recently used evicted first; a finished run is dropped at once (it is woken no more). A
  miss just decodes the stored document.

`RunState` is a frozen model; its transitions build new objects with ``model_copy``, so a
cached object is never changed in place. Values a run receives from outside (tool results,
lookups) are given to it as JSON values (`json_value`), so the cached object is the one a
decode of its document would give. ``verify`` (tests) decodes on every hit and compares.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sluicegate.agents.runs.encoding import EncodedRun, encode_run
from sluicegate.agents.runs.state import RunState, run_key
from sluicegate.operators.state.store import PartitionState

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_MAX_BYTES", "RunCache", "StaleRunError", "json_value"]

DEFAULT_CAPACITY = 256
"""Runs kept decoded per operator (subtask)."""
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""The documents of the runs kept, in bytes, at most (per operator); the decoded objects and
the encoded pieces kept beside them take a few times that."""


class StaleRunError(AssertionError):
    """(``verify`` only) The cached run differs from what its stored document decodes to."""

    def __init__(self, run_id: str, partition: int) -> None:
        super().__init__(f"run {run_id!r} (partition {partition}): cached state is stale")
        self.run_id, self.partition = run_id, partition


@dataclass(frozen=True, slots=True)
class _Kept:
    run: RunState
    encoded: EncodedRun | None
    """What the last `RunCache.put` of the run wrote (None: decoded from the state)."""
    size: int
    """The length of the run's document: what the entry counts against ``max_bytes``."""


class RunCache:
    """Decoded runs by (partition, run id); see the module docstring."""

    verify_all = False
    """Tests set this to make every cache verify its hits (`StaleRunError`)."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        verify: bool = False,
    ) -> None:
        if capacity < 0 or max_bytes < 0:
            raise ValueError(
                f"a run cache holds 0 runs (bytes) or more, not {capacity} ({max_bytes})"
            )
        self.capacity, self.max_bytes = capacity, max_bytes
        self.verify = verify
        self._runs: OrderedDict[tuple[int, str], _Kept] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._runs)

    @property
    def bytes(self) -> int:
        """The length of the documents of the runs kept."""
        return self._bytes

    def get(self, state: PartitionState, partition: int, run_id: str) -> RunState | None:
        """Run ``run_id`` of ``partition``, or None if ``state`` holds no such run."""
        slot = (partition, run_id)
        kept = self._runs.get(slot)
        if kept is not None:
            self.hits += 1
            self._runs.move_to_end(slot)
            if self.verify or RunCache.verify_all:
                raw = state.get(run_key(run_id))
                if raw is None or RunState.decode(raw) != kept.run:
                    raise StaleRunError(run_id, partition)
            return kept.run
        raw = state.get(run_key(run_id))
        if raw is None:
            return None
        self.misses += 1
        run = RunState.decode(raw)
        self.keep(partition, run, len(raw))
        return run

    def put(self, state: PartitionState, partition: int, run: RunState) -> None:
        """Write ``run`` to ``state`` and keep it (a finished run is dropped instead). Its
        document is encoded reusing the bytes of what the run's last `put` wrote and it still
        holds (`agents.runs.encoding`)."""
        slot = (partition, run.run_id)
        kept = self._runs.get(slot)
        encoded = encode_run(run, kept.encoded if kept is not None else None)
        if (self.verify or RunCache.verify_all) and encoded.document != run.encode():
            raise AssertionError(f"run {run.run_id!r}: the spliced document is not its encoding")
        state.put(run_key(run.run_id), encoded.document)
        if run.status.finished:
            self.drop(partition, run.run_id)
        else:
            self._keep(slot, _Kept(run, encoded, len(encoded.document)))

    def keep(self, partition: int, run: RunState, size: int) -> None:
        """Keep ``run``, decoded from a document of ``size`` bytes in ``partition``'s state."""
        self._keep((partition, run.run_id), _Kept(run, None, size))

    def _keep(self, slot: tuple[int, str], kept: _Kept) -> None:
        self.drop(*slot)
        if self.capacity == 0 or kept.size > self.max_bytes:
            return
        self._runs[slot] = kept
        self._bytes += kept.size
        while len(self._runs) > self.capacity or self._bytes > self.max_bytes:
            _, evicted = self._runs.popitem(last=False)
            self._bytes -= evicted.size

    def drop(self, partition: int, run_id: str) -> None:
        kept = self._runs.pop((partition, run_id), None)
        if kept is not None:
            self._bytes -= kept.size

    def clear(self) -> None:
        """Forget every run: the state may have been rewound (a restore) or rewritten."""
        self._runs.clear()
        self._bytes = 0


def json_value(value: Any) -> Any:
    """``value`` as a decode of its JSON gives it back (tuples become lists, and so on)."""
    if value is None or type(value) in _PLAIN:
        return value
    return json.loads(json.dumps(value))


_PLAIN = frozenset({str, int, float, bool})

"""`MemoryKeeper`: what the agent operator does with memory, one method per moment.

* `context`, before a model call: the read rule's entries of the run's key as one system
  message, and their ids for the ``model`` event (``memory_read``); the key's expired entries
  are deleted first.
* `written`, at a safe point, in the same call as the run's state is written: a ``tool`` event
  of ``remember`` without an error appends its text as a ``note``; with `Memory.summary`, a run
  finishing ``done`` appends its answer as a ``summary``. The event names the entries
  (``memory_written``).
* `written` also undoes, for a rollback (`agents.rollback.machine`): its ``rollback_started``
  deletes the run's ``summary`` entry (written when the run finished, after any step a
  rollback goes back to), and each ``compensation`` by ``forget`` of a ``remember`` call
  deletes that call's entry (``memory_removed`` in the event).
* `erase`, on an `EraseMemory` command: every row of the key.
* `as_of`, when a fork starts: the fork reads only entries written up to its parent's step
  (and its own), kept as a row ``memory-asof/<run_id>`` beside the run.

The run's key is computed from what its state keeps of its task (run id, goal, metadata), by
the same `Memory.key_of` the router placed the task by.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sluicegate.agents.memory.config import Memory
from sluicegate.agents.memory.entries import EntryKind, MemoryEntry
from sluicegate.agents.memory.rows import MemoryRows, NewEntry
from sluicegate.agents.memory.tool import FORGET, REMEMBER, context_message, remembered_text
from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.runs import machine
from sluicegate.agents.runs.state import RunState, RunStatus
from sluicegate.operators.state.store import PartitionState

__all__ = ["MemoryKeeper", "with_context"]

logger = logging.getLogger(__name__)

_AS_OF = b"memory-asof/"


def _seconds(raw: bytes | None) -> float | None:
    try:
        return None if raw is None else float(raw)
    except ValueError:
        return None


def _up_to(until: float, run_id: str) -> Callable[[MemoryEntry], bool]:
    return lambda e: e.written_at <= until or e.run_id == run_id


class MemoryKeeper:
    """An agent operator's memory; see the module docstring."""

    def __init__(self, memory: Memory, clock: Callable[[], float]) -> None:
        self.memory = memory
        self._clock = clock

    def key_of(self, state: RunState) -> str | None:
        """The run's memory key; None (logged) if it has none or the key function fails.

        The router placed the run by the same function of the same task, so a failure here
        is a key function that is not a function of the task (it read a clock, or the task's
        ``budget``, which the run does not keep): the run then goes on without memory rather
        than failing the subtask on every wake-up."""
        try:
            return self.memory.key_of_run(state.run_id, state.goal, state.metadata)
        except Exception as exc:  # noqa: BLE001 - user code; said loudly, never swallowed quietly
            logger.error(
                "run %s runs without memory: its key cannot be read: %s", state.run_id, exc
            )
            return None

    def context(
        self, run: RunState, state: PartitionState, now: float
    ) -> tuple[ChatMessage | None, list[str]]:
        """The read rule's message for the run's next model call, and the entries it holds."""
        key = self.key_of(run)
        if key is None:
            return None, []
        rows = MemoryRows(state)
        rows.purge_expired(key, now=now)
        m = self.memory
        raw = state.get(_AS_OF + run.run_id.encode())
        until = _seconds(raw)
        entries = rows.readable(
            key, now=now, recent=m.recent, max_tokens=m.max_tokens,
            written=None if until is None else _up_to(until, run.run_id),
        )  # fmt: skip
        return context_message(key, entries), [e.entry_id for e in entries]

    def as_of(self, run_id: str, at: float, state: PartitionState) -> None:
        """Run ``run_id`` (a fork) reads the entries written up to ``at``, and its own."""
        state.put(_AS_OF + run_id.encode(), repr(float(at)).encode())

    def written(self, step: machine.Transition, state: PartitionState) -> machine.Transition:
        """Write (or, for a rollback, remove) what ``step`` puts into memory; ``step`` with
        its event naming the entries."""
        texts, removed = self._texts(step), self._removed(step)
        key = self.key_of(step.state) if texts or removed else None
        if key is None:
            return step
        rows, now, run, event = MemoryRows(state), self._clock(), step.state, step.event
        rows.purge_expired(key, now=now)
        if removed:
            event = event | {"memory_removed": rows.remove_sources(key, removed)}
        ids = []
        for kind, text, source in texts:
            new = NewEntry(key, kind, text, run.run_id, run.step, source)
            stored = rows.append(new, now=now, ttl_s=self.memory.ttl_s)
            ids.append(stored.entry_id)
            logger.debug("run %s wrote memory %s", run.run_id, stored.entry_id)
        if ids:
            event = event | {"memory_written": ids}
        return machine.Transition(step.state, event)

    def _removed(self, step: machine.Transition) -> set[str]:
        """The sources whose entries a rollback's ``step`` removes."""
        event = step.event
        if event.get("type") == "rollback_started":
            return {f"{step.state.run_id}/summary"}
        if event.get("type") == "compensation" and event.get("tool") == FORGET:
            source = event.get("arguments", {}).get("source") if not event.get("error") else None
            return {source} if isinstance(source, str) and source else set()
        return set()

    def erase(self, key: str, state: PartitionState) -> int:
        """Delete every entry of ``key``; how many there were."""
        return MemoryRows(state).erase(key)

    def _texts(self, step: machine.Transition) -> list[tuple[EntryKind, str, str]]:
        """(kind, text, source) of each entry ``step`` writes."""
        run, event = step.state, step.event
        texts: list[tuple[EntryKind, str, str]] = []
        if event.get("type") == "tool" and event.get("tool") == REMEMBER:
            text = remembered_text(event.get("result")) if event.get("error") is None else None
            if text is not None:
                texts.append(("note", text, str(event.get("key"))))
        finished = event.get("type") == "model" and run.status is RunStatus.DONE
        if self.memory.summary and finished:  # only a model reply finishes a run done
            answer = (run.answer or "").strip()[: self.memory.max_entry_chars]
            if answer:
                texts.append(("summary", answer, f"{run.run_id}/summary"))
        return texts


def with_context(messages: list[ChatMessage], message: ChatMessage | None) -> list[ChatMessage]:
    """``messages`` with the memory ``message`` after the leading system message (the
    instructions), or first when there is none."""
    if message is None:
        return messages
    at = 1 if messages and messages[0].role == "system" else 0
    return [*messages[:at], message, *messages[at:]]

"""`Memory`: how an agent's runs share memory per key, as one frozen value.

::

    desk = Agent("refund-desk", ..., memory=Memory(key="customer_id", recent=10,
                 max_tokens=1000, ttl_s=90 * 86400, summary=True))

* ``key``: the name of a task ``metadata`` field (its value, a string or number, is the key), or
  a function of the `TaskRequest` returning the key (or None). A task without a key runs
  without memory, placed by its run id like the runs of an agent without memory.
* The read rule (`MemoryRows.context`): before every model call of a run, the key's ``recent``
  most recent entries that have not expired, oldest first, less the oldest of them while their
  estimated tokens (`estimate_tokens`) exceed ``max_tokens``, are given to the model as one
  system message after the instructions. The message is not part of the run's conversation
  (`RunState.messages`); the ``model`` event names the entries it held (``memory_read``).
* The write rule: the built-in tool ``remember`` (`agents.memory.tool`), and with ``summary``
  the run's answer when it finishes ``done``; each entry expires ``ttl_s`` after it was written
  (None: never).

Values only, like `agents.declaration`: the router and the operator read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import JsonValue

from sluicegate.agents.messages import TaskRequest

__all__ = ["MAX_KEY_CHARS", "Memory", "MemoryKeyOf", "key_from_metadata"]

MAX_KEY_CHARS = 200
"""The longest memory key; a longer one is refused (the task is dead-lettered)."""

MemoryKeyOf = Callable[[TaskRequest], "str | None"]
"""Maps a task to its memory key; None: the run has no memory."""


@dataclass(frozen=True, slots=True)
class Memory:
    """An agent's memory per key; see the module docstring."""

    key: str | MemoryKeyOf
    """A task ``metadata`` field, or a function of the task."""
    recent: int = 10
    """The most entries a model call is given."""
    max_tokens: int = 1000
    """The most estimated tokens of the entries a model call is given."""
    ttl_s: float | None = None
    """How long an entry is kept after it was written; None: until erased."""
    summary: bool = False
    """Write the answer of each run that finishes ``done`` as an entry of kind ``summary``."""
    max_entry_chars: int = 2000
    """The longest entry text ``remember`` accepts (the summary is cut to it)."""

    def __post_init__(self) -> None:
        if isinstance(self.key, str) and not self.key:
            raise ValueError("Memory(key=...) names a metadata field or is a function")
        for name in ("recent", "max_tokens", "max_entry_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"Memory({name}=...) is at least 1")
        if self.ttl_s is not None and not self.ttl_s > 0:
            raise ValueError("Memory(ttl_s=...) is positive, or None to keep entries")

    def key_of(self, task: TaskRequest) -> str | None:
        """The memory key of ``task``, or None; raises ``ValueError`` for a key that is not a
        non-empty string of at most `MAX_KEY_CHARS` characters."""
        found = key_from_metadata(self.key, task.metadata) if isinstance(self.key, str) else None
        if not isinstance(self.key, str):
            found = self.key(task)
        if found is None:
            return None
        if not isinstance(found, str) or not 0 < len(found) <= MAX_KEY_CHARS:
            raise ValueError(
                f"memory key of run {task.run_id!r}: {found!r:.80} is not a string of 1 to "
                f"{MAX_KEY_CHARS} characters"
            )
        return found

    def key_of_run(self, run_id: str, goal: str, metadata: Mapping[str, JsonValue]) -> str | None:
        """The memory key of a run, from what its state keeps of its task."""
        return self.key_of(TaskRequest(run_id=run_id, goal=goal, metadata=dict(metadata)))


def key_from_metadata(field: str, metadata: Mapping[str, JsonValue]) -> str | None:
    """The value of ``metadata[field]`` as a key: a string as it is, an integer in decimal;
    absent or null: None. Anything else raises ``ValueError``."""
    value = metadata.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"metadata {field!r} is a {type(value).__name__}, not a memory key")
    return str(value)

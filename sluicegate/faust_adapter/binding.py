"""Where a faust app's sends and table accesses go while sluicegate steps one of its agents.

`AppBinding.install` (once per process, before any record) puts two things into the user's
``App`` in place of faust's own, so that the user's code runs unchanged:

* a `CapturingProducer` as ``app.producer``: ``topic.send()``, ``agent.send()`` and
  ``app.send()`` go through faust's own encoding (the topic's key and value codecs, its
  ``faust.Record`` models) and end here, as bytes, in the outbox of the record being stepped;
  the operator emits them through its context to the job's topics and exactly-once sinks;
* a `TableRows` mapping as each ``app.Table``'s store, and no-op changelog hooks: ``table[k]``
  reads and writes the keyed state of the partition the current record came from (RocksDB,
  snapshotted by barriers), keys and values encoded as faust's stores encode them. There are
  no changelog topics: the checkpoint is the changelog. A windowed table's windows are rows
  ``(key, (start, end))`` of the same view, with an expiry index (`windows.WindowIndex`).

Both are bound to one record at a time (`AppBinding.bound`): a subtask's process function is
synchronous and never yields to the event loop, so no two records' calls interleave even when
several subtasks share the app in one worker. Outside a record, a send or a table access is an
`AgentStepError`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from faust.streams import _current_event
from faust.types.tuples import TP, RecordMetadata

from sluicegate.faust_adapter.exceptions import AgentStepError
from sluicegate.faust_adapter.windows import WindowIndex
from sluicegate.operators.state.store import PartitionState

__all__ = ["AppBinding", "CapturingProducer", "Outgoing", "TableRows", "check_sends"]

TABLE_PREFIX = b"faust-table/"
"""Keyed-state rows of table ``t``: ``faust-table/<t>/<key as faust's store encodes it>``."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One record an agent sent, encoded by faust."""

    topic: str
    key: bytes | None
    value: bytes


class AppBinding:
    """The app's producer and tables, bound to the record being stepped (module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._outbox: list[Outgoing] | None = None
        self._state: PartitionState | None = None
        self._agent = "?"
        self.windows: list[WindowIndex] = []

    @classmethod
    def install(cls, app: Any) -> AppBinding:
        """The binding of ``app``, installed on first use (idempotent per app)."""
        existing = getattr(app, "_sluicegate_binding", None)
        if isinstance(existing, AppBinding):
            return existing
        binding = cls(app)
        app.producer = CapturingProducer(binding)
        for table in app.tables.values():
            TableRows.install(table, binding)
        app._sluicegate_binding = binding
        return binding

    @property
    def windowed(self) -> bool:
        """Whether the app has a windowed table (which reads faust's current event)."""
        return bool(self.windows)

    @contextmanager
    def bound(
        self, agent: str, state: PartitionState | None, event: Any = None
    ) -> Iterator[list[Outgoing]]:
        """Sends and table accesses of ``agent``'s current record: its outbox, and the state
        of its partition; ``event``, the record's faust event, is faust's current event
        meanwhile (windowed tables read its timestamp). Stale windows are deleted when the
        record is done. A timer's firing is bound with no ``state``: its sends are captured,
        a table access is an `AgentStepError`."""
        if self._outbox is not None:
            raise AgentStepError(agent, f"stepped while agent {self._agent} is mid-record")
        outbox: list[Outgoing] = []
        self._outbox, self._state, self._agent = outbox, state, agent
        token = _current_event.set(weakref.ref(event) if event is not None else None)
        try:
            yield outbox
            if state is not None:
                for window in self.windows:
                    window.expire(state)
        finally:
            _current_event.reset(token)
            self._outbox, self._state, self._agent = None, None, "?"

    def send(self, topic: str, key: Any, value: Any, partition: Any, headers: Any) -> None:
        outbox = self._outbox
        if outbox is None:
            raise AgentStepError(
                "?", f"a send to {topic!r} outside an agent's record or a timer's tick (a task?)"
            )
        if partition is not None:
            raise AgentStepError(self._agent, f"send to {topic!r} with partition={partition}: "
                                 "records go to the partition of their key")  # fmt: skip
        if headers:
            raise AgentStepError(self._agent, f"send to {topic!r} with headers: not supported")
        if value is None:
            raise AgentStepError(self._agent, f"send of value None (a tombstone) to {topic!r}: "
                                 "not supported")  # fmt: skip
        outbox.append(Outgoing(topic, _as_bytes(key), _as_bytes(value) or b""))

    def state(self, table: str) -> PartitionState:
        if self._state is None:
            raise AgentStepError(
                self._agent,
                f"table {table!r} used outside an agent's record (in a timer, a task or a web "
                "view?): tables are read and written by the agents that keep them",
            )
        return self._state


def check_sends(name: str, outbox: list[Outgoing], allowed: frozenset[str], kind: str) -> None:
    """Raise `AgentStepError` if ``name`` (an agent or timer, ``kind``) sent to a topic that is
    not among ``allowed``: the pipeline is declared from the topics its code names."""
    for out in outbox:
        if out.topic not in allowed:
            raise AgentStepError(
                name,
                f"sent to {out.topic!r}, which sluicegate did not find among the topics and "
                f"agents its code names (a topic made inside the {kind}?): name it at module "
                "level",
            )


def _as_bytes(data: Any) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    raise AgentStepError("?", f"a codec produced {type(data).__name__}, not bytes")


class CapturingProducer:
    """Faust's producer interface, as far as ``Topic.send`` uses it: the sends go to the bound
    record's outbox. Nothing is started and nothing talks to Kafka."""

    started = True

    def __init__(self, binding: AppBinding) -> None:
        self._binding = binding

    async def maybe_start(self) -> None:
        return None

    async def send(
        self, topic: str, key: Any, value: Any, partition: Any = None, timestamp: Any = None,
        headers: Any = None, *, transactional_id: Any = None,
    ) -> asyncio.Future[RecordMetadata]:  # fmt: skip
        self._binding.send(topic, key, value, partition, headers)
        done: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        done.set_result(_metadata(topic))
        return done

    async def send_and_wait(
        self, topic: str, key: Any, value: Any, partition: Any = None, timestamp: Any = None,
        headers: Any = None, *, transactional_id: Any = None,
    ) -> RecordMetadata:  # fmt: skip
        self._binding.send(topic, key, value, partition, headers)
        return _metadata(topic)

    def send_soon(self, fut: Any) -> None:
        message = fut.message
        topic = message.channel.get_topic_name()
        self._binding.send(topic, message.key, message.value, message.partition,
                           message.headers)  # fmt: skip
        fut.set_result(_metadata(topic))

    def key_partition(self, topic: str, key: bytes) -> TP:
        raise AgentStepError("?", "eager partitioning (key_partition) is not supported")

    async def flush(self) -> None:
        return None


def _metadata(topic: str) -> RecordMetadata:
    return RecordMetadata(topic, -1, TP(topic, -1), -1)


class TableRows(MutableMapping[Any, Any]):
    """A faust table's store over the bound record's keyed state (module docstring)."""

    def __init__(self, table: Any, binding: AppBinding) -> None:
        self._table, self._binding = table, binding
        self._prefix = TABLE_PREFIX + str(table.name).encode() + b"/"
        self._serializers = table.app.serializers

    @classmethod
    def install(cls, table: Any, binding: AppBinding) -> None:
        """Make ``table`` read and write through sluicegate's state, with no changelog."""
        rows = cls(table, binding)
        table._data = rows
        table.on_key_get = _nothing
        table.on_key_set = _nothing
        table.on_key_del = _nothing
        table.on_clear = _nothing
        if getattr(table, "window", None) is not None:
            binding.windows.append(WindowIndex.install(table, rows._state, rows._row))

    def _row(self, key: Any) -> bytes:
        encoded = self._serializers.dumps_key(
            self._table.key_type, key, serializer=self._table.key_serializer
        )
        return self._prefix + (_as_bytes(encoded) or b"")

    def _state(self) -> PartitionState:
        return self._binding.state(self._table.name)

    def __getitem__(self, key: Any) -> Any:
        raw = self._state().get(self._row(key))
        if raw is None:
            raise KeyError(key)
        return self._serializers.loads_value(
            self._table.value_type, raw, serializer=self._table.value_serializer
        )

    def __setitem__(self, key: Any, value: Any) -> None:
        encoded = self._serializers.dumps_value(
            self._table.value_type, value, serializer=self._table.value_serializer
        )
        self._state().put(self._row(key), _as_bytes(encoded) or b"")

    def __delitem__(self, key: Any) -> None:
        row = self._row(key)
        state = self._state()
        if state.get(row) is None:
            raise KeyError(key)
        state.delete(row)

    def __contains__(self, key: object) -> bool:
        return self._state().get(self._row(key)) is not None

    def __iter__(self) -> Iterator[Any]:
        for row, _ in self._state().items(prefix=self._prefix):
            yield self._serializers.loads_key(
                self._table.key_type, row[len(self._prefix) :],
                serializer=self._table.key_serializer,
            )  # fmt: skip

    def __len__(self) -> int:
        return sum(1 for _ in self._state().items(prefix=self._prefix))


def _nothing(*args: Any) -> None:
    """A table hook faust would use to write its changelog topic: sluicegate has none."""

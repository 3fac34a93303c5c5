"""What subtasks, workers and the coordinator tell each other, as pure values.

These are the protocol's wire and value types: no I/O library is imported here, so the sans-IO
cores (the coordinator's checkpoint tracker, stop sequence, the subtask's alignment) can use
them without loading Kafka, RocksDB or storage clients (a unit test checks the imports).

* State: `SnapshotFile` (stored whole or in `FilePart` parts), `StateHandle` (everything
  needed to restore one subtask's state; part of the manifest), `RestorePoint` (where a
  subtask starts again).
* Subtask → coordinator: `CheckpointAck` (after the upload), `CheckpointDecline` (buffer over
  its bound), `SubtaskFailed` (the subtask stops with an error); a worker adds `Heartbeat`.
* Coordinator → subtask: `TriggerCheckpoint` (sources take barrier n where they read now),
  `CheckpointCompleted` (publish sink outputs up to n),
  `CheckpointAborted` (drop alignment), `StopSubtasks` (finish the messages before this one,
  then stop); to workers: `Assign`.

The JSON form of the control messages is `operators.protocol.wire`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sluicegate.operators.protocol.channels import TopicPartition

__all__ = [
    "RECORDS_GROUP",
    "SEGMENT_NAME",
    "STATE_HANDLE_SCHEMA_VERSION",
    "Assign",
    "CheckpointAborted",
    "CheckpointAck",
    "CheckpointCompleted",
    "CheckpointDecline",
    "FilePart",
    "FromWorker",
    "Heartbeat",
    "RestorePoint",
    "Retire",
    "Retired",
    "SnapshotFile",
    "StateHandle",
    "StopSubtasks",
    "SubtaskFailed",
    "ToCoordinator",
    "ToSubtask",
    "ToWorker",
    "TriggerCheckpoint",
]

STATE_HANDLE_SCHEMA_VERSION = 1
RECORDS_GROUP = "records"
"""The group of a heartbeat's counts the engine itself reports for every running subtask:
``in`` and ``out`` (records read and emitted, as ``sluicegate_records_in_total`` and
``_out_total``) and ``lag`` (consumer lag over its partitions, once read). It rides in
`Heartbeat.counts`, which coordinators of every version sum per operator, so no field was
added to the wire; an operator's own group of that name is replaced."""
SEGMENT_NAME = re.compile(r"^changelog-([0-9]{12})$")
"""A state changelog segment's file name; the group is its checkpoint id
(`operators.state.changelog`)."""


class FilePart(BaseModel):
    """One stored object of a file kept in parts (`SnapshotFile.parts`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


def _no_parts(value: tuple[FilePart, ...]) -> bool:
    return not value


class SnapshotFile(BaseModel):
    """One file of a subtask snapshot: its name in the RocksDB folder and where storage has it.

    A file is stored whole at ``path``, or, with ``parts``, as the concatenation of several
    objects in order (RocksDB's MANIFEST: an earlier checkpoint's copy, then what was appended
    to it since, so each checkpoint uploads only its own edits); ``path`` is then the first
    part's. ``size`` and ``sha256`` are always those of the whole file.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # One plain file name, as RocksDB names them (``000012.sst``, ``MANIFEST-000005``): a
    # manifest is read from storage, and a name with ``/`` or ``..`` made a restore write
    # outside the subtask's state folder.
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=255)
    path: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    # ``exclude_if`` rather than a wrap serializer, as for `StateHandle.changelog`: a manifest
    # writes one per file of every subtask.
    parts: tuple[FilePart, ...] = Field(default=(), max_length=1024, exclude_if=_no_parts)
    """Empty for a file stored whole, and then left out of the JSON (the form of every
    manifest written before parts existed, which this build still reads)."""

    @model_validator(mode="after")
    def _parts_add_up(self) -> SnapshotFile:
        if self.parts:
            if len(self.parts) < 2 or self.parts[0].path != self.path:
                raise ValueError("a file in parts has two or more, the first at its path")
            if sum(p.size for p in self.parts) != self.size:
                raise ValueError("the sizes of a file's parts do not add up to its size")
        return self

    @property
    def paths(self) -> tuple[str, ...]:
        """Every storage path this file is read from: ``path``, or each part's."""
        return tuple(p.path for p in self.parts) if self.parts else (self.path,)


def _is_empty(value: tuple[SnapshotFile, ...]) -> bool:
    return not value


class StateHandle(BaseModel):
    """Everything needed to restore one subtask's state from storage; part of the manifest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = STATE_HANDLE_SCHEMA_VERSION
    checkpoint_id: int = Field(ge=0)
    files: tuple[SnapshotFile, ...]
    """The RocksDB files (with the state changelog: of the last materialization; none yet
    for a database whose first materialization has not been uploaded)."""
    full_bytes: int = Field(ge=0)
    uploaded_bytes: int = Field(ge=0)
    # ``exclude_if``, not a wrap serializer on the model: that was a Python call building a
    # dict per handle, in every manifest row and every ack written.
    changelog: tuple[SnapshotFile, ...] = Field(default=(), exclude_if=_is_empty)
    """The state changelog's segments written since ``files``, replayed onto them in name
    order; empty without the changelog, and then left out of the JSON, so that a build
    without the changelog still reads the manifest."""

    @model_validator(mode="after")
    def _segments_apart(self) -> StateHandle:
        # Validated on every ack the coordinator decodes: the regex only where it can match.
        for f in self.changelog:
            if not SEGMENT_NAME.match(f.name):
                raise ValueError("a changelog entry is not named changelog-<12 digits>")
        for f in self.files:
            if f.name.startswith("changelog-") and SEGMENT_NAME.match(f.name):
                raise ValueError("a RocksDB file is named like a changelog segment")
        return self

    @property
    def all_files(self) -> tuple[SnapshotFile, ...]:
        """Every file a restore needs: ``files`` then ``changelog``."""
        return (*self.files, *self.changelog)


@dataclass(frozen=True, slots=True)
class RestorePoint:
    """Where a subtask starts again: its state and ``R_p`` in checkpoint ``checkpoint_id``."""

    checkpoint_id: int
    positions: dict[TopicPartition, int]
    handle: StateHandle


@dataclass(frozen=True, slots=True)
class CheckpointAck:
    """Subtask ``subtask`` holds checkpoint ``checkpoint_id`` in storage.

    ``positions`` holds ``R_p`` per input partition. Durations are seconds.
    """

    subtask: str
    checkpoint_id: int
    attempt: int
    positions: Mapping[TopicPartition, int]
    handle: StateHandle
    alignment_seconds: float = 0.0
    sync_seconds: float = 0.0
    async_seconds: float = 0.0

    @property
    def full_size_bytes(self) -> int:
        return self.handle.full_bytes

    @property
    def incremental_size_bytes(self) -> int:
        return self.handle.uploaded_bytes


@dataclass(frozen=True, slots=True)
class CheckpointDecline:
    subtask: str
    checkpoint_id: int
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class SubtaskFailed:
    """``subtask`` stopped with an error. ``corrupt_checkpoint`` names the checkpoint whose
    stored files failed verification on restore, when that was the cause."""

    subtask: str
    attempt: int
    reason: str
    corrupt_checkpoint: int | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A worker is alive, hosts ``subtasks`` of ``attempt``, and has ``slots`` in all.

    ``incarnation`` is new in every worker process: a worker that restarted under the same id
    has lost its subtasks, which the coordinator must notice even if no heartbeat was missed.
    """

    worker_id: str
    incarnation: str
    slots: int
    attempt: int
    subtasks: tuple[str, ...]
    counts: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    """Per running subtask, its operator's `Operator.status_counts` and `RECORDS_GROUP` (for
    ``sluicegate status`` and the console's Job page)."""


@dataclass(frozen=True, slots=True)
class Assign:
    """Run ``assignment`` (worker id -> subtasks) at ``attempt``, restored from checkpoint
    ``restore_from`` (None: from the beginning); the next checkpoint id is ``next_checkpoint_id``.
    A worker stops every subtask of an older attempt first."""

    attempt: int
    restore_from: int | None
    next_checkpoint_id: int
    assignment: dict[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class TriggerCheckpoint:
    """Take checkpoint ``checkpoint_id`` of ``attempt`` at the current read position of every
    source partition: a subtask reading sources treats it as barrier ``checkpoint_id`` arriving
    on each of its source channels, right before the next record it would read there. Nothing
    is ever written into a source topic."""

    checkpoint_id: int
    attempt: int


@dataclass(frozen=True, slots=True)
class CheckpointCompleted:
    checkpoint_id: int
    attempt: int


@dataclass(frozen=True, slots=True)
class CheckpointAborted:
    checkpoint_id: int
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class StopSubtasks:
    """The job is stopping: every subtask of ``attempt`` handles the control messages sent
    before this one (``completed(n)`` of the final checkpoint publishes its sink outputs), then
    stops without error. A worker stops its subtasks of older attempts at once."""

    attempt: int


@dataclass(frozen=True, slots=True)
class Retire:
    """Phase one of a new attempt: stop every subtask of an attempt older than ``attempt``,
    letting each finish the calls it is running (within the worker's ``retire_seconds``), then
    answer `Retired`. Until then the coordinator assigns no subtask anywhere, so a subtask moved
    to another worker never starts while its predecessor still runs a call. A worker retired
    up to ``attempt`` ignores any `Assign` older than it."""

    attempt: int


@dataclass(frozen=True, slots=True)
class Retired:
    """``worker_id`` runs no subtask of an attempt older than ``attempt`` (answers `Retire`)."""

    worker_id: str
    attempt: int


ToCoordinator = CheckpointAck | CheckpointDecline | SubtaskFailed
ToSubtask = TriggerCheckpoint | CheckpointCompleted | CheckpointAborted | StopSubtasks
FromWorker = ToCoordinator | Heartbeat | Retired
ToWorker = ToSubtask | Assign | Retire

"""The savepoint manifest: what a savepoint holds, per operator uid and per input partition.

Stored as ``savepoints/<name>/_savepoint.json`` (committed last, create-if-absent: a savepoint
without it is incomplete and is never restored); the rows files it lists sit beside it under
``savepoints/<name>/data/<i>``. Nothing is shared with checkpoints, so checkpoint retention
never touches a savepoint. The format is documented in ``docs/savepoints.md``.

A manifest is untrusted input: `SavepointManifest.parse` bounds its size, validates every
field (uids and topic names as the pipeline and Kafka allow them, file paths only of the form
``data/<digits>``, no partition or file listed twice) and refuses a format version newer than
this build with what to do.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sluicegate.operators.savepoints.exceptions import CorruptSavepointError, SavepointRefusedError

__all__ = [
    "FORMAT_VERSION",
    "MAX_MANIFEST_BYTES",
    "SAVEPOINT_NAME",
    "OperatorState",
    "PartitionRows",
    "RowsFile",
    "SavepointManifest",
    "SubtaskMetadata",
    "is_savepoint_name",
]

FORMAT_VERSION = 2
"""Version of the savepoint format this build writes; it reads every version up to it.
2: a partition's rows may be split over several files (``files``); 1 had one (``file``)."""
MAX_MANIFEST_BYTES = 64 << 20
SAVEPOINT_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$"
"""What a savepoint's name may be: it is a folder name in storage and a URL path segment. The
manifest, ``POST /savepoints`` and the console check it with this one pattern."""
_SAVEPOINT_NAME = re.compile(SAVEPOINT_NAME)
_MAX_FILE_BYTES = 1 << 40
_UID = r"[a-z0-9][a-z0-9_.-]{0,99}"
_TOPIC = r"[a-zA-Z0-9._-]{1,249}"
_FILE = re.compile(r"data/[0-9]{1,9}")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class RowsFile(_Model):
    """One rows file (`operators.savepoints.rows`) of the savepoint, relative to its folder."""

    path: str = Field(description="data/<digits>, relative to the savepoint's folder")
    size: int = Field(ge=0, le=_MAX_FILE_BYTES)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")

    @field_validator("path")
    @classmethod
    def _inside(cls, value: str) -> str:
        if not _FILE.fullmatch(value):
            raise ValueError(f"file path {value!r} is not data/<digits>")
        return value


class PartitionRows(_Model):
    """One input partition of an operator: its rows and where reading resumes."""

    topic: str = Field(pattern=f"^{_TOPIC}$")
    partition: int = Field(ge=0, le=2**31 - 1)
    offset: int | None = Field(ge=0, description="R_p: the next offset to read (None: start)")
    rows: int = Field(ge=0)
    file: RowsFile | None = Field(default=None, description="format 1: the rows, if any")
    files: tuple[RowsFile, ...] = Field(
        default=(), description="format 2: the rows in key order, split over these files"
    )

    @model_validator(mode="after")
    def _rows_need_a_file(self) -> PartitionRows:
        if self.topic in {".", ".."}:
            raise ValueError("'.' and '..' are not topic names")
        if self.file is not None and self.files:
            raise ValueError(f"{self.topic}[{self.partition}] lists both file and files")
        if self.rows and not self.chunks():
            raise ValueError(f"{self.topic}[{self.partition}] counts rows but lists no file")
        return self

    def chunks(self) -> tuple[RowsFile, ...]:
        """The files holding this partition's rows, in key order (empty: no rows)."""
        return (self.file,) if self.file is not None else self.files


class SubtaskMetadata(_Model):
    """The metadata rows of one subtask (the exactly-once sinks' write-ahead log)."""

    index: int = Field(ge=0)
    rows: int = Field(ge=0)
    file: RowsFile


class OperatorState(_Model):
    """The state of one operator, by uid."""

    parallelism: int = Field(ge=1, description="when the savepoint was taken (informative)")
    state_schema_version: int = Field(ge=1, description="of the operator's own rows")
    partitions: tuple[PartitionRows, ...]
    metadata: tuple[SubtaskMetadata, ...] = ()

    @model_validator(mode="after")
    def _unique(self) -> OperatorState:
        seen = [(p.topic, p.partition) for p in self.partitions]
        if len(set(seen)) != len(seen):
            raise ValueError("an input partition is listed twice")
        indexes = [m.index for m in self.metadata]
        if len(set(indexes)) != len(indexes) or any(i >= self.parallelism for i in indexes):
            raise ValueError("subtask metadata indexes must be unique and below the parallelism")
        return self


def is_savepoint_name(name: str) -> bool:
    """Whether ``name`` is a valid savepoint name (`SAVEPOINT_NAME`)."""
    return _SAVEPOINT_NAME.fullmatch(name) is not None


class SavepointManifest(_Model):
    """Everything a restore from this savepoint needs; see the module docstring."""

    format: Literal["sluicegate-savepoint"] = "sluicegate-savepoint"
    format_version: int = Field(default=FORMAT_VERSION, ge=1, le=FORMAT_VERSION)
    name: str = Field(pattern=SAVEPOINT_NAME)
    pipeline: str = Field(min_length=1, max_length=200)
    created_at: float = Field(description="unix time")
    from_checkpoint: int = Field(ge=1, description="the completed checkpoint it was written from")
    attempt: int = Field(ge=0)
    operators: dict[str, OperatorState]

    @field_validator("operators")
    @classmethod
    def _uids(cls, value: dict[str, OperatorState]) -> dict[str, OperatorState]:
        for uid in value:
            if not re.fullmatch(_UID, uid):
                raise ValueError(f"{uid[:120]!r} is not an operator uid")
        return value

    @model_validator(mode="after")
    def _files_unique(self) -> SavepointManifest:
        paths = [f.path for f in self.files()]
        if len(set(paths)) != len(paths):
            raise ValueError("a rows file is listed twice")
        return self

    def files(self) -> list[RowsFile]:
        """Every rows file the savepoint holds."""
        found: list[RowsFile] = []
        for state in self.operators.values():
            found.extend(f for p in state.partitions for f in p.chunks())
            found.extend(m.file for m in state.metadata)
        return found

    @property
    def size_bytes(self) -> int:
        return sum(f.size for f in self.files())

    @property
    def rows(self) -> int:
        return sum(p.rows for s in self.operators.values() for p in s.partitions)

    def to_json(self) -> bytes:
        return self.model_dump_json(indent=1).encode()

    @classmethod
    def parse(cls, data: bytes, *, what: str = "manifest") -> SavepointManifest:
        """Validate untrusted manifest bytes; `CorruptSavepointError` or, for a format newer
        than this build, `SavepointRefusedError`."""
        if len(data) > MAX_MANIFEST_BYTES:
            raise CorruptSavepointError(what, f"{len(data)} bytes is over {MAX_MANIFEST_BYTES}")
        try:
            raw = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptSavepointError(what, f"not JSON ({exc})") from exc
        if not isinstance(raw, dict):
            raise CorruptSavepointError(what, "not a JSON object")
        version = raw.get("format_version")
        if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
            raise SavepointRefusedError(
                f"savepoint format version {version} is newer than this build reads "
                f"({FORMAT_VERSION})",
                "Restore it with the sluicegate version that wrote it, or a newer one",
            )
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])[:200]
            raise CorruptSavepointError(what, f"{where}: {first['msg'][:300]}") from exc

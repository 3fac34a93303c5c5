"""What the savepoint operations of the HTTP API answer (`coordinator.httpapi.savepoints`);
plain pydantic, so the CLI client reads them without the server's libraries."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FullCheckpointTriggered", "SavepointDeleted", "SavepointInfo"]


class SavepointInfo(BaseModel):
    """One savepoint: stored, or requested from this coordinator and not written yet."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    status: str = Field(
        description="waiting|checkpointing|writing|completed|failed (a request of this "
        "coordinator), stored (complete, in storage) or incomplete (no manifest)"
    )
    stop: bool = Field(default=False, description="stop-with-savepoint")
    pipeline: str | None = None
    checkpoint_id: int | None = Field(default=None, description="written from this checkpoint")
    created_at: float | None = Field(default=None, description="unix time")
    size_bytes: int = Field(default=0, ge=0)
    rows: int = Field(default=0, ge=0)
    partitions_done: int = Field(default=0, ge=0)
    partitions_total: int = Field(default=0, ge=0)
    state_versions: dict[str, int] = Field(
        default_factory=dict, description="operator uid -> state schema version"
    )
    error: str = Field(default="", description="why it failed, or why it cannot be read")


class SavepointDeleted(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    files: int = Field(ge=0)


class FullCheckpointTriggered(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint_id: int = Field(ge=1)

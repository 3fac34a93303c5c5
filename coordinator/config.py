"""Settings of the coordinator package (environment prefix ``SLUICEGATE_``).

CLI flags override the environment, which overrides the defaults here.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["CoordinatorSettings"]


class CoordinatorSettings(BaseSettings):
    """Where Kafka is, where the dev broker keeps its jars, where state and metrics go."""

    # An empty variable is unset (compose passes `${SLUICEGATE_API_TOKEN:-}` through).
    model_config = SettingsConfigDict(
        env_prefix="SLUICEGATE_", frozen=True, extra="ignore", env_ignore_empty=True
    )

    kafka_bootstrap: str | None = None
    """An existing cluster's bootstrap servers; when unset, the embedded dev broker is used."""

    kafka_home: Path | None = None
    """Cache directory for the dev broker's jars (default: ``$XDG_CACHE_HOME/sluicegate``)."""

    storage_url: str = ".sluicegate/checkpoints"
    """Checkpoint storage: a local folder, ``file:///…``, ``s3://bucket/prefix`` or ``memory://``."""

    state_dir: Path = Path(".sluicegate/state")
    """Where workers keep their subtasks' local RocksDB state and checkpoints."""

    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    """Port of a worker's ``/metrics`` (0: any free port); unset: a worker serves no metrics.
    ``sluicegate worker --metrics-port`` overrides it."""

    api_tokens_file: Path | None = None
    """Tokens the coordinator's API accepts, one per line: ``NAME SCOPES TOKEN`` (see
    `coordinator.httpapi.auth`). Without any token the API is open and binds loopback only."""

    api_token: SecretStr | None = None
    """One API token with every scope (name ``admin``); the CLI sends it too."""

    api_token_file: Path | None = None
    """A file holding ``api_token`` (for secrets mounted as files)."""

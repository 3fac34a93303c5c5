"""Header values that are secrets: read from the environment or a file when a connection opens,
never held in a declaration's fields as text, never logged, masked in every ``repr``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sluicegate.operators.exceptions import ConfigError

__all__ = ["HeaderValue", "Secret", "masked", "resolved"]


@dataclass(frozen=True, slots=True)
class Secret:
    """A header value read when a connection opens: from the environment variable ``env`` or
    the file ``file`` (its text, stripped; a mounted Kubernetes secret, say), after
    ``prefix`` (``Secret.env("CRM_TOKEN", prefix="Bearer ")``). Read at every connection, so a
    rotated file is picked up on the next reconnect."""

    source: str
    from_file: bool
    prefix: str = ""

    @classmethod
    def env(cls, name: str, *, prefix: str = "") -> Secret:
        return cls(name, False, prefix)

    @classmethod
    def file(cls, path: str | Path, *, prefix: str = "") -> Secret:
        return cls(str(path), True, prefix)

    def value(self) -> str:
        """The header's text; `ConfigError` naming the variable or file (never the value)."""
        if self.from_file:
            try:
                text = Path(self.source).read_text().strip()
            except OSError as exc:
                raise ConfigError(self.source, f"cannot read the secret file: {exc}") from exc
        else:
            found = os.environ.get(self.source)
            if found is None:
                raise ConfigError(self.source, "the environment variable of a secret is not set")
            text = found.strip()
        return self.prefix + text

    def __repr__(self) -> str:
        where = "file" if self.from_file else "env"
        return f"Secret.{where}({self.source!r})"


HeaderValue = str | Secret
"""A literal header value (not a secret: a ``User-Agent``, a tenant id) or a `Secret`."""


def resolved(headers: Mapping[str, HeaderValue]) -> dict[str, str]:
    """The headers to send, secrets read now."""
    return {k: v.value() if isinstance(v, Secret) else v for k, v in headers.items()}


def masked(headers: Mapping[str, HeaderValue]) -> dict[str, str]:
    """The headers as they may be printed: every value masked, literal ones too (an
    ``Authorization`` written as a literal is a secret all the same)."""
    return {k: repr(v) if isinstance(v, Secret) else "***" for k, v in headers.items()}

"""Who may call the coordinator's API: bearer tokens with scopes.

A token grants a *name* (the identity written into the audit trail, e.g. as the approver of
a decision) and *scopes*:

=========  ==================================================================================
scope      allows
=========  ==================================================================================
read       ``GET /status``, ``/workers``, ``/subtasks``, ``/checkpoints``, ``/savepoints``,
           ``/metrics``, ``/agents/{agent}/runs``, ``/agents/{agent}/runs/{run}[/history]``
approve    read, and ``POST /agents/{agent}/runs/{run}/approve|reject``
operate    read, and ``POST /checkpoints``, ``/checkpoints/full``, ``/stop``, ``/savepoints``,
           ``/agents/{agent}/runs/{run}/fork|rollback``, ``DELETE /savepoints/{name}``
=========  ==================================================================================

``GET /healthz`` needs no token. Tokens come from (see `ApiTokens.from_settings`):

* ``SLUICEGATE_API_TOKENS_FILE``: a file with one token per line, ``NAME SCOPES TOKEN``
  (scopes comma-separated, ``#`` starts a comment), e.g. ``ann approve s3cr3t-...``;
* ``SLUICEGATE_API_TOKEN`` or ``SLUICEGATE_API_TOKEN_FILE`` (a file holding the token): one
  token named ``admin`` with every scope. The CLI sends the same variable, so one setting
  serves a single operator.

Without any token the API is open (`ApiTokens` is None): the CLI then binds loopback only.
Tokens are compared by their SHA-256 digests and never logged.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Protocol

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr

from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.exceptions import ConfigError, SluicegateError

__all__ = [
    "ADMIN_NAME",
    "UNAUTHENTICATED",
    "AdminTokenSettings",
    "ApiAuthError",
    "ApiTokens",
    "Principal",
    "Scope",
    "admin_token",
    "identity",
    "is_loopback",
    "requirement",
]

logger = logging.getLogger(__name__)

ADMIN_NAME = "admin"
"""The name of the token given by ``SLUICEGATE_API_TOKEN(_FILE)``."""


_SHORT = "too short (16 characters at least; e.g. `openssl rand -hex 32`)"


class Scope(StrEnum):
    READ = "read"
    APPROVE = "approve"
    OPERATE = "operate"


_IMPLIED: Mapping[Scope, frozenset[Scope]] = {
    Scope.READ: frozenset({Scope.READ}),
    Scope.APPROVE: frozenset({Scope.APPROVE, Scope.READ}),
    Scope.OPERATE: frozenset({Scope.OPERATE, Scope.READ}),
}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: the token's name and what it may do."""

    name: str
    scopes: frozenset[Scope]

    @classmethod
    def granted(cls, name: str, scopes: Iterable[Scope]) -> Principal:
        """A principal with ``scopes`` and the scopes they imply."""
        return cls(name, frozenset(s for scope in scopes for s in _IMPLIED[scope]))


UNAUTHENTICATED = Principal.granted("unauthenticated", Scope)
"""Every request's principal when the API runs without tokens (loopback only)."""


class ApiAuthError(SluicegateError):
    """A request without a valid token (401) or without the scope it needs (403)."""

    def __init__(self, status: int, error: str, message: str, what_to_do: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.what_to_do = what_to_do


class ApiTokens:
    """The tokens the API accepts, by the SHA-256 digest of each token."""

    def __init__(self, principals: Mapping[str, Principal]) -> None:
        """``principals``: token → principal. At least one token."""
        if not principals:
            raise ValueError("ApiTokens needs at least one token")
        self._by_digest = {_digest(token): who for token, who in principals.items()}

    def __len__(self) -> int:
        return len(self._by_digest)

    def authenticate(self, token: str) -> Principal | None:
        """The principal ``token`` grants, or None for an unknown token."""
        return self._by_digest.get(_digest(token))

    @classmethod
    def parse(cls, text: str, source: str) -> dict[str, Principal]:
        """The tokens of a tokens file's ``text``: lines ``NAME SCOPES TOKEN``.

        Raises:
            ConfigError: a malformed line (named by its number, never showing the token).
        """
        principals: dict[str, Principal] = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            if len(fields) != 3:
                raise ConfigError(
                    source, f"line {number}: expected NAME SCOPES TOKEN, got {len(fields)} fields"
                )
            name, scope_list, token = fields
            try:
                scopes = [Scope(s) for s in scope_list.split(",") if s]
            except ValueError:
                raise ConfigError(
                    source,
                    f"line {number}: unknown scope in {scope_list!r}; "
                    f"use {', '.join(s.value for s in Scope)}",
                ) from None
            if not scopes:
                raise ConfigError(source, f"line {number}: no scope for {name!r}")
            if len(token) < 16:
                raise ConfigError(source, f"line {number}: the token of {name!r} is {_SHORT}")
            if token in principals:
                raise ConfigError(source, f"line {number}: a token of {name!r} is used twice")
            principals[token] = Principal.granted(name, scopes)
        return principals

    @classmethod
    def from_settings(cls, settings: CoordinatorSettings) -> ApiTokens | None:
        """The tokens configured in ``settings``; None when none is (the API is then open).

        Raises:
            ConfigError: a file cannot be read or is malformed, or a token is too short.
        """
        principals: dict[str, Principal] = {}
        if settings.api_tokens_file is not None:
            source = f"SLUICEGATE_API_TOKENS_FILE ({settings.api_tokens_file})"
            principals.update(cls.parse(_read(settings.api_tokens_file, source), source))
        admin = admin_token(settings)
        if admin is not None:
            principals[admin] = Principal.granted(ADMIN_NAME, Scope)
        return cls(principals) if principals else None


class AdminTokenSettings(Protocol):
    """Settings naming the admin token: the coordinator's, which accepts it, and the CLI's,
    which sends it."""

    @property
    def api_token(self) -> SecretStr | None: ...
    @property
    def api_token_file(self) -> Path | None: ...


def admin_token(settings: AdminTokenSettings) -> str | None:
    """The token of ``SLUICEGATE_API_TOKEN``, else of ``SLUICEGATE_API_TOKEN_FILE``, or None."""
    if settings.api_token is not None:
        token = settings.api_token.get_secret_value().strip()
        source = "SLUICEGATE_API_TOKEN"
    elif settings.api_token_file is not None:
        source = f"SLUICEGATE_API_TOKEN_FILE ({settings.api_token_file})"
        token = _read(settings.api_token_file, source).strip()
    else:
        return None
    if len(token) < 16:
        raise ConfigError(source, f"the token is {_SHORT}")
    return token


_bearer = HTTPBearer(auto_error=False, description="a token of SLUICEGATE_API_TOKENS_FILE")


def requirement(tokens: ApiTokens | None, scope: Scope) -> Callable[..., Awaitable[Principal]]:
    """A FastAPI dependency answering the request's principal, which must hold ``scope``.

    Raises `ApiAuthError` 401 (no token, or an unknown one) or 403 (a token without
    ``scope``). With ``tokens`` None every request is `UNAUTHENTICATED`, and the OpenAPI
    spec names no security scheme.
    """
    if tokens is None:

        async def unauthenticated() -> Principal:
            return UNAUTHENTICATED

        return unauthenticated

    async def principal(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        if credentials is None:
            raise ApiAuthError(
                401,
                "unauthorized",
                "this request needs a bearer token (Authorization: Bearer <token>)",
                "Set SLUICEGATE_API_TOKEN (or SLUICEGATE_API_TOKEN_FILE) to a token the "
                "coordinator accepts; the CLI sends it.",
            )
        who = tokens.authenticate(credentials.credentials)
        if who is None:
            raise ApiAuthError(
                401,
                "unauthorized",
                "the bearer token is not one the coordinator accepts",
                "Check the token against the coordinator's SLUICEGATE_API_TOKENS_FILE or "
                "SLUICEGATE_API_TOKEN.",
            )
        if scope not in who.scopes:
            raise ApiAuthError(
                403,
                "insufficient_scope",
                f"the token of {who.name!r} lacks the scope {scope.value!r}",
                f"Use a token with scope {scope.value!r} (SLUICEGATE_API_TOKENS_FILE).",
            )
        return who

    return principal


def identity(tokens: ApiTokens | None, scope: Scope) -> Callable[..., Awaitable[str]]:
    """A FastAPI dependency answering the name of the request's principal (`requirement`)."""
    needed = requirement(tokens, scope)

    # A default, not Annotated: postponed annotations cannot name a local like ``needed``.
    async def name(principal: Principal = Depends(needed)) -> str:  # noqa: B008
        return principal.name

    return name


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to listen on) is reachable from this machine only."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _read(path: Path, source: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, f"cannot read it ({exc.strerror or exc})") from exc

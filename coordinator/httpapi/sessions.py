"""Signed-in people of the web console: a session per sign-in, with its anti-forgery token.

A person signs in once with an API token (`ApiTokens`); the console then knows them by a
session cookie instead of a bearer header, which a browser cannot send by itself. A session
is:

* an *id*, 256 random bits, the cookie's value (HttpOnly, SameSite=Strict, Secure over TLS:
  the console sets it). The store keeps only its SHA-256 digest, as `ApiTokens` does;
* the *principal* the token granted (its name and scopes, fixed at sign-in);
* an *anti-forgery token*, another 256 random bits, which every state-changing form of the
  console carries in a hidden field and `Sessions.check_form` compares in constant time;
* an *expiry*: ``lifetime_seconds`` after sign-in (no sliding renewal: a stolen cookie dies
  on time whatever its thief does).

The store is in memory: a coordinator restart signs everybody out, which is what a person
expects of a process that restarted. Nothing here does I/O; the clock is injected.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from sluicegate.coordinator.httpapi.auth import Principal

__all__ = ["DEFAULT_LIFETIME_SECONDS", "Session", "Sessions"]

DEFAULT_LIFETIME_SECONDS = 8 * 3600.0
"""A working day: a support person signs in once in the morning."""

_MAX_SESSIONS = 10_000
"""Past this many live sessions the oldest is dropped: sign-ins cannot grow memory forever."""


@dataclass(frozen=True, slots=True)
class Session:
    """One sign-in: who, the form token its pages carry, when it ends (clock seconds)."""

    principal: Principal
    csrf_token: str
    expires_at: float


class Sessions:
    """The console's live sessions, by the digest of their cookie; see the module docstring."""

    def __init__(
        self,
        *,
        lifetime_seconds: float = DEFAULT_LIFETIME_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if lifetime_seconds <= 0:
            raise ValueError("a session lifetime must be positive")
        self._lifetime = lifetime_seconds
        self._clock = clock
        self._by_digest: dict[bytes, Session] = {}

    def __len__(self) -> int:
        return len(self._by_digest)

    def start(self, principal: Principal) -> tuple[str, Session]:
        """A new session for ``principal``: the cookie value (give it to the browser only)
        and the session."""
        self._forget_expired()
        while len(self._by_digest) >= _MAX_SESSIONS:
            del self._by_digest[next(iter(self._by_digest))]  # dicts keep insertion order
        cookie = secrets.token_urlsafe(32)
        session = Session(principal, secrets.token_urlsafe(32), self._clock() + self._lifetime)
        self._by_digest[_digest(cookie)] = session
        return cookie, session

    def find(self, cookie: str | None) -> Session | None:
        """The live session of ``cookie``, or None (none, unknown, or expired)."""
        if not cookie:
            return None
        session = self._by_digest.get(_digest(cookie))
        if session is None:
            return None
        if session.expires_at <= self._clock():
            del self._by_digest[_digest(cookie)]
            return None
        return session

    def end(self, cookie: str | None) -> None:
        """Sign out: ``cookie`` no longer names a session (a no-op if it did not)."""
        if cookie:
            self._by_digest.pop(_digest(cookie), None)

    @staticmethod
    def check_form(session: Session, submitted: str | None) -> bool:
        """Whether a form's anti-forgery field is ``session``'s token (constant time)."""
        if not submitted:
            return False
        return hmac.compare_digest(session.csrf_token.encode(), submitted.encode())

    def _forget_expired(self) -> None:
        now = self._clock()
        for digest in [d for d, s in self._by_digest.items() if s.expires_at <= now]:
            del self._by_digest[digest]


def _digest(cookie: str) -> bytes:
    return hashlib.sha256(cookie.encode()).digest()

"""`Sessions`: a cookie names a session until it expires or signs out; the store keeps no
cookie in the clear; a form's anti-forgery token must be the session's own."""

from __future__ import annotations

import pytest

from sluicegate.coordinator.httpapi.auth import Principal, Scope
from sluicegate.coordinator.httpapi.sessions import Sessions

ANN = Principal.granted("ann", [Scope.APPROVE])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_cookie_names_its_session_until_it_expires() -> None:
    clock = Clock()
    sessions = Sessions(lifetime_seconds=60, clock=clock)
    cookie, session = sessions.start(ANN)
    assert sessions.find(cookie) == session
    assert session.principal == ANN
    clock.now += 59.9
    assert sessions.find(cookie) == session  # no sliding renewal, but still alive
    clock.now += 0.1
    assert sessions.find(cookie) is None
    assert len(sessions) == 0


def test_sign_out_ends_only_that_session() -> None:
    sessions = Sessions()
    mine, _ = sessions.start(ANN)
    theirs, session = sessions.start(ANN)
    sessions.end(mine)
    sessions.end("not-a-cookie")
    sessions.end(None)
    assert sessions.find(mine) is None
    assert sessions.find(theirs) == session


def test_unknown_or_missing_cookies_find_nothing() -> None:
    sessions = Sessions()
    sessions.start(ANN)
    assert sessions.find(None) is None
    assert sessions.find("") is None
    assert sessions.find("guess") is None


def test_cookies_and_form_tokens_are_random_and_distinct() -> None:
    sessions = Sessions()
    started = [sessions.start(ANN) for _ in range(50)]
    values = {c for c, _ in started} | {s.csrf_token for _, s in started}
    assert len(values) == 100
    assert all(len(v) >= 43 for v in values)  # 32 random bytes, base64url
    # The store holds digests, never a cookie in the clear.
    assert not any(c in repr(vars(sessions)) for c, _ in started)


def test_a_form_must_carry_its_own_sessions_token() -> None:
    sessions = Sessions()
    _, mine = sessions.start(ANN)
    _, theirs = sessions.start(ANN)
    assert Sessions.check_form(mine, mine.csrf_token)
    assert not Sessions.check_form(mine, theirs.csrf_token)
    assert not Sessions.check_form(mine, None)
    assert not Sessions.check_form(mine, "")


def test_a_session_lifetime_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Sessions(lifetime_seconds=0)

"""Bearer tokens with scopes on the coordinator's API, and where tokens come from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.auth import (
    ADMIN_NAME,
    ApiTokens,
    Principal,
    Scope,
    admin_token,
    is_loopback,
)
from sluicegate.coordinator.httpapi.savepoints import savepoints_router
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.exceptions import ConfigError
from tests.unit.coordinator.httpapi.test_app import FakeView
from tests.unit.coordinator.httpapi.test_savepoint_routes import FakeView as SavepointsView

READER, APPROVER, OPERATOR = (f"{who}-token-0123456789abcdef" for who in ("r", "a", "o"))
TOKENS_FILE = f"""
# name   scopes          token
rita     read            {READER}
ann      approve         {APPROVER}   # approvers read too
otto     operate,read    {OPERATOR}
"""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def view() -> FakeView:
    return FakeView()


@pytest.fixture
async def api(view: FakeView) -> AsyncIterator[httpx.AsyncClient]:
    tokens = ApiTokens(ApiTokens.parse(TOKENS_FILE, "tokens"))
    app = create_app(view, CollectorRegistry(), tokens=tokens)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        yield client


def test_a_tokens_file_grants_names_and_scopes_with_the_scopes_they_imply() -> None:
    tokens = ApiTokens(ApiTokens.parse(TOKENS_FILE, "tokens"))
    assert len(tokens) == 3
    assert tokens.authenticate(READER) == Principal("rita", frozenset({Scope.READ}))
    assert tokens.authenticate(APPROVER) == Principal("ann", frozenset({Scope.APPROVE, Scope.READ}))
    assert tokens.authenticate(OPERATOR) == Principal(
        "otto", frozenset({Scope.OPERATE, Scope.READ})
    )
    assert tokens.authenticate(READER[:-1]) is None
    assert tokens.authenticate("") is None


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("ann approve", "expected NAME SCOPES TOKEN, got 2 fields"),
        ("ann root 0123456789abcdef0", "unknown scope in 'root'; use read, approve, operate"),
        ("ann approve short", "the token of 'ann' is too short"),
        ("ann , 0123456789abcdef0", "no scope for 'ann'"),
    ],
)
def test_a_malformed_tokens_file_is_refused_naming_the_line_never_the_token(
    line: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        ApiTokens.parse(f"# tokens\n{line}\n", "tokens.txt")
    assert raised.value.setting == "tokens.txt"
    assert raised.value.problem.startswith(f"line 2: {problem}")
    assert "0123456789abcdef0" not in str(raised.value)


def test_tokens_come_from_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("API_TOKEN", "API_TOKEN_FILE", "API_TOKENS_FILE"):
        monkeypatch.delenv(f"SLUICEGATE_{name}", raising=False)
    assert ApiTokens.from_settings(CoordinatorSettings.from_env()) is None
    monkeypatch.setenv("SLUICEGATE_API_TOKEN", "")  # compose's ${SLUICEGATE_API_TOKEN:-}
    assert ApiTokens.from_settings(CoordinatorSettings.from_env()) is None
    monkeypatch.delenv("SLUICEGATE_API_TOKEN")
    (tmp_path / "tokens").write_text(TOKENS_FILE)
    (tmp_path / "admin").write_text("admin-token-from-a-file-0123\n")
    monkeypatch.setenv("SLUICEGATE_API_TOKENS_FILE", str(tmp_path / "tokens"))
    monkeypatch.setenv("SLUICEGATE_API_TOKEN_FILE", str(tmp_path / "admin"))
    tokens = ApiTokens.from_settings(CoordinatorSettings.from_env())
    assert tokens is not None
    assert len(tokens) == 4
    admin = tokens.authenticate("admin-token-from-a-file-0123")
    assert admin == Principal(ADMIN_NAME, frozenset(Scope))
    # The variable beats the file; the settings never print it.
    monkeypatch.setenv("SLUICEGATE_API_TOKEN", "admin-token-from-the-env-01")
    settings = CoordinatorSettings.from_env()
    assert admin_token(settings) == "admin-token-from-the-env-01"
    assert "admin-token-from-the-env-01" not in repr(settings)
    monkeypatch.setenv("SLUICEGATE_API_TOKEN", "short")
    with pytest.raises(ConfigError, match="too short"):
        ApiTokens.from_settings(CoordinatorSettings.from_env())
    monkeypatch.delenv("SLUICEGATE_API_TOKEN")
    monkeypatch.setenv("SLUICEGATE_API_TOKEN_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="cannot read it"):
        ApiTokens.from_settings(CoordinatorSettings.from_env())


async def test_reads_need_a_token_and_healthz_does_not(api: httpx.AsyncClient) -> None:
    anonymous = await api.get("/status")
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"] == "Bearer"
    assert anonymous.json()["error"] == "unauthorized"
    assert "SLUICEGATE_API_TOKEN" in anonymous.json()["what_to_do"]
    wrong = await api.get("/status", headers=bearer("not-a-token-0123456789"))
    assert wrong.status_code == 401
    for path in ("/status", "/workers", "/subtasks", "/checkpoints", "/metrics"):
        assert (await api.get(path, headers=bearer(READER))).status_code == 200, path
    assert (await api.get("/metrics")).status_code == 401
    assert (await api.get("/healthz")).status_code == 200


async def test_stop_and_trigger_need_the_operate_scope(
    api: httpx.AsyncClient, view: FakeView
) -> None:
    for token in (READER, APPROVER):
        refused = await api.post("/stop", headers=bearer(token))
        assert refused.status_code == 403
        assert refused.json()["error"] == "insufficient_scope"
        assert "lacks the scope 'operate'" in refused.json()["message"]
        assert (await api.post("/checkpoints", headers=bearer(token))).status_code == 403
    assert view.stop_calls == []
    assert view.next_checkpoint_id == 9
    assert (await api.post("/checkpoints", headers=bearer(OPERATOR))).json() == {"checkpoint_id": 9}
    stopped = await api.post("/stop?wait_seconds=0", headers=bearer(OPERATOR))
    assert stopped.status_code == 200
    assert view.stop_calls == [(True, 0.0)]


def test_loopback_addresses() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.0.0.1", "example.com", ""]))


async def test_savepoint_routes_read_with_read_and_change_with_operate(view: FakeView) -> None:
    tokens = ApiTokens(ApiTokens.parse(TOKENS_FILE, "tokens"))
    savepoints = SavepointsView()
    app = create_app(view, CollectorRegistry(), tokens=tokens)
    app.include_router(savepoints_router(savepoints, tokens=tokens))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        assert (await api.get("/savepoints")).status_code == 401
        assert (await api.get("/savepoints", headers=bearer(READER))).status_code == 200
        assert (await api.get("/savepoints/a", headers=bearer(READER))).status_code == 200
        for method, path in [
            ("POST", "/savepoints"), ("DELETE", "/savepoints/a"), ("POST", "/checkpoints/full"),
        ]:  # fmt: skip
            for token in (READER, APPROVER):
                refused = await api.request(method, path, headers=bearer(token))
                assert refused.status_code == 403, (method, path)
        assert savepoints.asked == []
        assert savepoints.full == 0
        assert "a" in savepoints.stored
        created = await api.post("/savepoints", headers=bearer(OPERATOR))
        deleted = await api.delete("/savepoints/a", headers=bearer(OPERATOR))
        assert (created.status_code, deleted.status_code) == (202, 200)

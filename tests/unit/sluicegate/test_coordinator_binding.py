"""``sluicegate coordinator`` without API tokens listens on loopback only."""

from __future__ import annotations

import logging

import pytest

from sluicegate.cli.main import main


@pytest.fixture(autouse=True)
def no_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("API_TOKEN", "API_TOKEN_FILE", "API_TOKENS_FILE"):
        monkeypatch.delenv(f"SLUICEGATE_{name}", raising=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3"])
def test_a_public_address_without_tokens_is_refused_saying_what_to_do(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused before the pipeline is even loaded (this one does not exist).
    code = main(["coordinator", "--pipeline", "no.such:pipeline", "--http-host", host])
    assert code == 1
    err = capsys.readouterr().err
    assert f"would listen on {host} without authentication" in err
    assert "set SLUICEGATE_API_TOKEN" in err
    assert "docs/security.md" in err


def test_loopback_without_tokens_says_that_the_api_is_open(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.WARNING, logger="sluicegate"):
        code = main(["coordinator", "--pipeline", "no.such:pipeline"])
    assert code == 1  # the pipeline does not load: the check passed
    assert "no.such" in capsys.readouterr().err
    assert any(
        "authentication is off" in r.getMessage() and "127.0.0.1 only" in r.getMessage()
        for r in caplog.records
    )


def test_a_public_address_with_a_token_passes_the_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLUICEGATE_API_TOKEN", "a-long-enough-token-0123")
    code = main(["coordinator", "--pipeline", "no.such:pipeline", "--http-host", "0.0.0.0"])
    assert code == 1
    err = capsys.readouterr().err
    assert "without authentication" not in err
    assert "no.such" in err

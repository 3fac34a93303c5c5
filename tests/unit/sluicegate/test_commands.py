"""The ``status`` and ``checkpoint`` CLI commands against a live API server over a fake view.

The server runs in the test's event loop; the synchronous commands run in a worker thread.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator

import pytest
from prometheus_client import CollectorRegistry

from sluicegate.cli.commands import (
    DEFAULT_URL,
    URL_ENV,
    coordinator_url,
    register,
    render_checkpoints,
)
from sluicegate.coordinator.httpapi.app import create_app
from sluicegate.coordinator.httpapi.auth import ApiTokens, Principal, Scope
from sluicegate.coordinator.httpapi.server import ApiServer, serve
from tests.unit.coordinator.httpapi.test_app import FakeView


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluicegate")
    register(parser.add_subparsers(required=True))
    return parser


async def sluicegate(*argv: str) -> int:
    """Run a command as the CLI would, off the loop that serves the API."""
    args = parser().parse_args(argv)
    code: int = await asyncio.to_thread(args.run, args)
    return code


@pytest.fixture
def view() -> FakeView:
    return FakeView()


@pytest.fixture
async def api(view: FakeView) -> AsyncIterator[ApiServer]:
    server = await serve(create_app(view, CollectorRegistry()), "127.0.0.1", 0)
    yield server
    await server.stop()


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A URL whose port is bound but not listening: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


async def test_status_prints_the_job_workers_and_subtasks(
    api: ApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await sluicegate("status", "--url", api.url) == 0
    out = capsys.readouterr().out
    assert out == (
        "pipeline         words\n"
        "state            running\n"
        "attempt          2\n"
        "last checkpoint  7 (3.50s ago)\n"
        "restarts         1\n"
        "\n"
        "WORKER  ALIVE  SLOTS  SUBTASKS  HEARTBEAT\n"
        "w-1     yes    2      1         0.40s ago\n"
        "\n"
        "SUBTASK  WORKER  ATTEMPT\n"
        "a#0      w-1     2\n"
        "b#0      -       2\n"
    )


async def test_status_json_holds_the_job_workers_and_subtasks(
    api: ApiServer, view: FakeView, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await sluicegate("status", "--url", api.url, "--json") == 0
    assert json.loads(capsys.readouterr().out) == {
        "job": view.job.model_dump(mode="json"),
        "workers": [w.model_dump(mode="json") for w in view.worker_list],
        "subtasks": [s.model_dump(mode="json") for s in view.subtask_list],
    }


async def test_checkpoint_list_prints_a_table_newest_first(
    api: ApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await sluicegate("checkpoint", "list", "--url", api.url) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "ID", "STATUS", "ATTEMPT", "TRIGGERED", "DURATION", "FULL", "INCR",
        "ALIGN", "SYNC", "ASYNC", "REASON",
    ]  # fmt: skip
    assert [line.split()[0] for line in lines[1:]] == ["8", "7", "6"]
    assert lines[3].split() == [
        "6", "completed", "2", "2023-11-14T22:13:26Z", "0.50s", "24.0", "KiB", "1.0", "KiB",
        "0.01s", "0.02s", "0.30s", "-",
    ]  # fmt: skip
    assert lines[2].endswith("subtask a#0 declined")
    second_column_starts = {len(line) - len(line.split(maxsplit=1)[1]) for line in lines}
    assert second_column_starts == {len("ID  ")}, "columns are aligned"


async def test_checkpoint_list_json(
    api: ApiServer, view: FakeView, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await sluicegate("checkpoint", "list", "--url", api.url, "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c["checkpoint_id"] for c in listed] == [8, 7, 6]
    assert listed[2] == view.checkpoint_list[0].model_dump(mode="json")


def test_an_empty_checkpoint_list_says_so() -> None:
    assert render_checkpoints([]) == "no checkpoints"


async def test_checkpoint_trigger_prints_the_checkpoint_id(
    api: ApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await sluicegate("checkpoint", "trigger", "--url", api.url) == 0
    assert capsys.readouterr().out.startswith("checkpoint 9 triggered")


async def test_a_refused_trigger_exits_1_with_the_reason_and_what_to_do(
    api: ApiServer, view: FakeView, capsys: pytest.CaptureFixture[str]
) -> None:
    view.refusal = "checkpoint 8 is in flight"
    assert await sluicegate("checkpoint", "trigger", "--url", api.url) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "sluicegate: checkpoint refused: checkpoint 8 is in flight (HTTP 409 checkpoint_refused)",
        "what to do: Try again later; GET /checkpoints shows the checkpoint in flight and "
        "GET /status what the job is doing.",
    ]


async def test_stop_waits_and_says_where_the_job_resumes(
    api: ApiServer, view: FakeView, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await sluicegate("stop", "--url", api.url, "--timeout", "30") == 0
    assert capsys.readouterr().out == (
        "words stopped at checkpoint 9; starting it again resumes there\n"
    )
    assert view.stop_calls == [(True, 30.0)]
    assert await sluicegate("stop", "--url", api.url, "--no-checkpoint") == 0
    assert capsys.readouterr().out == (
        "words stopped without a final checkpoint (none was asked for); "
        "it resumes from checkpoint 7\n"
    )


@pytest.mark.parametrize(
    ("state", "says"),
    [
        ("stopping", "words is still stopping (done)"),
        ("failed", "words had failed: nothing to stop"),
    ],
)
async def test_a_stop_that_did_not_end_stopped_exits_1(
    api: ApiServer, view: FakeView, capsys: pytest.CaptureFixture[str], state: str, says: str
) -> None:
    view.stop_state = state
    assert await sluicegate("stop", "--url", api.url) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[0] == f"sluicegate: {says}"
    assert captured.err.splitlines()[1].startswith("what to do: ")


async def test_a_failing_coordinator_exits_1_without_internals(
    api: ApiServer, view: FakeView, capsys: pytest.CaptureFixture[str]
) -> None:
    view.failure = RuntimeError("/secret/path")
    assert await sluicegate("status", "--url", api.url) == 1
    err = capsys.readouterr().err
    assert "HTTP 500 internal_error" in err
    assert "what to do: Check the coordinator's log" in err
    assert "secret" not in err


async def test_a_url_that_is_not_the_api_exits_1_with_the_404(
    api: ApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await sluicegate("checkpoint", "list", "--url", f"{api.url}/v9") == 1
    err = capsys.readouterr().err
    assert "no such route: /v9/checkpoints (HTTP 404 not_found)" in err


@pytest.mark.parametrize(
    "argv",
    [("status",), ("status", "--json"), ("checkpoint", "list"), ("checkpoint", "trigger")],
)
async def test_an_unreachable_coordinator_exits_1_with_what_to_do(
    refused_url: str, argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert await sluicegate(*argv, "--url", refused_url) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"sluicegate: cannot reach the coordinator at {refused_url}: connection refused",
        f"what to do: Check that the coordinator is running and listening at {refused_url}. "
        f"Give its address with --url or ${URL_ENV}.",
    ]


async def test_a_url_that_is_not_http_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert await sluicegate("status", "--url", "127.0.0.1:8470") == 1
    assert "is not an http(s) URL" in capsys.readouterr().err


async def test_the_url_comes_from_the_environment_when_not_given(
    api: ApiServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(URL_ENV, api.url)
    assert await sluicegate("checkpoint", "trigger") == 0
    assert "checkpoint 9 triggered" in capsys.readouterr().out


def test_the_url_flag_beats_the_environment_which_beats_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    assert coordinator_url(None) == DEFAULT_URL == "http://127.0.0.1:8470"
    monkeypatch.setenv(URL_ENV, "http://coordinator:8470")
    assert coordinator_url(None) == "http://coordinator:8470"
    assert coordinator_url("http://elsewhere:1") == "http://elsewhere:1"


async def test_the_cli_sends_the_token_of_the_environment(
    view: FakeView, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "cli-token-0123456789abcdef"
    tokens = ApiTokens({token: Principal.granted("ops", [Scope.OPERATE])})
    server = await serve(create_app(view, CollectorRegistry(), tokens=tokens), "127.0.0.1", 0)
    try:
        monkeypatch.delenv("SLUICEGATE_API_TOKEN", raising=False)
        monkeypatch.delenv("SLUICEGATE_API_TOKEN_FILE", raising=False)
        assert await sluicegate("stop", "--url", server.url) == 1
        err = capsys.readouterr().err
        assert "needs a bearer token (Authorization: Bearer <token>) (HTTP 401 unauthorized)" in err
        assert "what to do: Set SLUICEGATE_API_TOKEN" in err
        assert view.stop_calls == []
        monkeypatch.setenv("SLUICEGATE_API_TOKEN", token)
        assert await sluicegate("stop", "--url", server.url, "--timeout", "1") == 0
        assert await sluicegate("checkpoint", "trigger", "--url", server.url) == 0
    finally:
        await server.stop()
    assert view.stop_calls == [(True, 1.0)]

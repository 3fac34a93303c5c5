"""A small synchronous client of the coordinator's HTTP API, for the CLI.

Standard library only (``urllib.request``), so the CLI needs nothing the coordinator does not.
Environment proxies are ignored: the coordinator is addressed directly.

Errors::

    SluicegateError
    ├── RetryableError
    │   └── CoordinatorUnreachableError   no HTTP answer at all (refused, timeout, bad host)
    ├── CoordinatorApiError               the coordinator answered with an error (or garbage);
    │                                     ``retryable`` says whether trying later may help
    └── FatalError
        └── ConfigError                   the URL is not an http(s) URL
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from sluicegate.coordinator.httpapi.savepoint_models import (
    FullCheckpointTriggered,
    SavepointDeleted,
    SavepointInfo,
)
from sluicegate.coordinator.httpapi.view import CheckpointInfo, JobStatus, SubtaskInfo, WorkerInfo
from sluicegate.operators.exceptions import ConfigError, RetryableError, SluicegateError

__all__ = ["CoordinatorApiError", "CoordinatorClient", "CoordinatorUnreachableError"]

T = TypeVar("T")

_RETRYABLE_STATUSES = frozenset({409, 429, 502, 503, 504})
_USER_AGENT = "sluicegate-cli"


class CoordinatorApiError(SluicegateError):
    """The coordinator answered with an error; its JSON error body, or what we made of it."""

    def __init__(self, status: int, message: str, what_to_do: str, error: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.what_to_do = what_to_do
        self.error = error or f"http_{status}"

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later (409 refused, 503 unavailable, ...)."""
        return self.status in _RETRYABLE_STATUSES


class CoordinatorUnreachableError(RetryableError):
    """No HTTP answer from ``url``: connection refused, timeout, unknown host, cut connection."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the coordinator at {url}: {reason}")
        self.url = url
        self.reason = reason
        self.what_to_do = f"Check that the coordinator is running and listening at {url}."


class CoordinatorClient:
    """Calls the coordinator's HTTP API at ``base_url`` (e.g. ``http://127.0.0.1:8470``)."""

    def __init__(
        self, base_url: str, *, token: str | None = None, timeout_seconds: float = 5.0
    ) -> None:
        """``token``: the bearer token sent with every request (None: send none)."""
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                "coordinator URL",
                f"{base_url!r} is not an http(s) URL; give one like http://127.0.0.1:8470",
            )
        self.base_url = base_url.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self._token = token
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def status(self) -> JobStatus:
        return self._get("/status", JobStatus)

    def workers(self) -> list[WorkerInfo]:
        return self._get("/workers", list[WorkerInfo])

    def subtasks(self) -> list[SubtaskInfo]:
        return self._get("/subtasks", list[SubtaskInfo])

    def checkpoints(self) -> list[CheckpointInfo]:
        """Checkpoints, newest first."""
        return self._get("/checkpoints", list[CheckpointInfo])

    def trigger_checkpoint(self) -> int:
        """Trigger a checkpoint; its id. A refusal is a `CoordinatorApiError` with status 409."""
        status, body = self._call("POST", "/checkpoints")
        answer = self._parse(status, body, dict[str, int])
        if "checkpoint_id" not in answer:
            raise _unexpected(status, "the answer has no checkpoint_id")
        return answer["checkpoint_id"]

    def stop(self, *, final_checkpoint: bool = True, wait_seconds: float = 0) -> JobStatus:
        """Stop the job gracefully; its status once stopped, or after ``wait_seconds``."""
        query = urllib.parse.urlencode(
            {"final_checkpoint": str(final_checkpoint).lower(), "wait_seconds": wait_seconds}
        )
        status, body = self._call("POST", f"/stop?{query}", extra_timeout=wait_seconds)
        return self._parse(status, body, JobStatus)

    def decide(
        self,
        agent: str,
        run_id: str,
        *,
        approved: bool,
        reason: str | None = None,
        call_id: str = "",
        force: bool = False,
    ) -> dict[str, object]:
        """Approve or reject the call run ``run_id`` of ``agent`` waits on; the decision as
        accepted (agent, run, topic). Who decides is the token's name. A refusal is a
        `CoordinatorApiError`: 404 unknown run, 409 not waiting, 403 a token without the
        ``approve`` scope."""
        verb = "approve" if approved else "reject"
        path = (
            f"/agents/{urllib.parse.quote(agent, safe='')}"
            f"/runs/{urllib.parse.quote(run_id, safe='')}/{verb}"
        )
        body = {"reason": reason, "call_id": call_id, "force": force}
        status, answer = self._call("POST", path, body=json.dumps(body).encode())
        return self._parse(status, answer, dict[str, object])

    def rollback(
        self,
        agent: str,
        run_id: str,
        *,
        to_step: int,
        reason: str | None = None,
        force: bool = False,
    ) -> dict[str, object]:
        """Ask run ``run_id`` of ``agent`` to undo the effects after ``to_step``; the command
        as accepted (agent, run, step, by, topic). Who asks is the token's name. A refusal is a
        `CoordinatorApiError`: 404 unknown run, 409 a rollback under way, 403 a token without
        the ``operate`` scope."""
        path = (
            f"/agents/{urllib.parse.quote(agent, safe='')}"
            f"/runs/{urllib.parse.quote(run_id, safe='')}/rollback"
        )
        body = {"to_step": to_step, "reason": reason, "force": force}
        status, answer = self._call("POST", path, body=json.dumps(body).encode())
        return self._parse(status, answer, dict[str, object])

    def trigger_full_checkpoint(self) -> int:
        """Trigger a full checkpoint (files shared with no other); its id. Refusals are 409."""
        status, body = self._call("POST", "/checkpoints/full")
        return self._parse(status, body, FullCheckpointTriggered).checkpoint_id

    def savepoints(self) -> list[SavepointInfo]:
        """Stored savepoints, then this coordinator's requests not stored yet."""
        return self._get("/savepoints", list[SavepointInfo])

    def savepoint(self, name: str) -> SavepointInfo:
        """One savepoint; a `CoordinatorApiError` with status 404 when there is none."""
        return self._get(f"/savepoints/{urllib.parse.quote(name, safe='')}", SavepointInfo)

    def create_savepoint(self, name: str | None = None, *, stop: bool = False) -> SavepointInfo:
        """Ask for a savepoint (``stop``: stop-with-savepoint); refusals are 409."""
        query = {"stop": str(stop).lower()} | ({"name": name} if name else {})
        status, body = self._call("POST", f"/savepoints?{urllib.parse.urlencode(query)}")
        return self._parse(status, body, SavepointInfo)

    def delete_savepoint(self, name: str) -> int:
        """Delete a savepoint; the number of files deleted."""
        path = f"/savepoints/{urllib.parse.quote(name, safe='')}"
        status, body = self._call("DELETE", path)
        return self._parse(status, body, SavepointDeleted).files

    def _get(self, path: str, shape: type[T]) -> T:
        status, body = self._call("GET", path)
        return self._parse(status, body, shape)

    def _call(
        self, method: str, path: str, *, extra_timeout: float = 0, body: bytes = b"{}"
    ) -> tuple[int, bytes]:
        """Send one request; the status and body of a 2xx answer, or raise. ``extra_timeout``:
        seconds the server is asked to wait before it answers."""
        timeout = self.timeout_seconds + extra_timeout
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if method == "POST":
            headers["Content-Type"] = "application/json"
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        # The scheme was checked to be http(s) in __init__.
        request = urllib.request.Request(  # noqa: S310
            self.base_url + path,
            data=body if method == "POST" else None,
            method=method,
            headers=headers,
        )
        try:
            with self._opener.open(request, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                raise _api_error(exc.code, exc.read()) from None
        except urllib.error.URLError as exc:
            raise CoordinatorUnreachableError(self.base_url, _describe(exc.reason)) from exc
        except TimeoutError as exc:
            raise CoordinatorUnreachableError(
                self.base_url, f"no answer within {timeout:g} s"
            ) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise CoordinatorUnreachableError(self.base_url, _describe(exc)) from exc

    @staticmethod
    def _parse(status: int, body: bytes, shape: type[T]) -> T:
        """``body`` as ``shape``. Fields this client does not know are ignored: a newer
        coordinator may add some, and an older CLI must still read its answers. Every field
        it knows is checked."""
        try:
            return TypeAdapter(shape).validate_json(body, extra="ignore")
        except ValidationError as exc:
            raise _unexpected(status, f"{exc.error_count()} problem(s) in the answer") from exc


def _api_error(status: int, body: bytes) -> CoordinatorApiError:
    """The error an HTTP error answer means: our JSON error body if it is one."""
    try:
        data: Any = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return CoordinatorApiError(
            status,
            data["message"],
            str(data.get("what_to_do") or ""),
            str(data.get("error") or ""),
        )
    text = body.decode("utf-8", "replace").strip()
    reason = http.client.responses.get(status, "error")
    return CoordinatorApiError(
        status,
        f"HTTP {status} {reason}" + (f": {text[:200]}" if text else ""),
        "Check that the URL points at a sluicegate coordinator, not at a proxy or other server.",
    )


def _unexpected(status: int, problem: str) -> CoordinatorApiError:
    return CoordinatorApiError(
        status,
        f"unexpected answer from the coordinator: {problem}",
        "Check that the URL points at a sluicegate coordinator of the same version as this CLI.",
        "unexpected_answer",
    )


def _describe(reason: object) -> str:
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    if isinstance(reason, TimeoutError):
        return "timed out"
    return str(reason) or type(reason).__name__

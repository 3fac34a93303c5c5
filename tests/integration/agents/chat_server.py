"""A real, scriptable model server on 127.0.0.1, for testing model clients.

It runs stdlib ``ThreadingHTTPServer`` in a thread, answers ``POST /v1/chat/completions`` (or,
given ``path=MESSAGES_PATH``, Anthropic's ``POST /v1/messages``) with the replies a test queued
(status, body, headers, optional delay), and records every request.
When the queue is empty it answers 404, which no client retries, so a test that sends more
requests than it scripted fails loudly.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = [
    "CHAT_PATH",
    "MESSAGES_PATH",
    "ChatServer",
    "RecordedRequest",
    "Reply",
    "anthropic_error",
    "completion",
    "error_body",
    "message",
]

CHAT_PATH = "/v1/chat/completions"
MESSAGES_PATH = "/v1/messages"


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer; ``delay_s`` holds it back (until the server stops, at most)."""

    status: int = 200
    body: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server saw it; header names are lower-case."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


def completion(
    content: str | None = None,
    *,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    model: str = "test-model",
) -> dict[str, Any]:
    """A chat-completion body; ``tool_calls`` are ``(id, name, arguments)`` triples."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}
            for id_, name, args in tool_calls
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """An error body in OpenAI's shape."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def message(
    *blocks: dict[str, Any],
    stop_reason: str = "end_turn",
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read_input_tokens: int = 0,
    model: str = "claude-test",
) -> dict[str, Any]:
    """A Messages API answer with content ``blocks`` (``{"type": "text", "text": ...}``,
    ``{"type": "tool_use", "id": ..., "name": ..., "input": {...}}``)."""
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(blocks),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cache_read_input_tokens,
        },
    }


def anthropic_error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """An error body in Anthropic's shape."""
    return {"type": "error", "error": {"type": kind, "message": message}}


class ChatServer:
    """Start with ``with ChatServer() as server:``; point clients at ``server.url`` (an
    OpenAI-style base URL) or ``server.root`` (Anthropic's SDK adds ``/v1/messages``)."""

    def __init__(self, path: str = CHAT_PATH) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        """Base URL for a client, ending in ``/v1``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def root(self) -> str:
        """The server's root URL."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order of arrival."""
        with self._lock:
            return list(self._requests)

    def script(self, *replies: Reply) -> None:
        """Queue ``replies``; each request takes the next one."""
        with self._lock:
            self._replies.extend(replies)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stopping.set()  # releases delayed replies
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _take(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            if request.path != self._path:
                return Reply(404, error_body(f"no route {request.path}"))
            if not self._replies:
                return Reply(404, error_body("chat_server: no scripted reply left"))
            return self._replies.popleft()


def _handler_for(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            recorded = RecordedRequest(
                method="POST",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=json.loads(raw) if raw else None,
            )
            reply = server._take(recorded)
            if reply.delay_s > 0 and server._stopping.wait(reply.delay_s):
                return
            payload = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler

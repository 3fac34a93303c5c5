"""A service for end-to-end tests of outcome-unknown paths: its write endpoint records the
``Idempotency-Key`` of every request as it arrives, and can HOLD the first write until the test
releases it, so that the test can kill the caller while the write is in flight.

* ``POST /write`` (header ``Idempotency-Key``): recorded in `HoldingService.writes` on arrival;
  the first one waits while `HoldingService.hold_first` until `HoldingService.release`; then it
  executes (no deduplication: every request does) and answers ``{"key", "written"}``, unless
  released with ``execute=False``: then the held write is dropped (answered 503, never run).
  With ``reset_first``, the first write executes and its connection is then reset (a TCP RST)
  instead of answered: the caller's client raises `ConnectionResetError` after the effect.
* ``GET /effects/<key>``: recorded in `HoldingService.lookups`; answers what the executed write
  of ``key`` left, ``{"key", "found": "by lookup", "written"}`` (404: none executed), so a tool
  with ``on_unknown=lookup`` can settle an outcome a crash hid, and the test can tell the
  lookup's result from the call's.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

__all__ = ["HoldingService"]

_HOLD_LIMIT_S = 300.0
"""A held write is let go after this long even if the test never releases it."""


class HoldingService:
    """The service; ``writes`` counts write requests per key (arrived, executed or not),
    ``executed`` the writes that ran, ``lookups`` lookups per key."""

    def __init__(self, *, hold_first: bool = True, reset_first: bool = False) -> None:
        self.writes: Counter[str] = Counter()
        self.executed: dict[str, dict[str, Any]] = {}
        self.lookups: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._holding = hold_first
        self._held: str | None = None
        self._released = threading.Event()
        self._execute_held = True
        self._resetting = reset_first
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                key = self.headers["Idempotency-Key"]
                with service._lock:
                    service.writes[key] += 1
                    hold, service._holding = service._holding, False
                    if hold:
                        service._held = key
                if hold:  # on the wire: the caller may die now, the write still executes
                    service._released.wait(_HOLD_LIMIT_S)
                    if not service._execute_held:
                        self._reply(503, {"error": "dropped"})
                        return
                with service._lock:
                    answer = {"key": key, "written": service.writes[key]}
                    service.executed[key] = answer
                    reset, service._resetting = service._resetting, False
                if reset:  # executed, and the answer lost on the way: a reset, not a reply
                    linger = struct.pack("ii", 1, 0)  # close with RST
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                    self.close_connection = True
                    self.connection.close()
                    return
                self._reply(200, answer)

            def do_GET(self) -> None:
                key = unquote(self.path.removeprefix("/effects/"))
                with service._lock:
                    service.lookups[key] += 1
                    answer = service.executed.get(key)
                if answer is None:
                    self._reply(404, {"error": "no such effect"})
                else:
                    self._reply(200, {"key": key, "found": "by lookup", **answer})

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the caller was killed while its write was held
                    self.close_connection = True

            def log_message(self, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def held(self) -> str | None:
        """The key of the write being held now; None before it arrived or once released."""
        with self._lock:
            return None if self._released.is_set() else self._held

    def release(self, *, execute: bool = True) -> None:
        """Let the held write go on (and any later one): executed, or dropped without running
        when not ``execute``."""
        self._execute_held = execute
        self._released.set()

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

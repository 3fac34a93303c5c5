"""A service for end-to-end tests whose writes are NOT deduplicated: it executes every call it
gets, slowly, and counts calls per ``Idempotency-Key`` (or body ``key``). ``GET
/effects/<key>`` answers what the call with that key answered (404: none executed), so a tool
can settle an outcome a crash hid (``on_unknown=lookup``)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from time import sleep
from typing import Any
from urllib.parse import unquote

__all__ = ["Ledger"]


class Ledger:
    """The service; ``calls`` counts executions per key, ``paths`` per request path."""

    def __init__(self, latency_s: float = 0.3) -> None:
        self.calls: Counter[str] = Counter()
        self.paths: Counter[str] = Counter()
        self.answers: dict[str, dict[str, Any]] = {}
        self.arrived: dict[str, float] = {}
        """When the first call with each key arrived (``time.time()``)."""
        self._lock = threading.Lock()
        ledger = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("Idempotency-Key") or body["key"]
                with ledger._lock:
                    ledger.arrived.setdefault(key, time.time())
                sleep(latency_s)  # a write on the wire, where a recovery may find it
                answer = {"ok": True, "path": self.path, **body}
                with ledger._lock:  # executed: every call, whatever its key
                    ledger.calls[key] += 1
                    ledger.paths[self.path] += 1
                    ledger.answers[key] = answer
                self._reply(200, answer)

            def do_GET(self) -> None:
                key = unquote(self.path.removeprefix("/effects/"))
                with ledger._lock:
                    answer = ledger.answers.get(key)
                self._reply(404, {"error": "no such effect"}) if answer is None else self._reply(
                    200, answer
                )

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def repeated(self) -> dict[str, int]:
        """Keys executed more than once."""
        with self._lock:
            return {key: n for key, n in self.calls.items() if n > 1}

    def in_flight(self) -> int:
        """Calls that arrived and have not executed yet: writes on the wire."""
        with self._lock:
            return sum(1 for key in self.arrived if key not in self.calls)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

"""A real HTTP server receiving operator alerts (`agents.alerts`), for integration and
end-to-end tests: it records every POST with its ``Idempotency-Key``."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["AlertReceiver"]


class AlertReceiver:
    """Answers every POST 200 (the first ``fail_first`` with 503) and keeps it in ``alerts``;
    ``keys`` counts the POSTs answered 200 per ``Idempotency-Key``. Close it when done."""

    def __init__(self, *, fail_first: int = 0) -> None:
        self.alerts: list[tuple[str, dict[str, Any]]] = []
        self.keys: Counter[str] = Counter()
        self.refused = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("Idempotency-Key", "")
                with receiver._lock:
                    failing = receiver.refused < fail_first
                    if failing:
                        receiver.refused += 1
                    else:
                        receiver.alerts.append((key, body))
                        receiver.keys[key] += 1
                self.send_response(503 if failing else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/alerts"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def received(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return list(self.alerts)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

"""`SoakLedger`: the HTTP service the soak's tools write to, recording every effect by key.

* ``GET /orders/<run>``: a read (no effect), counted in ``reads``.
* ``POST /dedup/<kind>`` (header ``Idempotency-Key``): a deduplicating write: the first call
  with a key executes, a later one is answered what the first answered and counted
  ``deduplicated`` (a tool that relies on the service's deduplication).
* ``POST /write/<kind>``: a write that executes EVERY call (no deduplication); a key
  executed twice is a duplicate effect, which the soak must never see. ``GET /effects/<kind>/<key>``
  answers what the executed write of ``key`` answered (404: none), counted ``found`` /
  ``not_found``,
  so a tool with ``on_unknown=lookup`` can settle an outcome a crash hid.

Each write sleeps ``latency_s`` on the wire before it executes, and carries the caller's PID
(header ``X-Caller-Pid``): `SoakLedger.in_flight` tells the harness which process has a write
in flight right now, so that it can SIGKILL that process mid-write.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

__all__ = ["SoakLedger"]


class SoakLedger:
    """The service, in threads of the harness; ``executed[kind][key]`` counts executions."""

    def __init__(self, latency_s: float = 0.1) -> None:
        self.executed: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.arrivals: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.outcomes: defaultdict[str, Counter[str]] = defaultdict(Counter)
        """Per kind: ``executed``, ``deduplicated``, ``found``, ``not_found``."""
        self.reads = 0
        self.runs_by_key: dict[str, str] = {}
        self._answers: dict[str, dict[str, Any]] = {}
        self._in_flight: dict[int, int] = {}
        self._lock = threading.Lock()
        ledger = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/orders/"):
                    with ledger._lock:
                        ledger.reads += 1
                    self._reply(200, {"order": self.path.removeprefix("/orders/")})
                    return
                kind, _, quoted = self.path.removeprefix("/effects/").partition("/")
                key = unquote(quoted)
                with ledger._lock:
                    answer = ledger._answers.get(key)
                    ledger.outcomes[kind]["not_found" if answer is None else "found"] += 1
                if answer is None:
                    self._reply(404, {"error": "no such effect"})
                else:
                    self._reply(200, answer)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers["Idempotency-Key"]
                dedup, kind = self.path.strip("/").split("/", 1)
                pid = int(self.headers.get("X-Caller-Pid") or 0)
                with ledger._lock:
                    ledger.arrivals[kind][key] += 1
                    ledger.runs_by_key[key] = str(body.get("run_id"))
                    stored = ledger._answers.get(key) if dedup == "dedup" else None
                    if stored is not None:
                        ledger.outcomes[kind]["deduplicated"] += 1
                    else:
                        ledger._in_flight[pid] = ledger._in_flight.get(pid, 0) + 1
                if stored is not None:
                    self._reply(200, stored)
                    return
                time.sleep(latency_s)  # on the wire: the harness may kill the caller now
                with ledger._lock:
                    ledger._in_flight[pid] -= 1
                    ledger.executed[kind][key] += 1
                    ledger.outcomes[kind]["executed"] += 1
                    answer = {"ok": True, "kind": kind, "key": key, **body}
                    ledger._answers[key] = answer
                self._reply(200, answer)

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the caller was killed while its write was on the wire
                    self.close_connection = True

            def log_message(self, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def in_flight(self) -> set[int]:
        """PIDs of the processes with a write on the wire now (arrived, not executed)."""
        with self._lock:
            return {pid for pid, n in self._in_flight.items() if n > 0 and pid}

    def duplicates(self, kinds: set[str]) -> dict[str, int]:
        """Keys of ``kinds`` executed more than once: effects that happened twice."""
        with self._lock:
            return {k: n for kind in kinds for k, n in self.executed[kind].items() if n > 1}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

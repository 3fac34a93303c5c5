"""The test MCP server (`tests/mcp_tool_server.py`) as a process: its command line, an HTTP
server started and stopped by a test, and its ledger read back."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluicegate.devkafka.broker import free_port

__all__ = ["SERVER", "HttpMcpServer", "ledger_lines", "running_http_server", "stdio_command"]

SERVER = Path(__file__).with_name("mcp_tool_server.py")


def stdio_command(ledger: Path, without: Sequence[str] = ()) -> list[str]:
    extra = [arg for tool in without for arg in ("--without", tool)]
    return [sys.executable, str(SERVER), "--ledger", str(ledger), *extra]


def ledger_lines(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]


@dataclass
class HttpMcpServer:
    """One process serving streamable HTTP on ``port``; `start` again after `kill`."""

    ledger: Path
    port: int
    without: Sequence[str] = ()
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, timeout_s: float = 30.0) -> None:
        command = [*stdio_command(self.ledger, self.without), "--transport", "http"]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout_s
        while True:  # wait on the port accepting, with a deadline
            if self.process.poll() is not None:
                raise AssertionError(f"MCP server exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("MCP server did not listen in time") from None
                time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@contextmanager
def running_http_server(ledger: Path, without: Sequence[str] = ()) -> Iterator[HttpMcpServer]:
    server = HttpMcpServer(ledger, free_port(), without)
    server.start()
    try:
        yield server
    finally:
        server.kill()

"""``sluicegate up``: the embedded single-machine mode.

Starts (unless ``SLUICEGATE_KAFKA_BOOTSTRAP`` names a cluster) the development broker, then the
coordinator and ``N`` workers as child processes whose output lines are prefixed with their
name. A worker that exits is started again (as a process supervisor or Kubernetes would); the
coordinator exiting ends the whole group, with its exit code (0 after ``sluicegate stop``).
Ctrl-C (or SIGTERM) stops every child, then the broker; ``up`` then exits with 130 (143).

The children's output is read in chunks and split into lines here (`LineSplitter`), never with
a line reader that gives up on a long line: a pump that stopped reading would let the pipe fill
and block the child in write(2) for good. A line longer than `MAX_LINE_BYTES` is cut, with a
note of how much was left out.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = ["MAX_LINE_BYTES", "Child", "LineSplitter", "Supervisor"]

logger = logging.getLogger(__name__)

_RESTART_DELAY_S = 1.0
_READ_BYTES = 64 * 1024

MAX_LINE_BYTES = 16 * 1024
"""The longest line relayed whole; a longer one keeps its head and a note."""


class LineSplitter:
    """Splits a byte stream into lines of at most ``max_line`` bytes (sans-IO).

    An over-long line keeps its first ``max_line`` bytes and ends with a note of how many bytes
    were left out; its rest is dropped as it arrives, so memory stays bounded whatever the
    stream holds.
    """

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._max = max_line
        self._buffer = bytearray()
        self._dropped = 0
        """Bytes dropped from the current line; > 0: its head is in the buffer, cut."""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes, without their newline."""
        lines: list[bytes] = []
        while chunk:
            newline = chunk.find(b"\n")
            part, chunk = (chunk, b"") if newline < 0 else (chunk[:newline], chunk[newline + 1 :])
            room = self._max - len(self._buffer)
            self._buffer += part[:room]
            self._dropped += max(0, len(part) - room)
            if newline >= 0:
                lines.append(self._take())
        return lines

    def flush(self) -> list[bytes]:
        """At the end of the stream: the last line if it had no newline."""
        return [self._take()] if self._buffer or self._dropped else []

    def _take(self) -> bytes:
        line = bytes(self._buffer)
        if self._dropped:
            total = len(line) + self._dropped
            line += f"… [line cut: {self._dropped} of {total} bytes left out]".encode()
        self._buffer.clear()
        self._dropped = 0
        return line


@dataclass
class Child:
    """One child process: its name, its command line, and whether to restart it on exit."""

    name: str
    argv: Sequence[str]
    restart: bool
    process: asyncio.subprocess.Process | None = None
    starts: int = 0
    pump: asyncio.Task[None] | None = field(default=None, repr=False)


class Supervisor:
    """Runs `Child` processes with prefixed output until one that must not restart exits."""

    def __init__(
        self, children: Sequence[Child], env: dict[str, str], *, log_path: Path | None = None
    ) -> None:
        """``log_path``: write the children's prefixed output there instead of to stdout."""
        self.children = list(children)
        self._env = {**os.environ, **env}
        self._log_path = log_path

    async def run(self) -> int:
        """Start every child; return the exit code of the first non-restartable one to exit,
        or ``128 + signum`` once SIGINT or SIGTERM has stopped every child.

        The signals are handled on the event loop while it runs, not by raising in whatever
        it awaits: the children's output must still be relayed while they stop, else a child
        that logs as it stops blocks on a full pipe until it is killed.
        """
        loop = asyncio.get_running_loop()
        signals: list[int] = []
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig in previous:
            loop.add_signal_handler(sig, signals.append, sig)
        try:
            for child in self.children:
                await self._start(child)
            while not signals:
                for child in self.children:
                    assert child.process is not None
                    code = child.process.returncode
                    if code is None:
                        continue
                    if not child.restart:
                        self._say(f"[{child.name}] exited with {code}; stopping")
                        return code  # 0: the job was stopped (`sluicegate stop`)
                    self._say(f"[{child.name}] exited with {code}; restarting")
                    await asyncio.sleep(_RESTART_DELAY_S)
                    await self._start(child)
                await asyncio.sleep(0.2)
            self._say(f"{signal.Signals(signals[0]).name}: stopping every child")
            return 128 + signals[0]
        finally:
            try:
                await self.stop()
            finally:
                for sig, handler in previous.items():
                    loop.remove_signal_handler(sig)
                    signal.signal(sig, handler)

    async def stop(self) -> None:
        """SIGTERM every running child, then SIGKILL those still alive after 20 s."""
        running = [c.process for c in self.children if c.process and c.process.returncode is None]
        for process in running:
            process.terminate()
        for process in running:
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()
        for child in self.children:
            if child.pump is not None:
                await asyncio.gather(child.pump, return_exceptions=True)

    def _say(self, line: str) -> None:
        if self._log_path is None:
            print(line, flush=True)
        else:
            with self._log_path.open("a") as out:
                out.write(line + "\n")

    async def _start(self, child: Child) -> None:
        child.process = await asyncio.create_subprocess_exec(
            *child.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=self._env,
        )
        child.starts += 1
        child.pump = asyncio.create_task(self._pump(child, child.process))

    async def _pump(self, child: Child, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        out = self._log_path.open("a") if self._log_path else sys.stdout
        splitter = LineSplitter()
        try:
            while chunk := await process.stdout.read(_READ_BYTES):
                self._relay(out, child.name, splitter.feed(chunk))
            self._relay(out, child.name, splitter.flush())
        except Exception:  # keep the group running: a lost pump would wedge the child
            logger.exception("relaying the output of %s failed", child.name)
            while await process.stdout.read(_READ_BYTES):
                pass  # drain, so the child never blocks writing
        finally:
            if out is not sys.stdout:
                out.close()

    @staticmethod
    def _relay(out: IO[str], name: str, lines: list[bytes]) -> None:
        for line in lines:
            out.write(f"[{name}] {line.decode(errors='replace')}\n")
        if lines:
            out.flush()

"""``sluicegate up``: the embedded single-machine mode.

Starts (unless ``SLUICEGATE_KAFKA_BOOTSTRAP`` names a cluster) the development broker, then the
coordinator and ``N`` workers as child processes whose output lines are prefixed with their
name. A worker that exits is started again (as a process supervisor or Kubernetes would); the
coordinator exiting ends the whole group, with its exit code (0 after ``sluicegate stop``).
Ctrl-C (or SIGTERM) stops every child, then the broker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Child", "Supervisor"]

logger = logging.getLogger(__name__)

_RESTART_DELAY_S = 1.0


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
        """Start every child; return the exit code of the first non-restartable one to exit."""
        try:
            for child in self.children:
                await self._start(child)
            while True:
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
        finally:
            await self.stop()

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
        try:
            async for line in process.stdout:
                out.write(f"[{child.name}] {line.decode(errors='replace')}")
                out.flush()
        finally:
            if out is not sys.stdout:
                out.close()

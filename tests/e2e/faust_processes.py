"""faust-streaming's own worker (``faust -A <module> worker``) as child processes of a test,
each in its own session, SIGKILLed by its process id: the side of the comparison that runs the
same faust app without sluicegate."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

__all__ = ["FaustWorkers"]


class FaustWorkers:
    """Workers of faust app module ``module`` (tag, broker and data folder from the
    environment its apps read: ``FAUST_APP_TAG``, ``FAUST_APP_BROKER``, ``FAUST_APP_DATA_DIR``)."""

    def __init__(self, tmp_path: Path, module: str, tag: str, bootstrap: str) -> None:
        self.module, self.tag, self.bootstrap = module, tag, bootstrap
        self.root = tmp_path / "faust"
        self.root.mkdir()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.starts = 0

    def start(self, name: str) -> None:
        self.starts += 1
        data = self.root / f"data-{name}"
        env = {
            **os.environ,
            "FAUST_APP_TAG": self.tag,
            "FAUST_APP_BROKER": f"kafka://{self.bootstrap}",
            "FAUST_APP_DATA_DIR": str(data),
        }
        faust = Path(sys.executable).parent / "faust"
        log = (self.root / f"{name}.{self.starts}.log").open("wb")
        self.processes[name] = subprocess.Popen(
            [str(faust), "-A", self.module, "worker", "--loglevel", "warn", "--without-web"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()

    def kill(self, name: str) -> None:
        """SIGKILL worker ``name`` (its own process id) and reap it."""
        process = self.processes.pop(name)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"faust worker {name} exited with {process.returncode}:\n"
                                   + self.log_tail())  # fmt: skip

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(
            f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
            for log in sorted(self.root.glob("*.log"))
        )

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.kill(name)

"""Running a pipeline's coordinator and workers as real child processes, for benchmarks.

`ProcessCluster` writes a one-line pipeline module into its folder (put on ``PYTHONPATH``),
starts ``sluicegate coordinator`` and ``sluicegate worker`` processes with
``SLUICEGATE_KAFKA_BOOTSTRAP``, ``SLUICEGATE_STORAGE_URL`` (``<root>/storage``) and
``SLUICEGATE_STATE_DIR`` (``<root>/state``), each logging to ``<root>/logs/<name>.<n>.log``,
and kills every child it started on exit (also on Ctrl-C; children get SIGKILL from Linux if
the benchmark itself dies). `kafka_bootstrap` gives ``SLUICEGATE_KAFKA_BOOTSTRAP`` when set,
else starts the development broker on a free port of 127.0.0.1.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType

from sluicegate.devkafka import DevBroker

__all__ = ["ProcessCluster", "kafka_bootstrap", "log_times"]

_REPO = Path(__file__).resolve().parent.parent
_PR_SET_PDEATHSIG = 1
_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \S+: (.*)$")


@contextmanager
def kafka_bootstrap() -> Iterator[str]:
    """``SLUICEGATE_KAFKA_BOOTSTRAP`` if set, else a development broker for the duration."""
    given = os.environ.get("SLUICEGATE_KAFKA_BOOTSTRAP")
    if given:
        yield given
        return
    with DevBroker(port=0) as broker:
        yield broker.bootstrap


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGKILL it when the benchmark dies."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ProcessCluster:
    """A coordinator and workers of ``graph_expr`` as child processes; a context manager.

    ``graph_expr`` is Python evaluated in the pipeline module after ``imports``, e.g.
    ``imports="from bench.recovery import state_graph"``, ``graph_expr="state_graph('ab12')"``.
    """

    def __init__(self, root: Path, bootstrap: str, imports: str, graph_expr: str) -> None:
        self.root = root
        self.storage_dir = root / "storage"
        self.state_dir = root / "state"
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        module = f"bench_pipeline_{os.getpid()}_{id(self):x}"
        (root / f"{module}.py").write_text(f"{imports}\ngraph = {graph_expr}\n")
        self.spec = f"{module}:graph"
        path = [str(root), str(_REPO), os.environ.get("PYTHONPATH", "")]
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in path if p),
            "SLUICEGATE_KAFKA_BOOTSTRAP": bootstrap,
            "SLUICEGATE_STORAGE_URL": str(self.storage_dir),
            "SLUICEGATE_STATE_DIR": str(self.state_dir),
        }
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.log_paths: dict[str, Path] = {}
        self._starts: Counter[str] = Counter()

    def start_coordinator(
        self, *, interval: float, heartbeat_timeout: float = 6.0, settle: float | None = None
    ) -> None:
        """``settle``: its ``--settle`` (None: the default)."""
        args = ["coordinator", "--interval", str(interval), "--http-port", "0"]
        args += ["--heartbeat-timeout", str(heartbeat_timeout)]
        self._start("coordinator", args + ([] if settle is None else ["--settle", str(settle)]))

    def start_worker(
        self, worker_id: str, *, slots: int, extra: Sequence[str] = ()
    ) -> subprocess.Popen[bytes]:
        args = ["worker", "--worker-id", worker_id, "--slots", str(slots), *extra]
        return self._start(worker_id, args)

    def _start(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        self._starts[name] += 1
        self.log_paths[name] = self.logs / f"{name}.{self._starts[name]}.log"
        with self.log_paths[name].open("wb") as log:
            self.processes[name] = subprocess.Popen(
                [sys.executable, "-m", "sluicegate", *args, "--pipeline", self.spec],
                env=self.env,
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        return self.processes[name]

    def kill(self, name: str) -> float:
        """SIGKILL ``name``; returns the wall time (``time.time()``) just before the signal."""
        process = self.processes.pop(name)
        killed_at = time.time()
        process.send_signal(signal.SIGKILL)
        process.wait()
        return killed_at

    def check_alive(self) -> None:
        """Raise with the tail of its log if a child exited."""
        for name, process in self.processes.items():
            if process.poll() is not None:
                tail = self.log_paths[name].read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
            process.wait()
        self.processes.clear()

    def __enter__(self) -> ProcessCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()


def log_times(log: Path) -> list[tuple[float, str]]:
    """``(wall time, message)`` of every line of a sluicegate process log (ms resolution)."""
    lines: list[tuple[float, str]] = []
    for line in log.read_text(errors="replace").splitlines():
        if match := _LOG_LINE.match(line):
            stamp = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            lines.append((stamp, match[2]))
    return lines

"""A coordinator and workers as real child processes of an end-to-end test."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.testing import word_count
from tests.helpers import wait_for_sync

__all__ = ["Cluster", "WordCountJob", "start_word_count", "word_count_module"]


def word_count_module(tag: str) -> str:
    """The source of a pipeline module for `Cluster`: the demo word count of ``tag``."""
    return f"from sluicegate.testing import word_count\ngraph = word_count({tag!r})\n"


@dataclass(frozen=True, slots=True)
class WordCountJob:
    """The demo word count of ``tag`` running in ``cluster``; ``lines`` to produce, and the
    counts they make."""

    tag: str
    cluster: Cluster
    lines: list[str]
    expected: Counter[str]


async def start_word_count(
    bootstrap: str,
    tmp_path: Path,
    made: list[Cluster],
    vocabulary: Sequence[str],
    seed: int,
    count: int = 6000,
) -> WordCountJob:
    """A new word count in a coordinator and workers w1 and w2 (appended to ``made``, which
    stops them), with ``count`` random lines of ``vocabulary`` not produced yet."""
    rng = random.Random(seed)
    tag = uuid.uuid4().hex[:8]
    await ensure_topics(bootstrap, word_count(tag))
    lines = [" ".join(rng.choices(vocabulary, k=rng.randint(1, 3))) for _ in range(count)]
    cluster = Cluster(tmp_path, word_count_module(tag), bootstrap)
    made.append(cluster)
    for name in ("coordinator", "w1", "w2"):
        cluster.start(name)
    return WordCountJob(tag, cluster, lines, Counter(w for line in lines for w in line.split()))


class Cluster:
    """A coordinator and workers as child processes of the test."""

    def __init__(
        self,
        tmp_path: Path,
        pipeline: str,
        bootstrap: str,
        slots: int = 2,
        env: dict[str, str] | None = None,
        worker_args: Sequence[str] = (),
    ) -> None:
        """``pipeline``: the source of a module that defines ``graph`` (written to tmp_path);
        ``worker_args``: given to every worker (e.g. ``--state-changelog``)."""
        self.slots = slots
        self.worker_args = tuple(worker_args)
        module = f"pipeline_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{module}.py").write_text(pipeline)
        self.spec = f"{module}:graph"
        self.logs = tmp_path / "logs"
        self.logs.mkdir()
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
            "SLUICEGATE_KAFKA_BOOTSTRAP": bootstrap,
            "SLUICEGATE_STORAGE_URL": str(tmp_path / "storage"),
            "SLUICEGATE_STATE_DIR": str(tmp_path / "state"),
            **(env or {}),
        }
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.starts: Counter[str] = Counter()

    def log_tails(self, lines: int = 40) -> str:
        """The last ``lines`` lines of every process log, for a failure's message."""
        tails = []
        for log in sorted(self.logs.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            tails.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(tails)

    def log_lines(self, name: str, *texts: str) -> str:
        """The lines of ``name``'s logs (every start, in order) that contain one of ``texts``,
        each after its log's name: e.g. what each coordinator decided, for a failure's message."""
        found = []
        for log in sorted(self.logs.glob(f"{name}.*.log"), key=_log_order):
            lines = log.read_text(errors="replace").splitlines()
            found += [f"{log.name}: {line}" for line in lines if any(t in line for t in texts)]
        return "\n".join(found)

    def start(self, name: str, *extra: str) -> None:
        """Start ``name`` (``coordinator``, another name starting so for a second
        coordinator, or a worker id), with ``extra`` arguments."""
        if name.startswith("coordinator"):
            args = ["coordinator", "--interval", "0.5", "--heartbeat-timeout", "3"]
            args += ["--http-port", "0", *extra]
        else:
            args = ["worker", "--worker-id", name, "--slots", str(self.slots)]
            args += [*self.worker_args, *extra]
        self.starts[name] += 1
        log = (self.logs / f"{name}.{self.starts[name]}.log").open("wb")
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", "sluicegate", *args, "--pipeline", self.spec],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    def api_url(self, timeout_s: float = 30, name: str = "coordinator") -> str:
        """The HTTP API of coordinator ``name``'s latest start (it listens on a port the OS
        picks)."""

        def address() -> str | None:
            found = self.api_address(name)
            if found is None:
                self.alive()
            return found

        return wait_for_sync(
            address,
            timeout_s=timeout_s,
            interval_s=0.1,
            what="the coordinator to print its API address",
        )

    def api_address(self, name: str = "coordinator") -> str | None:
        """The HTTP API of coordinator ``name``'s latest start; None until it printed it."""
        log = self.logs / f"{name}.{self.starts[name]}.log"
        for line in log.read_text().splitlines():
            if line.startswith("coordinator API at "):
                return line.removeprefix("coordinator API at ").strip()
        return None

    def stop_job(self) -> str:
        """``sluicegate stop`` against the coordinator; what it printed. The stop and the
        coordinator's process must both end with 0 (the workers stay up, idle)."""
        stop = subprocess.run(
            [sys.executable, "-m", "sluicegate", "stop", "--url", self.api_url()],
            env=self.env, capture_output=True, text=True, timeout=150, check=False,
        )  # fmt: skip
        assert stop.returncode == 0, stop.stderr
        assert self.processes.pop("coordinator").wait(timeout=30) == 0
        return stop.stdout

    def kill(self, name: str) -> bool:
        """SIGKILL ``name``; it no longer counts as one that must stay alive. False when it
        had ended already (a fault point may have killed it)."""
        process = self.processes.pop(name)
        running = process.poll() is None
        process.send_signal(signal.SIGKILL)
        process.wait()
        return running

    def alive(self) -> None:
        self.revive(())

    def revive(self, names: Collection[str]) -> int:
        """Start again each of ``names`` that SIGKILL ended (a fault point), as ``up`` would;
        any other ended process fails the test. One look at each process, so a death between
        two looks cannot count as unexpected. How many were started again."""
        ended = [(n, p.returncode) for n, p in self.processes.items() if p.poll() is not None]
        for name, code in ended:
            if name not in names or code != -signal.SIGKILL:
                tail = sorted(self.logs.glob(f"{name}.*.log"))[-1].read_text()[-3000:]
                pytest.fail(f"{name} exited with {code}:\n{tail}")
            del self.processes[name]
            self.start(name)
        return len(ended)

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
            process.wait()


def _log_order(log: Path) -> tuple[str, int]:
    """Process name, then start (``coordinator.10.log`` after ``coordinator.9.log``)."""
    name, start, _ = log.name.rsplit(".", 2)
    return name, int(start)

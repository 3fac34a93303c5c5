"""`bench.cpu`: CPU seconds of real processes read from /proc, and the broker found by the port
it listens on (here: a socket this test listens on)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from bench.cpu import BrokerCpu, CpuSpan, broker_pid, process_cpu, tree_cpu


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_process_cpu_counts_what_a_process_used() -> None:
    before = process_cpu(os.getpid())
    _burn(0.2)
    after = process_cpu(os.getpid())
    assert before is not None
    assert after is not None
    assert after - before >= 0.15


def test_process_cpu_of_no_process_is_none() -> None:
    assert process_cpu(2**22 + 12345) is None


def test_the_broker_is_the_process_listening_on_the_bootstrap_port() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert broker_pid(f"127.0.0.1:{port},other:9092") == os.getpid()
        cpu = BrokerCpu(f"127.0.0.1:{port}")
        cpu.start()
        _burn(0.1)
        used = cpu.seconds()
        assert used is not None
        assert used >= 0.05
    assert broker_pid(f"127.0.0.1:{port}") is None  # closed: nobody listens
    assert broker_pid("no-port") is None
    assert BrokerCpu("no-port").seconds() is None


def test_a_span_adds_the_children_doing_the_work() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nt = time.process_time() + 0.3\n"
         "while time.process_time() < t: pass\nsys.stdin.read()"],
        stdin=subprocess.PIPE,
    )  # fmt: skip
    try:
        span = CpuSpan("no-port", pids=[child.pid])
        span.start()
        deadline = time.monotonic() + 30
        while (process_cpu(child.pid) or 0) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        ours, broker = span.stop()
    finally:
        child.communicate(b"", timeout=30)
    assert broker is None
    assert ours >= 0.2  # the child's burn, counted although it ran in another process


def test_a_tree_counts_the_grandchild_doing_the_work() -> None:
    # as `uv run` does: the process started waits while its own child works
    burner = (
        "import sys, time\\nt = time.process_time() + 0.3\\n"
        "while time.process_time() < t: pass\\nprint('burnt', flush=True)\\nsys.stdin.read()"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c",
         f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', \"{burner}\"])"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline() == b"burnt\n"  # the grandchild has burnt its 0.3 s
        own = process_cpu(parent.pid)
        assert own is not None
        assert own < 0.2  # the parent itself only waited
        assert tree_cpu([parent.pid]) >= own + 0.25
        assert tree_cpu([]) == 0.0
    finally:
        parent.communicate(b"", timeout=30)

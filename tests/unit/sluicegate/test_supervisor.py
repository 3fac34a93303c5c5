"""Supervisor (``sluicegate up``): the coordinator's exit ends the group with its exit code, and
every other child is stopped. Real child processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sluicegate.cli.supervisor import MAX_LINE_BYTES, Child, LineSplitter, Supervisor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.mark.parametrize("code", [0, 3])
async def test_the_coordinator_exit_code_is_the_groups(code: int, tmp_path: Path) -> None:
    # The coordinator exits 0 after `sluicegate stop`, non-zero when the job failed.
    coordinator = [sys.executable, "-c", f"import time; time.sleep(0.5); raise SystemExit({code})"]
    worker = Child("worker-1", SLEEPER, restart=True)
    log = tmp_path / "up.log"
    supervisor = Supervisor(
        [Child("coordinator", coordinator, restart=False), worker], {}, log_path=log
    )

    assert await supervisor.run() == code

    assert worker.process is not None
    assert worker.process.returncode == -15  # SIGTERM: stopped with the group
    assert f"[coordinator] exited with {code}; stopping" in log.read_text().splitlines()


# Prints a 4 MB line with no newline, then short lines; on SIGTERM it prints 200 KB more (more
# than a pipe holds) before it exits 0, as a worker logs while it stops.
CHATTY = """
import signal, sys, time

def bye(signum, frame):
    for i in range(2000):
        print(f"bye {i} " + "x" * 100)
    sys.stdout.flush()
    raise SystemExit(0)

signal.signal(signal.SIGTERM, bye)
sys.stdout.buffer.write(b"\\xff" * 4_000_000)
sys.stdout.flush()
for i in range(3):
    print(f"after {i}", flush=True)
while True:
    time.sleep(1)
"""

# `sluicegate up` in small.
UP = """
import asyncio, sys
from pathlib import Path
from sluicegate.cli.supervisor import Child, Supervisor

children = [
    Child("coordinator", [sys.executable, "-c", "import time; time.sleep(120)"], restart=False),
    Child("worker-1", [sys.executable, "-c", sys.argv[2]], restart=True),
]
code = asyncio.run(Supervisor(children, {}, log_path=Path(sys.argv[1])).run())
print(f"up stopped: {code}", flush=True)
"""


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)


def test_one_bad_record_wedges_a_worker_no_more_a_huge_line_is_cut_and_relaying_goes_on(
    tmp_path: Path,
) -> None:
    log = tmp_path / "up.log"
    log.touch()
    up = subprocess.Popen(
        [sys.executable, "-c", UP, str(log), CHATTY],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: "[worker-1] after 2\n" in log.read_text(errors="replace"), "relay", 30)
        up.send_signal(signal.SIGTERM)
        output, _ = up.communicate(timeout=15)  # well before stop's 20 s SIGKILL
    finally:
        up.kill()
        up.wait()
    assert "up stopped: 143" in output
    lines = log.read_text(errors="replace").splitlines()
    huge = [line for line in lines if line.startswith("[worker-1] \ufffd")]
    assert len(huge) == 1
    assert huge[0].endswith(f"… [line cut: {4_000_007 - MAX_LINE_BYTES} of 4000007 bytes left out]")
    assert len(huge[0]) < MAX_LINE_BYTES + 100
    assert "[worker-1] after 1" in lines
    assert "[worker-1] bye 1999 " + "x" * 100 in lines  # it stopped on SIGTERM, not SIGKILL


def test_line_splitter_cuts_long_lines_across_chunks() -> None:
    splitter = LineSplitter(max_line=10)
    assert splitter.feed(b"abc\nde") == [b"abc"]
    assert splitter.feed(b"f" * 30) == []
    assert splitter.feed(b"x\nshort\n0123456789\n") == [
        "deffffffff… [line cut: 23 of 33 bytes left out]".encode(),
        b"short",
        b"0123456789",
    ]
    assert splitter.feed(b"tail") == []
    assert splitter.flush() == [b"tail"]
    assert splitter.flush() == []

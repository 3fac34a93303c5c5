"""Supervisor (``sluicegate up``): the coordinator's exit ends the group with its exit code, and
every other child is stopped. Real child processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sluicegate.cli.supervisor import Child, Supervisor

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

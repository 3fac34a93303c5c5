"""The ``sluicegate`` command ends with its own exit code, never an abort at interpreter exit.

obstore's tokio threads could still be handing a result back to Python when a short command
returned; CPython ended such a thread inside Rust code during finalization, which aborted the
process (exit 134) in about one run in three of ``blobs list`` or ``savepoint list``, after the
command had printed its result (`sluicegate.cli.main.console`). Twelve runs of the bug's
command all passing has a chance below 1% with the bug present.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUNS = 12


def test_a_storage_command_exits_with_its_own_code_every_time(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "sluicegate", "blobs", "list", "--storage", str(tmp_path)]
    runs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(RUNS)
    ]
    results = [(run.wait(timeout=120), run.communicate()) for run in runs]
    assert [code for code, _ in results] == [0] * RUNS, [err for _, (_, err) in results]
    assert all(out.strip() == b"no blobs" for _, (out, _) in results)


def test_usage_errors_and_help_keep_argparse_s_exit_codes() -> None:
    usage = subprocess.run([sys.executable, "-m", "sluicegate", "nonsense"], capture_output=True)
    assert usage.returncode == 2
    assert b"invalid choice" in usage.stderr
    helped = subprocess.run([sys.executable, "-m", "sluicegate", "--help"], capture_output=True)
    assert helped.returncode == 0
    assert b"usage: sluicegate" in helped.stdout

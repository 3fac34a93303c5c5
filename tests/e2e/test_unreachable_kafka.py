"""A wrong bootstrap: ``sluicegate worker`` and ``coordinator`` keep retrying with backoff and
say so in one line per attempt, instead of a traceback and an exit. Real processes pointed at a
port nothing listens on."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sluicegate.devkafka import free_port


@pytest.mark.parametrize("command", ["worker", "coordinator"])
def test_a_wrong_bootstrap_prints_a_traceback_and_exits_no_more(
    command: str, tmp_path: Path
) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    stderr = tmp_path / "stderr.log"
    extra = ["--worker-id", "w1"] if command == "worker" else ["--http-port", "0"]
    with stderr.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "sluicegate", command, *extra, "--bootstrap", bootstrap,
             "--pipeline", "sluicegate.demos.wordcount:demo_graph"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        line = f"cannot reach Kafka at {bootstrap}: "
        deadline = time.monotonic() + 60
        while stderr.read_text().count(line) < 2:  # a first attempt, then one after 1 s
            assert process.poll() is None, stderr.read_text()
            if time.monotonic() > deadline:
                pytest.fail(f"no second attempt within 60 s:\n{stderr.read_text()}")
            time.sleep(0.1)
        assert process.poll() is None  # still alive, still trying
    finally:
        process.terminate()
        code = process.wait(timeout=30)
    text = stderr.read_text()
    assert "Traceback" not in text, text
    assert "retrying in 1 s" in text
    assert "retrying in 2 s" in text
    assert code == 130  # SIGTERM takes the path of Ctrl-C

"""``sluicegate up`` as a user runs it: coordinator and workers as children with prefixed
logs, a worker killed with SIGKILL is restarted, and Ctrl-C stops every process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.testing import produce_lines, read_committed, word_count
from tests.helpers import wait_for


def _children(pid: int) -> list[int]:
    """Pids of the direct children of ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


async def test_up_runs_restarts_a_killed_worker_and_stops_on_ctrl_c(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    await ensure_topics(kafka_bootstrap, graph)
    (tmp_path / f"up_{tag}.py").write_text(
        f"from sluicegate.testing import word_count\ngraph = word_count({tag!r})\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        "SLUICEGATE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "SLUICEGATE_STORAGE_URL": str(tmp_path / "storage"),
        "SLUICEGATE_STATE_DIR": str(tmp_path / "state"),
    }
    up = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, its output read by a thread
        [sys.executable, "-m", "sluicegate", "up", "--pipeline", f"up_{tag}:graph",
         "--workers", "2", "--slots", "2", "--interval", "0.5"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(up.stdout or []), daemon=True)
    reader.start()
    try:
        words = ["alpha beta", "beta gamma", "gamma alpha"] * 500
        await produce_lines(kafka_bootstrap, f"lines-{tag}", words)
        expected = Counter(w for line in words for w in line.split())
        first = await read_committed(kafka_bootstrap, f"counts-{tag}", 3, timeout_s=120)
        assert first, "no output from the pipeline under `up`"

        worker = next(p for p in _children(up.pid) if b"worker-1" in _cmdline(p))
        os.kill(worker, signal.SIGKILL)
        await wait_for(
            lambda: any("[worker-1] exited with -9; restarting" in line for line in lines),
            timeout_s=60,
            interval_s=0.1,
            what="`up` to restart the killed worker",
            details=lambda: "".join(lines[-30:]),
        )

        await produce_lines(kafka_bootstrap, f"lines-{tag}", words)
        total = 2 * sum(expected.values())
        records = await read_committed(kafka_bootstrap, f"counts-{tag}", total, timeout_s=120)
        finals: dict[bytes | None, int] = {}
        for r in records:
            finals[r.key] = max(finals.get(r.key, 0), int(r.value))
        assert finals == {w.encode(): 2 * n for w, n in expected.items()}
    finally:
        up.send_signal(signal.SIGINT)
        code = up.wait(timeout=60)
        reader.join(timeout=10)
        if up.stdout is not None:
            up.stdout.close()
    assert code == 130
    assert _children(up.pid) == []
    assert any(line.startswith("[coordinator] ") for line in lines)
    assert any(line.startswith("[worker-2] ") for line in lines)


def _cmdline(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""

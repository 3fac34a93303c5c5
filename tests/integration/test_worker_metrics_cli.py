"""``sluicegate worker --metrics-port 0`` as a user runs it: a real coordinator and worker
process on the session broker; the worker logs the port it picked, serves its subtasks'
metrics there over HTTP, and closes the port when SIGTERM stops it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import wait_for_sync

PORT_LOG = re.compile(rb"metrics at http://127\.0\.0\.1:(\d+)/metrics")


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes appended here are killed (if still running) when the test ends."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def wait_showing_log(
    condition: Callable[[], object], what: str, log: Path, timeout_s: float = 60
) -> None:
    """Wait until ``condition()`` is truthy; fail with the tail of ``log`` after the time."""
    wait_for_sync(
        condition,
        timeout_s=timeout_s,
        interval_s=0.1,
        what=what,
        details=lambda: log.read_bytes()[-3000:].decode(),
    )


def subtasks(text: str) -> set[str]:
    """The subtasks with a records-in series in the scraped ``text``."""
    return {
        sample.labels["subtask"]
        for family in text_string_to_metric_families(text)
        if family.name == "sluicegate_records_in"
        for sample in family.samples
        if sample.name == "sluicegate_records_in_total"
    }


def restores(text: str) -> float:
    """How many restores (state restored or opened empty) the scraped ``text`` counts."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "sluicegate_restore_duration_seconds_count"
    )


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def test_a_worker_serves_its_metrics_on_the_port_it_logged(
    kafka_bootstrap: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    tag = uuid.uuid4().hex[:8]
    module = f"metrics_pipeline_{tag}"
    spec = f"{module}:graph"
    (tmp_path / f"{module}.py").write_text(
        f"from sluicegate.testing import word_count\ngraph = word_count({tag!r})\n"
    )
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
            "SLUICEGATE_KAFKA_BOOTSTRAP": kafka_bootstrap,
            "SLUICEGATE_STORAGE_URL": str(tmp_path / "storage"),
            "SLUICEGATE_STATE_DIR": str(tmp_path / "state"),
            # A busy port: the worker starts only if --metrics-port overrides the environment.
            "SLUICEGATE_METRICS_PORT": str(busy.getsockname()[1]),
        }
        logs = {name: tmp_path / f"{name}.log" for name in ("coordinator", "worker")}
        commands = {
            "coordinator": ["coordinator", "--interval", "0.5", "--http-port", "0"],
            "worker": ["worker", "--worker-id", "w1", "--slots", "4", "--metrics-port", "0"],
        }
        for name, args in commands.items():
            with logs[name].open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "sluicegate", *args, "--pipeline", spec],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        worker = processes[-1]

        wait_showing_log(
            lambda: PORT_LOG.search(logs["worker"].read_bytes()), "the port", logs["worker"]
        )
        found = PORT_LOG.search(logs["worker"].read_bytes())
        assert found is not None
        url = f"http://127.0.0.1:{int(found.group(1))}/metrics"
        wait_showing_log(lambda: restores(scrape(url)) == 4, "4 subtasks running", logs["worker"])

    assert subtasks(scrape(url)) == {"tokenizer#0", "tokenizer#1", "counter#0", "counter#1"}
    families = {f.name: f.type for f in text_string_to_metric_families(scrape(url))}
    assert families["sluicegate_consumer_lag_records"] == "gauge"
    assert families["sluicegate_restore_duration_seconds"] == "histogram"

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 130, logs["worker"].read_bytes()[-3000:].decode()
    with pytest.raises(OSError):  # the port was closed with the process, cleanly
        scrape(url)

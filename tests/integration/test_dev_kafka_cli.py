"""``sluicegate dev kafka`` as a user runs it: a real process, real clients, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from sluicegate.devkafka import free_port
from tests.helpers import wait_for_sync

SLUICEGATE = str(Path(sys.executable).with_name("sluicegate"))


def _java_pids(marker: Path) -> list[int]:
    """Pids of java processes whose command line mentions ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"java") and str(marker).encode() in b" ".join(cmdline):
            pids.append(int(entry.name))
    return pids


class Running:
    """A ``sluicegate dev kafka`` child whose output we read line by line."""

    def __init__(self, port: int, data_dir: Path) -> None:
        self.port, self.data_dir = port, data_dir
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    def start(self) -> None:
        """Start the command and return once it says the broker is ready."""
        self.process = subprocess.Popen(
            [
                SLUICEGATE,
                "dev",
                "kafka",
                "--port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + 120
        for line in self.process.stdout:
            self.output.append(line)
            if f"is ready at 127.0.0.1:{self.port}" in line:
                return
            if time.monotonic() > deadline:
                break
        pytest.fail("dev kafka never said it was ready:\n" + "".join(self.output))

    def stop(self, signum: int = signal.SIGKILL) -> int:
        """Send ``signum``, wait for the exit and return its code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signum)
        code = self.process.wait(timeout=60)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return code


@pytest.fixture
def dev_kafka(tmp_path: Path) -> Iterator[Running]:
    data_dir = tmp_path / "data"
    running = Running(free_port(), data_dir)
    try:
        yield running
    finally:
        if running.process is not None:
            running.stop()
        for pid in _java_pids(data_dir):
            os.kill(pid, signal.SIGKILL)


async def _round_trip(bootstrap: str, topic: str, value: bytes) -> list[bytes]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        (end,) = (await consumer.end_offsets([tp])).values()
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < end and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                values.extend(r.value for r in batch)
        return values
    finally:
        await consumer.stop()


async def test_serves_clients_keeps_data_and_stops_cleanly_on_sigterm(dev_kafka: Running) -> None:
    dev_kafka.start()
    bootstrap = f"127.0.0.1:{dev_kafka.port}"
    assert await _round_trip(bootstrap, "kept", b"one") == [b"one"]

    assert dev_kafka.stop(signal.SIGTERM) == 130
    assert _java_pids(dev_kafka.data_dir) == []

    dev_kafka.start()
    assert await _round_trip(bootstrap, "kept", b"two") == [b"one", b"two"]
    assert dev_kafka.stop(signal.SIGINT) == 130
    assert _java_pids(dev_kafka.data_dir) == []


def test_the_broker_dies_with_a_killed_launcher(dev_kafka: Running) -> None:
    dev_kafka.start()
    assert _java_pids(dev_kafka.data_dir)
    dev_kafka.stop(signal.SIGKILL)
    wait_for_sync(
        lambda: not _java_pids(dev_kafka.data_dir),
        timeout_s=60,
        interval_s=0.1,
        what="the orphaned broker to exit",
    )


def test_a_busy_port_is_refused_with_advice(dev_kafka: Running, tmp_path: Path) -> None:
    dev_kafka.start()
    done = subprocess.run(
        [SLUICEGATE, "dev", "kafka", "--port", str(dev_kafka.port), "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert f"port {dev_kafka.port} on 127.0.0.1 is already in use" in done.stderr
    assert "--port" in done.stderr

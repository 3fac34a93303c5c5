"""A worker's heartbeats: eager until its first assignment (a coordinator started with it hears
it at once), then every ``heartbeat_seconds``. Real `Worker.run`, a link that records what it
sends and never delivers anything."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from sluicegate.operators.protocol.messages import FromWorker, Heartbeat, ToWorker
from sluicegate.operators.runtime.worker import Worker
from sluicegate.operators.runtime.worker_settings import WorkerSettings
from sluicegate.operators.storage import open_storage
from sluicegate.testing import word_count


class RecordingLink:
    def __init__(self) -> None:
        self.beats: list[float] = []

    async def __aenter__(self) -> RecordingLink:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def send(self, message: FromWorker) -> None:
        if isinstance(message, Heartbeat):
            self.beats.append(asyncio.get_running_loop().time())

    async def receive(self, timeout_s: float) -> list[ToWorker]:
        await asyncio.sleep(timeout_s)
        return []


async def beats_within(tmp_path: Path, seconds: float, *, attempt: int) -> list[float]:
    link = RecordingLink()
    settings = WorkerSettings(worker_id="w", slots=1, state_dir=tmp_path, heartbeat_seconds=1.0)
    worker = Worker(word_count(uuid.uuid4().hex[:8]), settings, bootstrap="127.0.0.1:1",
                    storage=open_storage("memory://"), link=link)  # fmt: skip
    worker.attempt = attempt
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(seconds)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    return link.beats


async def test_a_worker_never_assigned_beats_eagerly(tmp_path: Path) -> None:
    beats = await beats_within(tmp_path, 1.5, attempt=0)
    assert len(beats) >= 4  # every EAGER_BEAT_SECONDS (0.2 s), not at 0 and 1 s only


async def test_a_worker_that_runs_an_attempt_beats_every_heartbeat_seconds(
    tmp_path: Path,
) -> None:
    beats = await beats_within(tmp_path, 1.5, attempt=1)
    assert len(beats) == 2  # at once, then after 1 s

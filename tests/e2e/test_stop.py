"""``sluicegate stop`` against real processes: the coordinator takes a final checkpoint, every
subtask stops, the coordinator exits 0 while the workers idle; a coordinator started again
resumes from the final checkpoint, and the sink sees every count exactly once."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from sluicegate.operators.storage import open_storage
from sluicegate.operators.storage.manifest import ManifestStore
from sluicegate.testing import produce_lines, read_committed
from tests.e2e.cluster import Cluster, start_word_count
from tests.helpers import assert_counted_exactly_once

VOCABULARY = [f"v{i:02d}" for i in range(20)]


async def test_stop_then_start_again_keeps_exactly_once(
    kafka_bootstrap: str, tmp_path: Path, cluster_factory: list[Cluster]
) -> None:
    job = await start_word_count(kafka_bootstrap, tmp_path, cluster_factory, VOCABULARY, 11)
    tag, cluster, lines, expected = job.tag, job.cluster, job.lines, job.expected

    # Stop while the pipeline is busy with the first half.
    await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[:3000])
    assert await read_committed(kafka_bootstrap, f"counts-{tag}", 1, timeout_s=120)
    out = await asyncio.to_thread(cluster.stop_job)  # the coordinator process ends with 0
    said = re.fullmatch(r"\S+ stopped at checkpoint (\d+); starting it again resumes there\n", out)
    assert said is not None, out
    final = int(said.group(1))
    cluster.alive()  # the workers idle
    manifests = ManifestStore(open_storage(tmp_path / "storage"))
    assert max(await manifests.completed()) == final

    cluster.start("coordinator")
    await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[3000:])
    total = sum(expected.values())
    records = await read_committed(kafka_bootstrap, f"counts-{tag}", total, timeout_s=180)
    cluster.alive()
    assert_counted_exactly_once(records, expected)
    log = (cluster.logs / "coordinator.2.log").read_text()
    assert f"assigned from checkpoint {final}:" in log

"""Two coordinators of one pipeline at once, as real processes (a second one started while
the first still runs, as a Kubernetes node cut off from its control plane leaves a pod
running): the newer one fences the older one, which idles without exiting, and the word
count stays exactly once across the handover."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx

from sluicegate.testing import produce_lines, read_committed
from tests.e2e.cluster import Cluster, start_word_count
from tests.e2e.test_kill_processes import VOCABULARY, wait_for_more_checkpoints
from tests.helpers import assert_counted_exactly_once, wait_for


def stop(cluster: Cluster, url: str) -> subprocess.CompletedProcess[str]:
    """``sluicegate stop --url URL``."""
    return subprocess.run(
        [sys.executable, "-m", "sluicegate", "stop", "--url", url],
        env=cluster.env, capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip


async def test_a_second_coordinator_fences_the_first_and_counts_stay_exactly_once(
    kafka_bootstrap: str, tmp_path: Path, cluster_factory: list[Cluster]
) -> None:
    job = await start_word_count(kafka_bootstrap, tmp_path, cluster_factory, VOCABULARY, 11)
    tag, cluster, lines, expected = job.tag, job.cluster, job.lines, job.expected
    storage = tmp_path / "storage"
    await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[::2])
    await wait_for_more_checkpoints(cluster, storage, 2)

    cluster.start("coordinator-b")
    fenced = "coordinator epoch 2 started, so this one (epoch 1) is fenced"

    async def first_fenced() -> bool:
        cluster.alive()
        return bool(cluster.log_lines("coordinator", fenced))

    await wait_for(first_fenced, timeout_s=60, interval_s=0.2, what="the first to be fenced")
    await produce_lines(kafka_bootstrap, f"lines-{tag}", lines[1::2])
    total = sum(expected.values())
    records = await read_committed(kafka_bootstrap, f"counts-{tag}", total, timeout_s=120)
    await wait_for_more_checkpoints(cluster, storage, 2)  # the newer one checkpoints on
    records = await read_committed(kafka_bootstrap, f"counts-{tag}", total + 1, timeout_s=5)
    assert_counted_exactly_once(records, expected)

    await asyncio.sleep(2)
    cluster.alive()  # the fenced coordinator idles: it did not exit
    assert cluster.log_lines("coordinator-b", "coordinator epoch 2"), cluster.log_tails()
    assert not cluster.log_lines("coordinator-b", "is fenced"), cluster.log_tails()

    # The fenced one exports only that it is fenced (its checkpoint lag would only grow).
    async with httpx.AsyncClient(timeout=10) as http:
        metrics = (await http.get(f"{cluster.api_url()}/metrics")).text
        newer = (await http.get(f"{cluster.api_url(name='coordinator-b')}/metrics")).text
    assert f'sluicegate_coordinator_fenced{{pipeline="wordcount-{tag}"}} 1.0' in metrics
    assert "sluicegate_checkpoint_lag_seconds" not in metrics
    assert f'sluicegate_coordinator_fenced{{pipeline="wordcount-{tag}"}} 0.0' in newer
    assert "sluicegate_checkpoint_lag_seconds" in newer

    # A stop asked of the fenced one is refused, saying where to ask; the newer one stops.
    refused = await asyncio.to_thread(stop, cluster, cluster.api_url())
    assert refused.returncode == 1, refused
    assert "fenced by coordinator epoch 2" in refused.stderr, refused.stderr
    assert "Ask the newer coordinator" in refused.stderr, refused.stderr
    stopped = await asyncio.to_thread(stop, cluster, cluster.api_url(name="coordinator-b"))
    assert stopped.returncode == 0, stopped
    assert cluster.processes.pop("coordinator-b").wait(timeout=30) == 0
    cluster.alive()  # the fenced one still idles, until its process is stopped
    decisions = ("adopted", "attempt", "fenced", "recovering")
    print(cluster.log_lines("coordinator", *decisions))
    print(cluster.log_lines("coordinator-b", *decisions))

"""Memory per key across real processes killed with SIGKILL: no entry lost or duplicated.

Eight customers, six runs each that remember one fact, on a coordinator and three workers
(an agent at parallelism 4). Workers are SIGKILLed at random moments while runs write, the
fault point ``tool.remember.after_call`` SIGKILLs a worker between a ``remember`` call and
its journal ``done`` (probability 0.15 per call, at most twice: 48 calls leave it unfired
with a probability under 0.1%), and once every write has finished a worker is SIGKILLed
between runs. Then one run per customer reads the memory back: each must see its six facts,
each once, numbered 0..5.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from pathlib import Path

from sluicegate.agents.client import submit_tasks
from sluicegate.agents.messages import RunResult
from sluicegate.testing import fault_env
from tests.e2e.cluster import Cluster
from tests.e2e.test_agent_chaos import results_of
from tests.memory_agent import PARTITIONS, seen, seen_ids, task

CUSTOMERS, FACTS, KILLS = 8, 6, 3


def memory_module(tag: str) -> str:
    return (
        "from tests.memory_agent import memory_graph\n"
        f"graph, topics = memory_graph({tag!r}, parallelism={PARTITIONS}, latency_s=0.05)\n"
    )


async def test_sigkilled_workers_never_lose_or_repeat_a_memory_entry(
    kafka_bootstrap: str, tmp_path: Path, cluster_factory: list[Cluster]
) -> None:
    rng = random.Random(20261204)
    tag = uuid.uuid4().hex[:8]
    fault_state = tmp_path / "faults.state"
    cluster = Cluster(
        tmp_path, memory_module(tag), kafka_bootstrap,
        env=fault_env({"tool.remember.after_call": "0.15x2"}, fault_state),
    )  # fmt: skip
    cluster_factory.append(cluster)
    workers = ["worker-1", "worker-2", "worker-3"]
    for name in ["coordinator", *workers]:
        cluster.start(name)
    writes = [
        task(f"w-{c}-{i}", f"remember: c{c} fact {i}", f"c-{c}")
        for i in range(FACTS)
        for c in range(CUSTOMERS)
    ]
    results: dict[str, dict[str, object]] = {}
    kill_after = sorted(rng.randrange(4, len(writes) - 4) for _ in range(KILLS))
    kills = fault_deaths = 0
    await submit_tasks(kafka_bootstrap, f"tasks-{tag}", writes)
    async for result in results_of(kafka_bootstrap, f"results-{tag}", len(writes), 600):
        if result:
            assert str(result["run_id"]) not in results, f"two results of {result['run_id']}"
            results[str(result["run_id"])] = result
        fault_deaths += cluster.revive(workers)
        if kills < KILLS and len(results) >= kill_after[kills]:
            victim = rng.choice(workers)
            kills += cluster.kill(victim)
            cluster.start(victim)
    assert len(results) == len(writes), cluster.log_tails()
    assert kills == KILLS
    victim = rng.choice(workers)  # between runs: every write done, no read started
    cluster.kill(victim)
    cluster.start(victim)

    reads = [task(f"r-{c}", "recall", f"c-{c}") for c in range(CUSTOMERS)]
    await submit_tasks(kafka_bootstrap, f"tasks-{tag}", reads)
    everything = len(writes) + len(reads)
    async for result in results_of(kafka_bootstrap, f"results-{tag}", everything, 300):
        if result:
            results.setdefault(str(result["run_id"]), result)
        fault_deaths += cluster.revive(workers)
    assert len(results) == everything, cluster.log_tails()
    assert Counter(str(r["status"]) for r in results.values()) == Counter({"done": everything})
    for c in range(CUSTOMERS):
        answer = RunResult.model_validate(results[f"r-{c}"]).answer
        assert sorted(seen(answer)) == [f"c{c} fact {i}" for i in range(FACTS)], answer
        assert sorted(seen_ids(answer)) == sorted(f"c-{c}#{i}" for i in range(FACTS)), answer
    fired = fault_state.read_text().splitlines() if fault_state.exists() else []
    assert fired, "the fault point between a remember call and its done never fired"
    assert fault_deaths >= 1

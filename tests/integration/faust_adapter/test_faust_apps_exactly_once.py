"""faust's word count and a table of account totals, unchanged faust code run by sluicegate on
a real broker, crashed and restored several times: a read_committed consumer sees every count
and every total exactly once.

Crashes cancel every task of the job at once (as a SIGKILL would; the e2e tests SIGKILL real
processes), at a random point of the checkpoint cycle after each part of the input.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from sluicegate.coordinator.local import LocalJob
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.faust_adapter import pipeline_of
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.storage import open_storage
from sluicegate.testing import produce_lines, read_committed
from tests.faust_apps import accounts, wordcount
from tests.faust_apps.wordcount import WORDS_RE

VOCABULARY = [f"w{i:02d}" for i in range(40)]
ACCOUNTS = [f"acct-{i:02d}" for i in range(30)]


async def crashed_and_restored(
    graph: JobGraph, bootstrap: str, tmp_path: Path, source: str, parts: list[list[str]]
) -> LocalJob:
    """The job run over ``parts`` of its input, crashed at a random moment after each part and
    started again from its last checkpoint; returns the running job."""
    rng = random.Random(33)
    storage = open_storage(tmp_path / "storage")

    def job() -> LocalJob:
        return LocalJob(
            graph, bootstrap=bootstrap, storage=storage, work_dir=tmp_path / "work",
            settings=CoordinatorSettings(interval_seconds=0.5),
        )  # fmt: skip

    running = job()
    await running.start()
    restored: list[int] = []
    for part in parts:
        await produce_lines(bootstrap, source, part)
        await running.wait_for_checkpoints(rng.randint(1, 2), timeout_s=120)
        await asyncio.sleep(rng.uniform(0, 0.6))  # where in the cycle to crash, not a wait
        await running.crash()
        running = job()
        await running.start()
        assert running.restored_from is not None
        restored.append(running.restored_from)
    assert restored == sorted(set(restored))
    return running


async def settled(running: LocalJob, bootstrap: str, topic: str, total: int) -> list[Any]:
    """Every committed record of ``topic`` once ``total`` arrived, read again after one more
    checkpoint so that nothing beyond them can hide."""
    await read_committed(bootstrap, topic, total, timeout_s=300)
    running.raise_failure()
    await running.wait_for_checkpoints(running.completed + 1, timeout_s=60)
    records = await read_committed(bootstrap, topic, total + 1, timeout_s=5)
    await running.crash()
    return records


async def test_faust_word_count_on_sluicegate_counts_exactly_once_across_crashes(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    app = wordcount.make_app(tag)
    graph = pipeline_of(app, modules=[wordcount], parallelism=2).build()
    rng = random.Random(1)
    posts = [", ".join(rng.choices(VOCABULARY, k=rng.randint(1, 4))) for _ in range(6000)]
    expected = Counter(w for post in posts for w in WORDS_RE.findall(post))
    encoded = [json.dumps(post) for post in posts]  # value_type=str: faust's json codec
    parts = [encoded[i::3] for i in range(3)]

    running = await crashed_and_restored(graph, kafka_bootstrap, tmp_path, f"posts-{tag}", parts)
    total = sum(expected.values())
    records = await settled(running, kafka_bootstrap, f"counts-{tag}", total)

    seen: dict[str, list[int]] = defaultdict(list)
    for r in records:
        seen[r.key.decode()].append(json.loads(r.value))
    assert len(records) == total
    assert {word: sorted(counts) for word, counts in seen.items()} == {
        word: list(range(1, n + 1)) for word, n in expected.items()
    }
    # one partition of the word's key holds its counts in order: published in order too
    assert all(counts == sorted(counts) for counts in seen.values())


async def test_faust_account_totals_on_sluicegate_are_exact_across_crashes(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    app = accounts.make_app(tag)
    graph = pipeline_of(app, modules=[accounts], parallelism=2).build()
    rng = random.Random(2)
    deposits = [(rng.choice(ACCOUNTS), rng.randint(1, 100)) for _ in range(4000)]
    sums = Counter[str]()
    for account, amount in deposits:
        sums[account] += amount
    encoded = [
        accounts.Deposit(account=account, amount=amount).dumps().decode()
        for account, amount in deposits
    ]
    parts = [encoded[i::3] for i in range(3)]

    running = await crashed_and_restored(graph, kafka_bootstrap, tmp_path, f"deposits-{tag}", parts)
    records = await settled(running, kafka_bootstrap, f"totals-{tag}", len(deposits))

    totals: dict[str, list[int]] = defaultdict(list)
    for r in records:
        total = accounts.Total.loads(r.value)
        totals[total.account].append(total.total)
    per_account = Counter(account for account, _ in deposits)
    assert len(records) == len(deposits)
    for account, seen in totals.items():
        # amounts are positive: each total is new, none repeated (a duplicate), none missing
        assert seen == sorted(set(seen)), account
        assert len(seen) == per_account[account], account
        assert seen[-1] == sums[account], account
    assert set(totals) == set(sums)

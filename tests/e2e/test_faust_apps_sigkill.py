"""The same unchanged faust apps across real processes killed with SIGKILL: run by sluicegate
(``sluicegate coordinator``/``worker --pipeline <faust app>``), every count and total is
published exactly once (asserted); run by faust-streaming itself (``faust -A ... worker``), what
its output holds is measured and reported (duplicates, losses or none), not asserted.

The report of the faust side is printed (``pytest -s``) and, when ``SLUICEGATE_FAUST_REPORT``
names a file, appended to it as one JSON line; docs/faust.md quotes the figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from sluicegate.faust_adapter import pipeline_of
from sluicegate.operators.kafka import clients as kafka_clients
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.testing import produce_lines, read_committed
from tests.e2e.cluster import Cluster
from tests.e2e.faust_processes import FaustWorkers
from tests.e2e.test_kill_processes import wait_for_more_checkpoints
from tests.faust_apps import accounts, wordcount
from tests.faust_apps.wordcount import WORDS_RE
from tests.helpers import wait_for

VOCABULARY = [f"w{i:02d}" for i in range(30)]
ACCOUNTS = [f"acct-{i:02d}" for i in range(20)]
INPUTS = int(os.environ.get("SLUICEGATE_FAUST_CHAOS_INPUTS", "6000"))
KILLS = int(os.environ.get("SLUICEGATE_FAUST_CHAOS_KILLS", "4"))
QUIET_S = 90.0


@dataclass(frozen=True, slots=True)
class Workload:
    """An app, its input topic and records, and how to read its output into key -> values."""

    app: str
    module: Any
    source: str
    output: str
    inputs: list[str]
    expected: dict[str, list[int]]
    """Per word (per account): every count (total) it must get, in order."""
    value_of: Callable[[Any], tuple[str, int]]
    key_of: Callable[[str], str] | None = None
    """The Kafka key of an input (None: keyed by its index, as `produce_lines` does)."""

    async def produce(self, bootstrap: str, part: list[str]) -> None:
        if self.key_of is None:
            await produce_lines(bootstrap, self.source, part)
            return
        producer = kafka_clients.producer(bootstrap, enable_idempotence=True, linger_ms=5)
        try:
            await producer.start()
            for line in part:
                await producer.send(self.source, line.encode(), key=self.key_of(line).encode())
            await producer.flush()
        finally:
            await producer.stop()


def word_count_workload(tag: str) -> Workload:
    rng = random.Random(11)
    posts = [", ".join(rng.choices(VOCABULARY, k=rng.randint(1, 3))) for _ in range(INPUTS)]
    n = Counter(w for p in posts for w in WORDS_RE.findall(p))
    return Workload(
        "wordcount", wordcount, f"posts-{tag}", f"counts-{tag}",
        [json.dumps(p) for p in posts], {w: list(range(1, c + 1)) for w, c in n.items()},
        lambda r: (r.key.decode(), int(json.loads(r.value))),
    )  # fmt: skip


def accounts_workload(tag: str) -> Workload:
    """Deposits keyed by account, so that one account's deposits share a source partition
    and keep their order through the group_by: its totals are the running sums in the order
    produced (the parts, one after the other)."""
    rng = random.Random(12)
    deposits = [(rng.choice(ACCOUNTS), rng.randint(1, 100)) for _ in range(INPUTS)]
    produced = [d for i in range(KILLS) for d in deposits[i::KILLS]]
    running: dict[str, list[int]] = defaultdict(list)
    for account, amount in produced:
        running[account].append((running[account] or [0])[-1] + amount)

    def value_of(r: Any) -> tuple[str, int]:
        total = accounts.Total.loads(r.value)
        return total.account, total.total

    return Workload(
        "accounts", accounts, f"deposits-{tag}", f"totals-{tag}",
        [accounts.Deposit(account=a, amount=x).dumps().decode() for a, x in deposits],
        dict(running), value_of, key_of=lambda line: json.loads(line)["account"],
    )  # fmt: skip


WORKLOADS = {"wordcount": word_count_workload, "accounts": accounts_workload}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an output held against what it must: keys with a value twice, values missing."""

    system: str
    app: str
    inputs: int
    kills: int
    expected_records: int
    records: int
    duplicated_records: int
    missing_records: int
    keys_wrong: int


def outcome(system: str, work: Workload, kills: int, records: list[Any]) -> Outcome:
    seen: dict[str, list[int]] = defaultdict(list)
    for r in records:
        key, value = work.value_of(r)
        seen[key].append(value)
    duplicated = missing = wrong = 0
    for key in set(seen) | set(work.expected):
        got, want = Counter(seen.get(key, [])), Counter(work.expected.get(key, []))
        duplicated += sum((got - want).values())
        missing += sum((want - got).values())
        wrong += got != want
    total = sum(len(v) for v in work.expected.values())
    return Outcome(system, work.app, len(work.inputs), kills, total, len(records),
                   duplicated, missing, wrong)  # fmt: skip


def report(found: Outcome) -> None:
    line = json.dumps(asdict(found))
    print(f"\nfaust comparison: {line}")
    path = os.environ.get("SLUICEGATE_FAUST_REPORT")
    if path:
        with Path(path).open("a") as out:
            out.write(line + "\n")


def parts(work: Workload, count: int) -> Iterator[list[str]]:
    for i in range(count):
        yield work.inputs[i::count]


@pytest.mark.parametrize("app", sorted(WORKLOADS))
async def test_sluicegate_runs_the_faust_app_exactly_once_through_sigkills(
    kafka_bootstrap: str, tmp_path: Path, cluster_factory: list[Cluster], app: str
) -> None:
    rng = random.Random(33)
    tag = uuid.uuid4().hex[:8]
    work = WORKLOADS[app](tag)
    module = work.module.__name__
    graph = pipeline_of(work.module.make_app(tag), modules=[work.module]).build()
    await ensure_topics(kafka_bootstrap, graph)
    source = f"from {module} import make_app\ngraph = make_app({tag!r})\n"
    cluster = Cluster(tmp_path, source, kafka_bootstrap, slots=3)
    cluster_factory.append(cluster)
    storage = tmp_path / "storage"
    for name in ("coordinator", "w1", "w2"):
        cluster.start(name)

    victims = [rng.choice(["w1", "w2"]) for _ in range(KILLS)]
    victims[len(victims) // 2] = "coordinator"
    for part, victim in zip(parts(work, KILLS), victims, strict=True):
        await work.produce(kafka_bootstrap, part)
        await wait_for_more_checkpoints(cluster, storage, rng.randint(1, 2))
        await asyncio.sleep(rng.uniform(0, 0.5))  # where in the cycle the kill lands
        cluster.kill(victim)
        cluster.start(victim)

    total = sum(len(v) for v in work.expected.values())
    await read_committed(kafka_bootstrap, work.output, total, timeout_s=240)
    cluster.alive()
    await wait_for_more_checkpoints(cluster, storage, 1)
    records = await read_committed(kafka_bootstrap, work.output, total + 1, timeout_s=5)

    found = outcome("sluicegate", work, KILLS, records)
    report(found)
    assert (found.records, found.duplicated_records, found.missing_records) == (total, 0, 0)
    seen: dict[str, list[int]] = defaultdict(list)
    for r in records:
        key, value = work.value_of(r)
        seen[key].append(value)
    assert seen == work.expected  # every value, in order per key


async def test_faust_itself_through_sigkills_is_measured_and_reported(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """faust-streaming's worker on the same word count, SIGKILLed as often; its output is
    compared with the exact one and the finding reported. The test asserts only that faust
    ran (its output has counts): what it found is a measurement."""
    rng = random.Random(34)
    tag = uuid.uuid4().hex[:8]
    work = word_count_workload(tag)
    # the topics faust reads and writes, with the partitions the app declares
    graph = pipeline_of(wordcount.make_app(tag), modules=[wordcount]).build()
    await ensure_topics(kafka_bootstrap, graph)
    workers = FaustWorkers(tmp_path, "tests.faust_apps.wordcount", tag, kafka_bootstrap)
    workers.start("f1")
    try:
        for part in parts(work, KILLS):
            before = len(await read_committed(kafka_bootstrap, work.output, 10**9, 1.0))
            await work.produce(kafka_bootstrap, part)

            async def progressed(floor: int = before) -> bool:
                workers.alive()
                got = await read_committed(kafka_bootstrap, work.output, 10**9, timeout_s=1.0)
                return len(got) > floor

            await wait_for(progressed, timeout_s=240, interval_s=0.5, what="faust counting")
            await asyncio.sleep(rng.uniform(0, 1.0))  # where in its commit cycle the kill lands
            workers.kill("f1")
            workers.start("f1")
        records = await quiet_output(workers, kafka_bootstrap, work.output)
    finally:
        workers.stop_all()

    found = outcome("faust-streaming 0.15.3", work, KILLS, records)
    report(found)
    assert found.records > 0, workers.log_tail()


async def quiet_output(workers: FaustWorkers, bootstrap: str, topic: str) -> list[Any]:
    """The output once it has not grown for 90 s: longer than faust's consumer session timeout
    (``broker_session_timeout``, 60 s), which a restarted worker may wait out before the group
    gives it the killed one's partitions; faust also commits on its own timer."""
    last: list[Any] = []
    since = time.monotonic()

    async def quiet() -> bool:
        nonlocal last, since
        workers.alive()
        got = await read_committed(bootstrap, topic, 10**9, timeout_s=1.0)
        if len(got) != len(last):
            last, since = got, time.monotonic()
        return time.monotonic() - since > QUIET_S

    await wait_for(quiet, timeout_s=900, interval_s=1.0, what="faust's output to settle")
    return last

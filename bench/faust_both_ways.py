"""The same unchanged faust app run both ways: by faust-streaming's worker, and by sluicegate.

    uv run python -m bench.faust_both_ways [--posts 4000] [--rounds 3]
        [--faust-guarantee at_least_once|exactly_once] [--quick]

The app is faust's word count as faust's examples write it (``tests/faust_apps/wordcount.py``:
posts → words → ``group_by`` word → ``app.Table(default=int)`` → each new count to
``counts-<tag>``), not a line changed. Per system and round, on fresh topics: launch the
processes (faust: one ``faust -A tests.faust_apps.wordcount worker``; sluicegate:
``sluicegate coordinator``, a checkpoint every second, and one ``sluicegate worker --pipeline
<the faust App>`` with 4 slots), wait until a warm-up post has come out counted, produce every
post, and read ``counts-<tag>`` ``read_committed`` until every count is there (then 3 s more,
to see late duplicates), or until it has not grown for 30 s. Two times, to the last count
read: *warm* from the first post produced, *cold* from the launch (start-up, group join or
first checkpoint, and the warm-up included).

faust runs ``processing_guarantee="at_least_once"`` (the app's ``FAUST_APP_GUARANTEE``):
with ``exactly_once``, faust-streaming 0.15.3's worker starts, joins its group and commits the
warm-up post's offset, but its ``group_by`` stage barely moves: no count of a single post in
600 s, 3 counts of 201 words in 30 s (``--faust-guarantee exactly_once`` shows it; the warm-up
wait is ``--warmup-s``). Every output is checked (`bench.count_check`): sluicegate's must be
exact, and a wrong one fails the benchmark; faust's is reported as found. Each side's label is
its real guarantee: what it was set to only if its output had transaction markers.

Rounds are paired: both systems each round, the order alternating; printed are the median
and spread (min-max) of warm and cold seconds and the per-round ratio faust / sluicegate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, ConsumerRecord

from bench.count_check import (
    CountCheck,
    check_counts,
    guarantee_label,
    ratio_summary,
    time_summary,
)
from bench.peers_wordcount import transaction_markers
from bench.processes import ProcessCluster, kafka_bootstrap
from bench.table import record, report_table
from sluicegate.faust_adapter import pipeline_of
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.testing import PARTITIONS, produce_lines
from tests.faust_apps import wordcount

BENCH = "faust_both_ways"
_REPO = Path(__file__).resolve().parent.parent
_WORDS = [f"w{i:03d}" for i in range(200)]
WARMUP = "warmup"
QUIET_S = 30.0
"""An output that has not grown for this long while counts are missing is taken as final."""
GRACE_S = 3.0
"""How long to read on once every count is there: a window to see late duplicates."""
DEADLINE_S = 600.0
SLUICEGATE = "exactly-once sink, checkpoint every 1 s"

Alive = Callable[[], None]


class WrongOutputError(RuntimeError):
    """sluicegate's output was not exact: the benchmark is void."""

    def __init__(self, check: CountCheck) -> None:
        super().__init__(f"sluicegate's output was not exact: {check.verdict()}")
        self.check = check


@dataclass(frozen=True, slots=True)
class Run:
    """One system's run: warm and cold seconds (NaN: it never started), what its output held
    and how many transaction markers were among its offsets."""

    system: str
    warm: float
    cold: float
    check: CountCheck | None
    markers: int

    def verdict(self) -> str:
        return self.check.verdict() if self.check else "did not start"


def make_posts(count: int) -> list[str]:
    rng = random.Random(1)
    return [", ".join(rng.choices(_WORDS, k=rng.randint(1, 5))) for _ in range(count)]


@contextlib.contextmanager
def faust_worker(root: Path, bootstrap: str, tag: str, guarantee: str) -> Iterator[Alive]:
    """One ``faust -A tests.faust_apps.wordcount worker``, SIGKILLed on exit."""
    env = {
        **os.environ, "FAUST_APP_TAG": tag, "FAUST_APP_BROKER": f"kafka://{bootstrap}",
        "FAUST_APP_DATA_DIR": str(root / "faust-data"), "FAUST_APP_GUARANTEE": guarantee,
        "PYTHONPATH": os.pathsep.join(p for p in (str(_REPO), os.environ.get("PYTHONPATH"))
                                      if p),
    }  # fmt: skip
    faust = Path(sys.executable).parent / "faust"
    log = root / "faust.log"
    with log.open("wb") as out:
        child = subprocess.Popen(
            [str(faust), "-A", "tests.faust_apps.wordcount", "worker", "--loglevel", "warn",
             "--without-web"],
            env=env, cwd=_REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def alive() -> None:
        if child.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"faust's worker exited with {child.returncode}:\n{tail}")

    try:
        yield alive
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait()


@contextlib.contextmanager
def sluicegate_job(root: Path, bootstrap: str, tag: str) -> Iterator[Alive]:
    """A coordinator (checkpoint every 1 s) and one worker with 4 slots, given the faust App."""
    imports = "from tests.faust_apps.wordcount import make_app"
    with ProcessCluster(root, bootstrap, imports, f"make_app({tag!r})") as cluster:
        cluster.start_coordinator(interval=1.0)
        cluster.start_worker("w1", slots=4)
        yield cluster.check_alive


async def collect(
    sink: AIOKafkaConsumer,
    records: list[ConsumerRecord[bytes, bytes]],
    total: int,
    alive: Alive,
    timeout_s: float,
) -> float:
    """Append what ``sink`` reads to ``records``: until ``total`` and `GRACE_S` more, or until
    nothing new for `QUIET_S`, or ``timeout_s``. Returns when the last record was read."""
    deadline = time.perf_counter() + timeout_s
    last = time.perf_counter()
    complete_at: float | None = None
    while True:
        alive()
        now = time.perf_counter()
        if complete_at is None and len(records) >= total:
            complete_at = now
        if complete_at is not None and now - complete_at > GRACE_S:
            return last
        if now > deadline or now - last > QUIET_S:
            return last
        for batch in (await sink.getmany(timeout_ms=50, max_records=50_000)).values():
            records.extend(batch)
            last = time.perf_counter()


async def one_run(
    system: str, bootstrap: str, posts: list[str], guarantee: str, warmup_s: float
) -> Run:
    """Launch ``system`` on fresh topics, warm it up, produce ``posts``, check its output."""
    tag = uuid.uuid4().hex[:8]
    await ensure_topics(bootstrap, pipeline_of(wordcount.make_app(tag)).build())
    expected = Counter(w for p in posts for w in wordcount.WORDS_RE.findall(p))
    expected[WARMUP] += 1
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"faust-{system}-")))
        launched = time.perf_counter()
        if system == "faust":
            alive = stack.enter_context(faust_worker(root, bootstrap, tag, guarantee))
        else:
            alive = stack.enter_context(sluicegate_job(root, bootstrap, tag))
        async with committed_from_start(bootstrap, f"counts-{tag}", PARTITIONS) as sink:
            records: list[ConsumerRecord[bytes, bytes]] = []
            await produce_lines(bootstrap, f"posts-{tag}", [json.dumps(WARMUP)])
            warm_deadline = time.perf_counter() + warmup_s
            while not records and time.perf_counter() < warm_deadline:
                alive()
                for batch in (await sink.getmany(timeout_ms=200)).values():
                    records.extend(batch)
            if not records:
                print(f"  {system}: no warm-up count within {warmup_s:.0f} s", flush=True)
                return Run(system, math.nan, math.nan, None, 0)
            started = time.perf_counter()
            await produce_lines(bootstrap, f"posts-{tag}", [json.dumps(p) for p in posts])
            finished = await collect(sink, records, expected.total(), alive, DEADLINE_S)
            markers = await transaction_markers(sink, records)
    check = check_counts(expected, [(r.key, r.value) for r in records])
    return Run(system, finished - started, finished - launched, check, markers)


async def measure(
    bootstrap: str, posts: list[str], rounds: int, guarantee: str, warmup_s: float
) -> dict[str, list[Run]]:
    """Each system once per round, the order alternating from round to round."""
    runs: dict[str, list[Run]] = {"sluicegate": [], "faust": []}
    for n in range(rounds):
        for system in ["sluicegate", "faust"] if n % 2 == 0 else ["faust", "sluicegate"]:
            run = await one_run(system, bootstrap, posts, guarantee, warmup_s)
            print(f"  round {n + 1}: {system}: {run.warm:.1f} s warm, {run.cold:.1f} s cold, "
                  f"{run.verdict()}, {run.markers} transaction markers", flush=True)  # fmt: skip
            record(BENCH, "run", system=system, round=n, seconds=run.warm,
                   cold_seconds=run.cold, posts=len(posts), verdict=run.verdict(),
                   markers=run.markers)  # fmt: skip
            if system == "sluicegate" and run.check is not None and not run.check.exact:
                raise WrongOutputError(run.check)
            runs[system].append(run)
    return runs


def report(runs: dict[str, list[Run]], posts: list[str], guarantee: str) -> None:
    words = sum(len(wordcount.WORDS_RE.findall(p)) for p in posts)
    ours = runs["sluicegate"]
    rows = []
    for system, mine in runs.items():
        setting = SLUICEGATE if system == "sluicegate" else f"faust {guarantee}"
        warm, warm_spread = time_summary([r.warm for r in mine])
        cold, cold_spread = time_summary([r.cold for r in mine])
        rate = f"{words / float(warm):,.0f}" if warm != "-" else "-"
        versus = system != "sluicegate"
        rows.append([
            system, guarantee_label(setting, [r.markers for r in mine]), warm, warm_spread, cold,
            cold_spread, rate,
            ratio_summary([r.warm for r in mine], [r.warm for r in ours]) if versus else "",
            ratio_summary([r.cold for r in mine], [r.cold for r in ours]) if versus else "",
            "; ".join(sorted(set(r.verdict() for r in mine))),
        ])  # fmt: skip
    report_table(
        BENCH,
        f"The unchanged faust word count both ways: {len(posts):,} posts, {words:,} words, "
        f"{len(ours)} paired rounds",
        ["system", "guarantee (observed)", "warm median s", "warm spread s", "cold median s",
         "cold spread s", "words/s (warm)", "warm: faust / sluicegate",
         "cold: faust / sluicegate", "output"],
        rows,
        ["tests/faust_apps/wordcount.py unchanged; faust-streaming 0.15.3's worker vs "
         "sluicegate's coordinator and worker given the faust App, 1 process each.",
         "Warm: from the first post produced, cold: from launching the processes (start-up "
         "and one warm-up post counted included), to the last count read read_committed.",
         "Output: every word's counts must be 1..n exactly (sluicegate's are, or the "
         "benchmark fails); faust's as found. Ratios per round, median (min-max)."],
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=4_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1,000 posts, one round")
    parser.add_argument(
        "--faust-guarantee", default="at_least_once", choices=("at_least_once", "exactly_once"),
        help="faust's processing_guarantee (exactly_once stalls with faust-streaming 0.15.3)",
    )  # fmt: skip
    parser.add_argument("--warmup-s", type=float, default=120.0,
                        help="how long a system may take to count its warm-up post")  # fmt: skip
    args = parser.parse_args()
    posts = make_posts(1_000 if args.quick else args.posts)
    rounds = 1 if args.quick else args.rounds
    # Fresh topics: the sink reader's first offset fetch can meet a leader not elected yet
    # (and retries); anything that matters surfaces as an exception or a wrong count.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    with kafka_bootstrap() as bootstrap:
        runs = asyncio.run(measure(bootstrap, posts, rounds, args.faust_guarantee, args.warmup_s))
    report(runs, posts, args.faust_guarantee)


if __name__ == "__main__":
    main()

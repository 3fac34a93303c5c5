"""The same unchanged faust app run both ways: by faust-streaming's worker, and by sluicegate.

    uv run python -m bench.faust_both_ways [--posts 20000] [--rounds 1]

The app is faust's word count as faust's examples write it (``tests/faust_apps/wordcount.py``:
posts → words → ``group_by`` word → ``app.Table(default=int)`` → each new count to
``counts-<tag>``), not a line changed. Per system and round, on fresh topics: start the
processes (faust: one ``faust -A tests.faust_apps.wordcount worker``, its
``processing_guarantee="exactly_once"``; sluicegate: ``sluicegate coordinator`` and one
``sluicegate worker --pipeline <the faust App>`` with 4 slots, a checkpoint every second),
wait until a warm-up post has come out counted, produce every post, and time until the last
count is visible to a ``read_committed`` consumer. Then every word's counts must be ``1..n``
exactly; a system whose output is not is reported as such (its time is no benchmark of a
correct result), not hidden.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import median

from bench.processes import ProcessCluster, kafka_bootstrap
from bench.table import report_table
from sluicegate.faust_adapter import pipeline_of
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.testing import produce_lines, read_committed
from tests.faust_apps import wordcount

BENCH = "faust_both_ways"
_REPO = Path(__file__).resolve().parent.parent
_WORDS = [f"w{i:03d}" for i in range(200)]
WARMUP_S = 600.0
"""How long a system may take to count its first post (faust: group join, table recovery)."""


def make_posts(count: int) -> list[str]:
    rng = random.Random(1)
    return [", ".join(rng.choices(_WORDS, k=rng.randint(1, 5))) for _ in range(count)]


@contextmanager
def faust_worker(root: Path, bootstrap: str, tag: str) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ, "FAUST_APP_TAG": tag, "FAUST_APP_BROKER": f"kafka://{bootstrap}",
        "FAUST_APP_DATA_DIR": str(root / "faust-data"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(_REPO), os.environ.get("PYTHONPATH"))
                                      if p),
    }  # fmt: skip
    faust = Path(sys.executable).parent / "faust"
    with (root / "faust.log").open("wb") as log:
        child = subprocess.Popen(
            [str(faust), "-A", "tests.faust_apps.wordcount", "worker", "--loglevel", "warn",
             "--without-web"],
            env=env, cwd=_REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        yield child
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait()


@contextmanager
def sluicegate_job(root: Path, bootstrap: str, tag: str) -> Iterator[ProcessCluster]:
    imports = "from tests.faust_apps.wordcount import make_app"
    with ProcessCluster(root, bootstrap, imports, f"make_app({tag!r})") as cluster:
        cluster.start_coordinator(interval=1.0)
        cluster.start_worker("w1", slots=4)
        yield cluster


def _log_tails(root: Path) -> str:
    return "".join(p.read_text(errors="replace")[-2000:] for p in sorted(root.glob("*.log")))


async def counted(bootstrap: str, tag: str, expected: int, timeout_s: float) -> list[object]:
    return list(await read_committed(bootstrap, f"counts-{tag}", expected, timeout_s))


async def one_run(system: str, bootstrap: str, posts: list[str]) -> tuple[float, str]:
    """Seconds from the first post produced to the last count visible, and the verdict."""
    tag = uuid.uuid4().hex[:8]
    await ensure_topics(bootstrap, pipeline_of(wordcount.make_app(tag)).build())
    expected = Counter(w for p in posts for w in wordcount.WORDS_RE.findall(p))
    total = sum(expected.values()) + 1  # the warm-up's one word
    root = Path(tempfile.mkdtemp(prefix=f"faust-both-{system}-"))
    run = faust_worker if system == "faust" else sluicegate_job
    try:
        with run(root, bootstrap, tag):
            await produce_lines(bootstrap, f"posts-{tag}", [json.dumps("warmup")])
            if len(await counted(bootstrap, tag, 1, WARMUP_S)) < 1:
                logs = await asyncio.to_thread(_log_tails, root)
                print(f"  {system}: no warm-up count in {WARMUP_S:.0f} s:\n{logs}", flush=True)
                return float("nan"), "did not start"
            start = time.monotonic()
            await produce_lines(bootstrap, f"posts-{tag}", [json.dumps(p) for p in posts])
            records = await counted(bootstrap, tag, total, 600)
            seconds = time.monotonic() - start
            await asyncio.sleep(3)  # a grace period to see late duplicates, not a wait
            records = await counted(bootstrap, tag, total + 1, 5)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    seen: dict[str, list[int]] = defaultdict(list)
    for r in records:
        seen[r.key.decode()].append(int(json.loads(r.value)))  # type: ignore[attr-defined]
    expected["warmup"] += 1
    exact = all(seen.get(w, []) == list(range(1, n + 1)) for w, n in expected.items())
    exact = exact and set(seen) == set(expected)
    return seconds, "exact" if exact else f"WRONG ({len(records)} of {total} records)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="2,000 posts, one round")
    args = parser.parse_args()
    posts = make_posts(2_000 if args.quick else args.posts)
    rounds = 1 if args.quick else args.rounds
    with kafka_bootstrap() as bootstrap:  # the development broker starts outside the loop
        times, verdicts = asyncio.run(measure(bootstrap, posts, rounds))
    words = sum(len(wordcount.WORDS_RE.findall(p)) for p in posts)
    rows = [
        [system, f"{median(t):.1f}", f"{words / median(t):,.0f}", ", ".join(verdicts[system])]
        for system, t in times.items()
    ]
    report_table(
        BENCH, f"the unchanged faust word count both ways ({len(posts)} posts, {words} words)",
        ["system", "seconds (median)", "words/s", "output"], rows,
        ["faust-streaming 0.15.3 worker (exactly_once) vs sluicegate faust adapter, 1 process "
         "each; to the last count visible read_committed"],
    )  # fmt: skip


async def measure(
    bootstrap: str, posts: list[str], rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    """Each system once per round, the order alternating from round to round."""
    times: dict[str, list[float]] = defaultdict(list)
    verdicts: dict[str, list[str]] = defaultdict(list)
    for n in range(rounds):
        for system in ["sluicegate", "faust"] if n % 2 == 0 else ["faust", "sluicegate"]:
            seconds, verdict = await one_run(system, bootstrap, posts)
            print(f"  round {n + 1}: {system}: {seconds:.1f} s, {verdict}", flush=True)
            times[system].append(seconds)
            verdicts[system].append(verdict)
    return times, verdicts


if __name__ == "__main__":
    main()

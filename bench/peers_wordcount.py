"""Word count side by side with Quix Streams and faust-streaming: one broker, same input.

    uv run python -m bench.peers_wordcount [--lines 20000] [--rounds 3] [--processes 1,2]
        [--systems sluicegate,quix,faust]

Every system runs the same pipeline, stage for stage, on the same input: lines (4 partitions,
UTF-8 text) → split on whitespace → a topic keyed by the word (4 partitions) → a running count
per word in RocksDB state (200 distinct words) → ``counts-<tag>``, one record per word
occurrence: key the word, value its count as decimal text. Each commits every second, in its
best mode; the guarantee column says what each one's output is, as observed (below):

* **sluicegate**: ``sluicegate.testing.word_count`` (tokenizer x2, counter x2,
  exactly-once sink), a coordinator checkpointing every 1 s and 1 or 2 workers as real
  processes (`bench.processes.ProcessCluster`; 4 or 2 slots each, as many as the subtasks, so
  the coordinator runs with ``--settle 0``: its first placement does not wait a second for
  more workers);
* **Quix Streams** (``bench/peers/quix_wordcount.py``): ``processing_guarantee="exactly-once"``,
  ``commit_interval=1.0``, RocksDB state with changelog topics, ``group_by`` for the word topic;
  1 or 2 processes in one consumer group;
* **faust-streaming** (``bench/peers/faust_wordcount.py``): a table in RocksDB with its
  changelog, ``broker_commit_interval=1.0``; 1 or 2 workers. ``processing_guarantee`` is
  ``exactly_once`` at 1 process and ``at_least_once`` at 2, where two ``exactly_once`` workers
  stall (`faust_guarantee_at`; ``--faust-guarantee`` forces one). With faust-streaming 0.15.3
  its ``counts-<tag>`` has no transaction markers even with ``exactly_once``: its sends to the
  output are not in a transaction, so a crash can duplicate counts, and the table labels it
  at-least-once.

Whether an output is transactional is measured, not assumed (`transaction_markers`): after a
run, the offsets of ``counts-<tag>`` span more than the records read from it only if commit
or abort markers (control records, which take an offset each) are among them.

The peers run in environments of their own with their pinned versions (`peer_python`: made
once with ``uv`` under ``~/.cache/sluicegate/bench-envs`` and reused, so that a cold start
times the peer's start, not the making of its environment, as sluicegate's times the start
of an installed package), and nothing of theirs is imported here. A run, on fresh topics: start the
processes, wait until the consumer group has every process (peers) and a warm-up line on each
input partition has come out counted (every system: it is running end to end), then produce
every input line (as fast as one producer writes) and wait for the last count visible to a
``read_committed`` consumer of ``counts-<tag>``: what a user downstream sees. Two times: *warm*
from the first input line produced, *cold* from the moment the processes are launched (their
start-up, the consumer group's forming and the warm-up's commit included).
Then every word's counts must be exactly ``1, 2, …, n`` (no gap, no duplicate, none missing):
anything else aborts the benchmark with `WrongCountsError`. A system that never starts (the
warm-up not counted within 180 s) is run again on fresh topics, at most 3 times
(`started_within`).

Rounds are paired: each round runs every setup once, in an order rotated from round to round
(drift on a noisy machine hits all). Printed: median and spread (min-max) of the warm seconds,
words/s, the median cold seconds, and per round the ratio of each peer's time to sluicegate's
at the same process count (above 1: sluicegate is faster), warm and cold, with its median and
spread.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import logging
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import TypeVar

from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.errors import KafkaError

from bench.cpu import BrokerCpu, tree_cpu
from bench.processes import ProcessCluster, kafka_bootstrap
from bench.stats import median_spread
from bench.table import out_dir, record, report_table
from sluicegate.devkafka.jars import default_kafka_home
from sluicegate.operators.kafka import clients as kafka_clients
from sluicegate.operators.runtime.readers import committed_from_start
from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.testing import PARTITIONS, counts_by_word, produce_lines, word_count

BENCH = "peers_wordcount"
_REPO = Path(__file__).resolve().parent.parent
_WORDS = [f"w{i:03d}" for i in range(200)]
WARMUP = "warmup"
PEERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "quix": ("quix_wordcount.py", ("quixstreams==3.28.1",)),
    "faust": ("faust_wordcount.py", ("faust-streaming==0.15.3", "rocksdict==0.3.29")),
}
GUARANTEE = {
    "sluicegate": "exactly-once sink, checkpoint every 1 s",
    "quix": "exactly-once, commit_interval=1.0",
}
NOT_TRANSACTIONAL = "at-least-once: no transaction markers on its output"
_READY_TIMEOUT_S = 180.0
T = TypeVar("T")


class WrongCountsError(RuntimeError):
    """A system's output was not every word's ``1..n`` exactly once."""

    def __init__(self, setup: str, word: str, expected: int, got: list[int]) -> None:
        shown = got if len(got) <= 12 else [*got[:6], "...", *got[-6:]]
        super().__init__(
            f"{setup}: word {word!r} appeared {expected} times but its counts were {shown} "
            f"({len(got)} records): wrong output, the benchmark is void"
        )
        self.setup, self.word, self.expected, self.got = setup, word, expected, got


class NotReadyError(TimeoutError):
    """A system did not count the warm-up lines in time: it never started working."""


async def started_within(tries: int, setup: str, run: Callable[[], Awaitable[T]]) -> T:
    """``run()``, again on fresh topics when the system never started (at most ``tries``
    times): a peer that fails to start now and then (faust at 2 processes) does not void the
    whole benchmark; a wrong count or a run that stalls after starting still does."""
    for attempt in range(1, tries + 1):
        try:
            return await run()
        except NotReadyError as exc:
            if attempt == tries:
                raise
            print(f"  {setup} did not start ({exc}); again on fresh topics")
    raise AssertionError("unreachable")


@dataclass(frozen=True, slots=True)
class Timed:
    """One run: seconds from the first line produced (warm) and from the launch of the
    processes (cold) to the last count visible, whether the output had transaction markers,
    and the CPU seconds of the system's processes and of the broker over the warm span
    (the broker's None when it is not a local process)."""

    warm: float
    cold: float
    transactional: bool
    cpu: float
    broker_cpu: float | None


@dataclass(frozen=True, slots=True)
class Setup:
    system: str
    processes: int

    @property
    def name(self) -> str:
        return f"{self.system} x{self.processes}"


def make_lines(count: int) -> list[str]:
    rng = random.Random(1)
    return [" ".join(rng.choices(_WORDS, k=rng.randint(1, 5))) for _ in range(count)]


def check_counts(
    setup: Setup, records: list[ConsumerRecord[bytes, bytes]], expected: Counter[str]
) -> None:
    """Raise `WrongCountsError` unless each word's counts are exactly ``1..n``."""
    seen = counts_by_word(records)
    for word in sorted(set(expected) | set(seen)):
        if seen.get(word, []) != list(range(1, expected[word] + 1)):
            raise WrongCountsError(setup.name, word, expected[word], seen.get(word, []))


Alive = Callable[[], None]
"""Raises if a process of the setup under test has exited."""


@dataclass(frozen=True, slots=True)
class Processes:
    """The processes of the setup under test: ``alive`` raises if one has exited; ``pids``
    are the ones started (their children count with them, `bench.cpu.tree_cpu`)."""

    alive: Alive
    pids: list[int]


def peer_python(system: str) -> Path:
    """The Python of an environment with ``system``'s pinned packages: made on first use (a
    marker file naming the pins says it is complete), then reused."""
    _, pins = PEERS[system]
    env = default_kafka_home() / "bench-envs" / f"{system}-{_pins_digest(pins)}"
    python, marker = env / "bin" / "python", env / "pins.txt"
    if marker.is_file() and marker.read_text() == "\n".join(pins):
        return python
    uv = shutil.which("uv") or str(_REPO / ".tools" / "bin" / "uv")
    shutil.rmtree(env, ignore_errors=True)
    subprocess.run([uv, "venv", "--quiet", "--python", "3.11", str(env)], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), *pins], check=True)
    marker.write_text("\n".join(pins))
    return python


def _pins_digest(pins: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(pins).encode()).hexdigest()[:12]


@contextlib.contextmanager
def peer_processes(
    setup: Setup, root: Path, bootstrap: str, tag: str, extra: Sequence[str] = ()
) -> Iterator[Processes]:
    """``setup.processes`` processes of a peer, each in its own session; all killed on exit.
    ``extra``: more arguments for its script."""
    script, _ = PEERS[setup.system]
    python = peer_python(setup.system)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    children: list[tuple[subprocess.Popen[bytes], Path]] = []

    def alive() -> None:
        for child, log in children:
            if child.poll() is not None:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{setup.name} exited with {child.returncode}:\n{tail}")

    try:
        for n in range(setup.processes):
            state = root / f"state-{n}"
            state.mkdir()
            log = root / f"{setup.system}-{n}.log"
            command = [str(python), str(_REPO / "bench" / "peers" / script),
                       "--bootstrap", bootstrap, "--tag", tag, "--state-dir", str(state),
                       *extra]  # fmt: skip
            with log.open("wb") as out:
                child = subprocess.Popen(
                    command, env=env, cwd=root, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            children.append((child, log))
        yield Processes(alive, [child.pid for child, _ in children])
    except BaseException:
        kept = out_dir() / "logs" / tag
        kept.mkdir(parents=True, exist_ok=True)
        for _, log in children:
            shutil.copy(log, kept / log.name)
        print(f"  {setup.name} failed: its logs are in {kept}")
        raise
    finally:
        for child, _ in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()


@contextlib.contextmanager
def sluicegate_processes(setup: Setup, root: Path, bootstrap: str, tag: str) -> Iterator[Processes]:
    """A coordinator (checkpoint every 1 s) and ``setup.processes`` workers, 4 slots in all:
    as many as the job's subtasks, so the first placement need not wait for more workers to
    join (``--settle 0``; it waits until the workers started have the slots)."""
    imports = "from sluicegate.testing import word_count"
    with ProcessCluster(root, bootstrap, imports, f"word_count({tag!r})") as cluster:
        cluster.start_coordinator(interval=1.0, settle=0.0)
        for n in range(setup.processes):
            cluster.start_worker(f"w{n}", slots=4 // setup.processes)
        yield Processes(cluster.check_alive, [p.pid for p in cluster.processes.values()])


async def group_members(bootstrap: str, group: str) -> tuple[str, int]:
    """The state of consumer group ``group`` and how many members it has."""
    admin = kafka_clients.admin(bootstrap)
    try:
        await admin.start()
        (response,) = await admin.describe_consumer_groups([group])
    except KafkaError as e:  # e.g. no coordinator yet: the group is not there yet
        return type(e).__name__, 0
    finally:
        await admin.close()
    (described,) = response.to_object()["groups"]
    return str(described["state"]), len(described["members"])


async def wait_for_group(bootstrap: str, group: str, members: int, alive: Alive) -> None:
    """Until consumer group ``group`` is stable with ``members`` members."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while (state := await group_members(bootstrap, group)) != ("Stable", members):
        alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"group {group} is {state}, not Stable with {members} members")
        await asyncio.sleep(0.2)


async def read_until(
    sink: AIOKafkaConsumer,
    records: list[ConsumerRecord[bytes, bytes]],
    total: int,
    alive: Alive,
    timeout_s: float,
) -> None:
    """Append what ``sink`` reads to ``records`` until there are ``total``."""
    deadline = time.monotonic() + timeout_s
    while len(records) < total:
        alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(records)} of {total} counts within {timeout_s:.0f} s")
        for batch in (await sink.getmany(timeout_ms=50, max_records=50_000)).values():
            records.extend(batch)


async def warm_up(bootstrap: str, topic: str) -> None:
    """One line ``warmup`` on each partition of ``topic``."""
    producer = kafka_clients.producer(bootstrap, enable_idempotence=True)
    try:
        await producer.start()
        for partition in range(PARTITIONS):
            await producer.send_and_wait(topic, WARMUP.encode(), partition=partition)
    finally:
        await producer.stop()


async def run_once(
    bootstrap: str, setup: Setup, lines: list[str], expected: Counter[str], faust_guarantee: str
) -> Timed:
    """Warm and cold seconds to the last count visible ``read_committed`` (`Timed`)."""
    tag = uuid.uuid4().hex[:8]
    await ensure_topics(bootstrap, word_count(tag))  # lines-, words-, counts-<tag>, 4 each
    launched = time.perf_counter()
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sluicegate-bench-")))
        if setup.system == "sluicegate":
            running = stack.enter_context(sluicegate_processes(setup, root, bootstrap, tag))
        else:
            guarantee = faust_guarantee_at(faust_guarantee, setup.processes)
            extra = ["--guarantee", guarantee] if setup.system == "faust" else []
            running = stack.enter_context(peer_processes(setup, root, bootstrap, tag, extra))
            await wait_for_group(bootstrap, f"wordcount-{tag}", setup.processes, running.alive)
        alive, broker = running.alive, BrokerCpu(bootstrap)
        async with committed_from_start(bootstrap, f"counts-{tag}", PARTITIONS) as sink:
            records: list[ConsumerRecord[bytes, bytes]] = []
            await warm_up(bootstrap, f"lines-{tag}")
            try:
                await read_until(sink, records, PARTITIONS, alive, _READY_TIMEOUT_S)
            except TimeoutError as exc:
                raise NotReadyError(f"warm-up: {exc}") from exc
            started, cpu_started = time.perf_counter(), tree_cpu(running.pids)
            broker.start()
            await produce_lines(bootstrap, f"lines-{tag}", lines)
            await read_until(sink, records, expected.total(), alive, 1800.0)
            finished, cpu = time.perf_counter(), tree_cpu(running.pids) - cpu_started
            broker_cpu = broker.seconds()
            markers = await transaction_markers(sink, records)
    check_counts(setup, records, expected)
    timed = Timed(finished - started, finished - launched, markers > 0, cpu, broker_cpu)
    print(f"  {setup.name}: {timed.warm:.2f}s warm, {timed.cold:.2f}s cold, {cpu:.2f} CPU s "
          f"warm, every count right, {markers} transaction markers in its output")  # fmt: skip
    return timed


async def transaction_markers(
    sink: AIOKafkaConsumer, records: list[ConsumerRecord[bytes, bytes]]
) -> int:
    """How many offsets of the sink's partitions hold no record ``records`` has: control
    records (a transaction's commit or abort marker), since every count was read and a
    ``read_committed`` end offset is past the last marker once every transaction ended."""
    partitions = sorted(sink.assignment(), key=lambda tp: tp.partition)
    first = await sink.beginning_offsets(partitions)
    end = await sink.end_offsets(partitions)
    return int(sum(end[tp] - first[tp] for tp in partitions)) - len(records)


def faust_guarantee_at(chosen: str, processes: int) -> str:
    """faust's ``processing_guarantee`` for a run at ``processes`` (``chosen`` unless auto).

    Auto is ``exactly_once`` at 1 process and ``at_least_once`` above: with faust-streaming
    0.15.3, two ``exactly_once`` workers stall after their first rebalance ("Invalid state
    transition TransactionState.IN_TRANSACTION -> IN_TRANSACTION" when a transaction begins,
    "Error in recovery" on the table's changelog) and never count every warm-up line.
    """
    if chosen != "auto":
        return chosen
    return "exactly_once" if processes == 1 else "at_least_once"


def guarantee_of(setup: Setup, faust_guarantee: str, transactional: bool = True) -> str:
    """What the table calls the setup's guarantee: what it was set to, unless its output had
    no transaction markers (then it is at-least-once, whatever the setting says)."""
    if setup.system == "faust":
        named = f"faust {faust_guarantee_at(faust_guarantee, setup.processes)}, commit every 1 s"
    else:
        named = GUARANTEE[setup.system]
    return named if transactional else f"{NOT_TRANSACTIONAL} ({named})"


def cpu_per_word(runs: Sequence[Timed], words: int) -> tuple[str, str]:
    """Median (and spread) of the runs' CPU µs a word; the same with the broker's CPU added
    (``-`` when the broker is not a local process)."""
    own = [t.cpu / words * 1e6 for t in runs]
    shown = median_spread(own)
    if any(t.broker_cpu is None for t in runs):
        return shown, "-"
    both = [(t.cpu + (t.broker_cpu or 0.0)) / words * 1e6 for t in runs]
    return shown, f"{median(both):.1f}"


def ratio_of(peer: Sequence[float], ours: Sequence[float]) -> str:
    """Median (and spread) of the per-round ``peer / ours`` time ratios."""
    ratios = [p / o for p, o in zip(peer, ours, strict=True)]
    return f"{median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


async def bench(
    bootstrap: str, lines_count: int, rounds: int, setups: list[Setup], faust_guarantee: str
) -> None:
    lines = make_lines(lines_count)
    expected = Counter(word for line in lines for word in line.split())
    expected[WARMUP] += PARTITIONS
    words = sum(len(line.split()) for line in lines)
    times: dict[Setup, list[Timed]] = {s: [] for s in setups}
    for system in dict.fromkeys(s.system for s in setups if s.system in PEERS):
        peer_python(system)  # made before any timing, once
    for r in range(rounds):
        print(f"round {r + 1} of {rounds}")
        for setup in setups[r % len(setups) :] + setups[: r % len(setups)]:
            run = functools.partial(run_once, bootstrap, setup, lines, expected, faust_guarantee)
            timed = await started_within(3, setup.name, run)
            times[setup].append(timed)
            record(BENCH, "run", system=setup.system, processes=setup.processes, round=r,
                   seconds=timed.warm, cold_seconds=timed.cold, lines=lines_count, words=words,
                   transactional=timed.transactional, cpu_seconds=timed.cpu,
                   broker_cpu_seconds=timed.broker_cpu)  # fmt: skip
    rows = []
    for setup, timed_runs in times.items():
        warm = [t.warm for t in timed_runs]
        cold = [t.cold for t in timed_runs]
        ours = times.get(Setup("sluicegate", setup.processes))
        peer = ours is not None and setup.system != "sluicegate"
        transactional = all(t.transactional for t in timed_runs)
        rows.append((setup.name, guarantee_of(setup, faust_guarantee, transactional),
                     f"{median(warm):.2f}", f"{min(warm):.2f}-{max(warm):.2f}",
                     f"{words / median(warm):,.0f}", f"{median(cold):.2f}",
                     ratio_of(warm, [t.warm for t in ours]) if peer and ours else "",
                     ratio_of(cold, [t.cold for t in ours]) if peer and ours else "",
                     *cpu_per_word(timed_runs, words)))  # fmt: skip
    header = ("setup", "guarantee (observed)", "warm median s", "warm spread s", "words/s",
              "cold median s", "warm: its time / ours", "cold: its time / ours",
              "CPU µs/word (spread)", "with the broker's µs/word")  # fmt: skip
    report_table(
        BENCH,
        f"Word count side by side: {lines_count:,} lines, {words:,} words, {rounds} rounds",
        header,
        rows,
        [f"Warm: from the first line produced to the last count visible read_committed; cold: "
         f"from launching the processes (start-up, the group forming and a warm-up line per "
         f"partition counted and committed included); ratios are per round (above 1: "
         f"sluicegate faster), median (min-max); the same input for every system; versions: "
         f"{', '.join(pin for _, pins in PEERS.values() for pin in pins)}.",
         "CPU: of the system's processes (for sluicegate its coordinator and workers; a "
         "peer's children included) and of the broker, over the warm span, per word counted; "
         "median of the rounds (min-max).",
         "Guarantee: as set, unless the output topic had no transaction markers after the run "
         "(then at-least-once: a crash can duplicate counts).",
         "A count becomes visible only with a commit: sluicegate's when the checkpoint after "
         "it completes, the peers' after their word topic's transaction too; 1-2 s with a "
         "commit every second. Runs much longer than that measure throughput; runs near it "
         "mostly that floor, and a ratio to a run near it is a lower bound."],
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", default="1,2", help="process counts to run each at")
    parser.add_argument("--systems", default="sluicegate,quix,faust")
    parser.add_argument(
        "--faust-guarantee",
        default="auto",
        choices=("auto", "exactly_once", "at_least_once"),
        help="faust's processing_guarantee (auto: exactly_once at 1 process, else at_least_once)",
    )
    args = parser.parse_args()
    systems = args.systems.split(",")
    unknown = set(systems) - {"sluicegate", *PEERS}
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}")
    setups = [Setup(s, int(n)) for n in args.processes.split(",") for s in systems]
    # Fresh topics: the sink reader's first offset fetch can meet a leader not elected yet (and
    # retries); anything that matters surfaces as an exception or a wrong count.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    with kafka_bootstrap() as bootstrap:
        asyncio.run(bench(bootstrap, args.lines, args.rounds, setups, args.faust_guarantee))


if __name__ == "__main__":
    main()

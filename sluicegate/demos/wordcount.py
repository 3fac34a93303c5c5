"""The demo pipeline (``make demo``): a checkpointed word count that survives a crash.

It runs the real engine in one process (`LocalJob`): sentences into a source topic, a tokenizer
and a counter at parallelism 2, running counts into an exactly-once sink. Midway the job is
crashed (every task cancelled) and recovered from its last completed checkpoint at a new
attempt; a ``read_committed`` consumer then checks that every word's counts arrived exactly
once: 1, 2, …, N, no gap and no duplicate. Later issues grow this into the agent demo.
"""

from __future__ import annotations

import random
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from sluicegate import JobGraph
from sluicegate.coordinator.settings import CoordinatorSettings
from sluicegate.operators.kafka import KafkaLike
from sluicegate.operators.storage import open_storage
from sluicegate.testing import LocalJob, counts_by_word, produce_lines, read_committed, word_count

__all__ = ["demo_graph", "run_demo"]

_WORDS = ("kafka", "barrier", "snapshot", "agent", "tool", "model", "offset", "journal")


def demo_graph() -> JobGraph:
    """The demo word count with fixed topic names (``lines-demo`` ...), for ``--pipeline``."""
    return word_count("demo")


async def run_demo(
    bootstrap: KafkaLike, records: int, *, state_dir: Path | None = None, seed: int = 7
) -> int:
    """Run the word count with a crash in the middle; print what happened; 0 when exact."""
    tag = uuid.uuid4().hex[:8]
    graph = word_count(tag)
    rng = random.Random(seed)
    lines = [" ".join(rng.choices(_WORDS, k=rng.randint(1, 4))) for _ in range(records)]
    expected = Counter(word for line in lines for word in line.split())
    root = state_dir or Path(tempfile.mkdtemp(prefix="sluicegate-demo-"))
    storage = open_storage(root / "checkpoints")
    print(f"pipeline {graph.name}: lines -> tokenizer x2 -> words -> counter x2 -> counts (sink)")
    print(f"checkpoints in {root / 'checkpoints'}, every 0.5 s")

    def job() -> LocalJob:
        return LocalJob(
            graph,
            bootstrap=bootstrap,
            storage=storage,
            work_dir=root / "work",
            settings=CoordinatorSettings(interval_seconds=0.5),
        )

    started = time.monotonic()
    first = job()
    await first.start()
    await produce_lines(bootstrap, f"lines-{tag}", lines[: records // 2])
    print(f"produced {records // 2} lines")
    await first.wait_for_checkpoints(2, timeout_s=120)
    await first.crash()
    print(f"CRASH after checkpoints {first.completed}: every subtask cancelled at once")

    second = job()
    await second.start()
    print(f"recovered at attempt {second.attempt} from checkpoint {second.restored_from}")
    await produce_lines(bootstrap, f"lines-{tag}", lines[records // 2 :])
    print(f"produced {records - records // 2} more lines")

    total = sum(expected.values())
    published = await read_committed(bootstrap, f"counts-{tag}", total, timeout_s=300)
    second.raise_failure()
    await second.crash()
    elapsed = time.monotonic() - started

    seen = counts_by_word(published)
    print(f"{len(published)} counts published exactly-once in {elapsed:.1f}s:")
    exact = len(published) == total
    for word, n in expected.most_common():
        ok = seen[word] == list(range(1, n + 1))
        exact = exact and ok
        print(
            f"  {word:<10} {n:>7}  {'1..N exactly once' if ok else 'WRONG: ' + str(seen[word][:5])}"
        )
    print("OK: every word counted exactly once across the crash" if exact else "MISMATCH")
    return 0 if exact else 1

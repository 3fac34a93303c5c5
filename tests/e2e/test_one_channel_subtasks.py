"""Subtasks that read one channel, across real processes and the Kafka control topics.

A subtask reading exactly one channel (here: 4 tokenizers on a source of 4 partitions) is
aligned the moment its barrier arrives, so it never waits for alignment. Its ack once carried
an alignment of a tiny negative number of seconds, which the coordinator's decoder of control
records refuses: no checkpoint completed, and an exactly-once sink published nothing. The
in-process job (`LocalJob`) passes acks without encoding them, so only processes show it.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from pathlib import Path

from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.testing import PARTITIONS, produce_lines, read_committed, word_count
from tests.e2e.cluster import Cluster
from tests.helpers import assert_counted_exactly_once

WORDS = [f"w{i}" for i in range(10)]


async def test_subtasks_reading_one_channel_complete_checkpoints(
    kafka_bootstrap: str, tmp_path: Path, cluster_factory: list[Cluster]
) -> None:
    rng = random.Random(4)
    tag = uuid.uuid4().hex[:8]
    module = (
        "from sluicegate.testing import word_count\n"
        f"graph = word_count({tag!r}, tokenizers={PARTITIONS})\n"
    )
    await ensure_topics(kafka_bootstrap, word_count(tag, tokenizers=PARTITIONS))
    cluster = Cluster(tmp_path, module, kafka_bootstrap, slots=8)
    cluster_factory.append(cluster)
    for name in ("coordinator", "w1"):
        cluster.start(name)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(1, 3))) for _ in range(2000)]
    expected = Counter(w for line in lines for w in line.split())
    await produce_lines(kafka_bootstrap, f"lines-{tag}", lines)

    records = await read_committed(kafka_bootstrap, f"counts-{tag}", sum(expected.values()), 90)
    cluster.alive()
    assert_counted_exactly_once(records, expected)
    assert "does not decode" not in cluster.log_lines("coordinator", "does not decode")

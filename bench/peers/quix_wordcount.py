"""The Quix Streams side of ``bench.peers_wordcount``: the same word count, exactly-once.

    uv run --isolated --no-project --with quixstreams==3.28.1 \\
        python bench/peers/quix_wordcount.py --bootstrap HOST:PORT --tag TAG --state-dir DIR

Runs in its own throwaway environment (Quix Streams is not a dependency of the project), so it
imports nothing from the repository and reaches Quix Streams only through ``importlib``: mypy
of the project checks this file without it installed. Start it once per process; every
process of a run shares the consumer group ``wordcount-<tag>`` and has its own state folder.

The pipeline is the sluicegate word count's, stage for stage: ``lines-<tag>`` (values are
UTF-8 lines) → split on whitespace, one row per word → ``group_by`` the word (a repartition
topic, like sluicegate's ``words-<tag>``) → a count per word in RocksDB state (with its
changelog topic) → ``counts-<tag>``: key the word, value its running count as decimal text,
one record per word occurrence. ``processing_guarantee="exactly-once"`` and
``commit_interval=1.0``: outputs become visible to ``read_committed`` consumers when the
transaction of each commit commits, about every second, like sluicegate's exactly-once sink
with checkpoints every second. Runs until killed.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any


def split(line: str) -> list[str]:
    return line.split()


def count(word: str, state: Any) -> str:
    total = int(state.get("n", 0)) + 1
    state.set("n", total)
    return str(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--tag", required=True, help="topics lines-<tag> and counts-<tag>")
    parser.add_argument("--state-dir", required=True)
    args = parser.parse_args()
    quixstreams = importlib.import_module("quixstreams")
    app = quixstreams.Application(
        broker_address=args.bootstrap,
        consumer_group=f"wordcount-{args.tag}",
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once",
        commit_interval=1.0,
        state_dir=args.state_dir,
        use_changelog_topics=True,
        loglevel="WARNING",
    )
    lines = app.topic(f"lines-{args.tag}", key_deserializer="bytes", value_deserializer="str")
    counts = app.topic(f"counts-{args.tag}", key_serializer="str", value_serializer="str")
    sdf = app.dataframe(lines)
    sdf = sdf.apply(split, expand=True)
    sdf = sdf.group_by(
        lambda word: word,
        name="word",
        key_serializer="str",
        key_deserializer="str",
        value_serializer="str",
        value_deserializer="str",
    )
    sdf = sdf.apply(count, stateful=True)
    sdf.to_topic(counts)
    app.run()


if __name__ == "__main__":
    main()

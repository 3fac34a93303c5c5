"""The faust-streaming side of ``bench.peers_wordcount``: the same word count with a table.

    uv run --isolated --no-project --with faust-streaming==0.15.3 --with rocksdict==0.3.29 \\
        python bench/peers/faust_wordcount.py --bootstrap HOST:PORT --tag TAG --state-dir DIR

Runs in its own throwaway environment (faust is not a dependency of the project), so it
imports nothing from the repository and reaches faust only through ``importlib``: mypy of the
project checks this file without it installed. Start it once per process; every process of a
run is a worker of the app ``wordcount-<tag>`` (one consumer group) with its own data folder.

The pipeline is the sluicegate word count's, stage for stage: an agent on ``lines-<tag>``
splits each line on whitespace and sends ``(word, "1")`` to ``words-<tag>`` (keyed by the
word, so its partitions are the table's); an agent on ``words-<tag>`` adds one to the word's
entry of a table in RocksDB (``rocksdb://``, through rocksdict) with its changelog topic and
sends the running count to ``counts-<tag>``: key the word, value the count as decimal text,
one record per word occurrence. ``--guarantee`` is faust's ``processing_guarantee``
(``exactly_once``: transactional producers, ``read_committed`` consumers), committing every
``broker_commit_interval=1.0`` s. Runs until killed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import AsyncIterator
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--tag", required=True, help="topics lines-, words-, counts-<tag>")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--guarantee", default="exactly_once")
    args = parser.parse_args()
    faust = importlib.import_module("faust")
    app = faust.App(
        f"wordcount-{args.tag}",
        broker=f"kafka://{args.bootstrap}",
        store="rocksdb://",
        datadir=args.state_dir,
        processing_guarantee=args.guarantee,
        broker_commit_interval=1.0,
        consumer_auto_offset_reset="earliest",
        topic_partitions=4,
        web_enabled=False,
    )
    raw: dict[str, Any] = {"key_type": bytes, "value_type": bytes}
    raw |= {"key_serializer": "raw", "value_serializer": "raw"}
    lines = app.topic(f"lines-{args.tag}", **raw)
    words = app.topic(f"words-{args.tag}", **raw)
    counts = app.topic(f"counts-{args.tag}", **raw)
    table = app.Table("counts", default=int, partitions=4)

    async def tokenize(stream: AsyncIterator[bytes]) -> None:
        async for line in stream:
            for word in line.decode().split():
                await words.send(key=word.encode(), value=b"1")

    async def count(stream: Any) -> None:
        async for event in stream.events():
            total = table[event.key] + int(event.value)
            table[event.key] = total
            await counts.send(key=event.key, value=str(total).encode())

    app.agent(lines, name="tokenizer")(tokenize)
    app.agent(words, name="counter")(count)
    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn", "--without-web"]
    app.main()


if __name__ == "__main__":
    main()

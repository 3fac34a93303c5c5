"""faust's word count (the shape of faust's ``examples/word_count.py``): posts are split into
words, regrouped by word, counted in a table, and each new count is sent on.

Topics are ``posts-<tag>``, ``words-<tag>`` and ``counts-<tag>``, the app id
``faust-wordcount-<tag>``; the module-level ``app`` takes its tag from ``FAUST_APP_TAG`` and its
broker from ``FAUST_APP_BROKER`` (for ``faust -A tests.faust_apps.wordcount worker``), and
its ``processing_guarantee`` from ``FAUST_APP_GUARANTEE`` (default ``exactly_once``; sluicegate
ignores it: its sinks are always exactly-once). faust-streaming 0.15.3's own worker stalls on
this app with ``exactly_once`` when fed a few posts (its ``group_by`` stage barely moves:
``bench/faust_both_ways.py`` and docs/faust.md); the benchmark runs it ``at_least_once``.
"""

from __future__ import annotations

import os
import re
from typing import Any

import faust

WORDS_RE = re.compile(r"\w+")


def make_app(
    tag: str,
    broker: str = "kafka://127.0.0.1:9092",
    data_dir: str = "",
    guarantee: str = "exactly_once",
) -> Any:
    app = faust.App(
        f"faust-wordcount-{tag}", broker=broker, store="rocksdb://", topic_partitions=4,
        datadir=data_dir or f"/tmp/faust-wordcount-{tag}", web_enabled=False,
        consumer_auto_offset_reset="earliest", processing_guarantee=guarantee,
        broker_commit_interval=1.0,
    )  # fmt: skip
    posts_topic = app.topic(f"posts-{tag}", value_type=str)
    words_topic = app.topic(f"words-{tag}", value_type=str)
    counts_topic = app.topic(f"counts-{tag}", key_type=str, value_type=int)  # type: ignore[arg-type]
    word_counts = app.Table("word_counts", default=int)

    @app.agent(posts_topic)
    async def shuffle_words(posts: Any) -> None:
        async for post in posts:
            for word in WORDS_RE.findall(post):
                await words_topic.send(value=word)

    @app.agent(words_topic)
    async def count_words(words: Any) -> None:
        async for word in words.group_by(lambda word: word, name="word"):
            word_counts[word] += 1
            await counts_topic.send(key=word, value=word_counts[word])

    return app


app = make_app(
    os.environ.get("FAUST_APP_TAG", "demo"),
    os.environ.get("FAUST_APP_BROKER", "kafka://127.0.0.1:9092"),
    os.environ.get("FAUST_APP_DATA_DIR", ""),
    os.environ.get("FAUST_APP_GUARANTEE", "exactly_once"),
)

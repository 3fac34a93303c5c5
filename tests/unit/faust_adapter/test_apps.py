"""faust apps as faust's documentation writes them, read and run by the adapter in memory:
agents, group_by, tables, faust.Record values, json and raw codecs, sends and yielded replies."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import faust
import pytest

from sluicegate.faust_adapter import AgentStepError, build_pipeline, read_app
from sluicegate.faust_adapter.binding import TABLE_PREFIX
from tests.faust_apps import accounts, wordcount
from tests.unit.faust_adapter.runner import MemoryRun


def counts_of(run: MemoryRun, topic: str) -> dict[str, list[int]]:
    seen: dict[str, list[int]] = defaultdict(list)
    for key, value in run.sinks[topic]:
        seen[(key or b"").decode()].append(json.loads(value))
    return dict(seen)


async def test_the_word_count_maps_to_three_operators_and_counts_exactly() -> None:
    app = wordcount.make_app("u1")
    plan = read_app(app, modules=[wordcount])
    assert plan.refusals == ()
    pipeline = build_pipeline(plan)
    assert list(pipeline.operators) == [
        "tests.faust_apps.wordcount.shuffle_words",
        "tests.faust_apps.wordcount.count_words.group-by",
        "tests.faust_apps.wordcount.count_words",
    ]
    kinds = {name: spec.kind.value for name, spec in pipeline.topics.items()}
    repartition = (
        "sluicegate.faust-wordcount-u1."  # faust's name: <agent>-<topic>-<name>-repartition
        "tests.faust_apps.wordcount.count_words-words-u1-word-repartition"
    )
    assert kinds == {"posts-u1": "source", "words-u1": "topic", "counts-u1": "sink",
                     repartition: "topic"}  # fmt: skip
    pipeline.build()

    run = MemoryRun(pipeline)
    for post in ["the cat", "the dog, the end", "cat"]:
        run.feed("posts-u1", json.dumps(post).encode())  # value_type=str: faust's json codec
    assert run.failures == []
    assert counts_of(run, "counts-u1") == {
        "the": [1, 2, 3], "cat": [1, 2], "dog": [1], "end": [1]
    }  # fmt: skip
    rows = run.states["tests.faust_apps.wordcount.count_words"].rows
    # keys and values encoded as faust's stores encode them (json by default)
    assert rows[TABLE_PREFIX + b'word_counts/"the"'] == b"3"


async def test_records_group_by_a_field_and_yielded_replies_go_to_the_sink() -> None:
    app = accounts.make_app("u2")
    run = MemoryRun(build_pipeline(read_app(app, modules=[accounts])))
    for account, amount in [("a", 5), ("b", 1), ("a", 7)]:
        deposit = accounts.Deposit(account=account, amount=amount)
        run.feed("deposits-u2", deposit.dumps(), key=None)
    assert run.failures == []
    totals = [accounts.Total.loads(v) for _, v in run.sinks["totals-u2"]]
    assert [(t.account, t.total) for t in totals] == [("a", 5), ("b", 1), ("a", 12)]
    grouped = [k for k in run.states if k.endswith(".group-by")]
    assert grouped == ["tests.faust_apps.accounts.add_deposits.group-by"]


async def test_a_value_that_does_not_decode_fails_its_record_and_the_next_is_counted() -> None:
    app = accounts.make_app("u3")
    run = MemoryRun(build_pipeline(read_app(app, modules=[accounts])))
    run.feed("deposits-u3", b"\xff not json")
    run.feed("deposits-u3", accounts.Deposit(account="a", amount=2).dumps())
    assert len(run.failures) == 1
    assert [accounts.Total.loads(v).total for _, v in run.sinks["totals-u3"]] == [2]


def raw_app(tag: str) -> Any:
    app = faust.App(f"raw-{tag}", broker="kafka://127.0.0.1:1", topic_partitions=2)
    src = app.topic(f"in-{tag}", key_type=bytes, value_type=bytes, value_serializer="raw",
                    key_serializer="raw")  # fmt: skip
    out = app.topic(f"out-{tag}", key_type=bytes, value_type=bytes, value_serializer="raw",
                    key_serializer="raw")  # fmt: skip
    hidden: list[Any] = []

    @app.agent(src)
    async def upper(stream: Any) -> None:
        async for key, value in stream.items():
            if value == b"elsewhere":
                await app.topic(f"undeclared-{tag}").send(value=b"x")
            if value == b"boom":
                raise RuntimeError("boom")
            await out.send(key=key, value=value.upper())
            hidden.append(value)

    return app


async def test_raw_codec_items_and_a_failing_record_restarts_the_agent() -> None:
    run = MemoryRun(build_pipeline(read_app(raw_app("u4"))))
    run.feed("in-u4", b"abc", key=b"k1")
    run.feed("in-u4", b"boom", key=b"k2")
    run.feed("in-u4", b"def", key=b"k3")
    assert run.sinks["out-u4"] == [(b"k1", b"ABC"), (b"k3", b"DEF")]
    assert [str(e) for _, e in run.failures] == ["boom"]


async def test_a_send_to_a_topic_the_agent_does_not_name_fails_the_record() -> None:
    run = MemoryRun(build_pipeline(read_app(raw_app("u5"))))
    run.feed("in-u5", b"elsewhere", key=b"k")
    ((_, error),) = run.failures
    assert isinstance(error, AgentStepError)
    assert "undeclared-u5" in str(error)
    assert run.sinks["out-u5"] == []


async def test_tables_are_not_usable_outside_an_agents_record() -> None:
    app = wordcount.make_app("u6")
    build_pipeline(read_app(app, modules=[wordcount])).operators[
        "tests.faust_apps.wordcount.count_words"
    ].factory()
    table = app.tables["word_counts"]
    with pytest.raises(AgentStepError, match="used outside an agent"):
        table["x"] += 1

"""Pipeline declaration: what it derives and what it refuses, naming the culprit."""

from __future__ import annotations

import pytest

from sluicegate.operators.contract import Context, Operator, Record
from sluicegate.operators.exceptions import PipelineError
from sluicegate.operators.graph import SubtaskId
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.protocol.channels import Channel, TopicPartition
from sluicegate.operators.runtime.topics import wanted_topics
from sluicegate.operators.specs import OwnedTopic


def noop(record: Record, ctx: Context) -> None:
    """A process function that does nothing."""


def word_count(tokenizers: int = 2, counters: int = 2) -> Pipeline:
    p = Pipeline("wordcount")
    p.source("lines", partitions=4)
    p.topic("words", partitions=4)
    p.sink("counts", partitions=4)
    p.operator("tokenizer", noop, inputs="lines", outputs="words", parallelism=tokenizers)
    p.operator("counter", noop, inputs="words", outputs="counts", parallelism=counters)
    return p


def test_partitions_are_owned_in_contiguous_ranges() -> None:
    graph = word_count(counters=3).build()
    owned = {str(s): graph.input_partitions(s) for s in graph.subtasks("counter")}
    assert owned == {
        "counter#0": [TopicPartition("words", 0)],
        "counter#1": [TopicPartition("words", 1)],
        "counter#2": [TopicPartition("words", 2), TopicPartition("words", 3)],
    }


def test_channels_pair_each_owned_partition_with_every_writer() -> None:
    graph = word_count().build()
    l2, l3 = TopicPartition("lines", 2), TopicPartition("lines", 3)
    assert graph.channels(SubtaskId("tokenizer", 1)) == [
        Channel(l2, "source"),
        Channel(l3, "source"),
    ]
    w0, w1 = TopicPartition("words", 0), TopicPartition("words", 1)
    assert graph.channels(SubtaskId("counter", 0)) == [
        Channel(w0, "tokenizer#0"),
        Channel(w0, "tokenizer#1"),
        Channel(w1, "tokenizer#0"),
        Channel(w1, "tokenizer#1"),
    ]


def test_subtask_id_round_trips() -> None:
    assert SubtaskId.parse(str(SubtaskId("agent.refunds", 3))) == SubtaskId("agent.refunds", 3)
    with pytest.raises(ValueError, match="uid#index"):
        SubtaskId.parse("counter")


def refuse(p: Pipeline, culprit: str, words: str) -> None:
    with pytest.raises(PipelineError, match=words) as caught:
        p.build()
    assert caught.value.culprit == culprit


def test_refuses_a_cycle() -> None:
    p = Pipeline("loop")
    p.source("in", partitions=2)
    p.topic("a", partitions=2)
    p.topic("b", partitions=2)
    p.operator("first", noop, inputs=["in", "b"], outputs="a")
    p.operator("second", noop, inputs="a", outputs="b")
    refuse(p, "first", "cycle: first -> second -> first")


def test_refuses_a_duplicate_uid() -> None:
    p = word_count()
    with pytest.raises(PipelineError, match="duplicate operator uid") as caught:
        p.operator("counter", noop, inputs="words")
    assert caught.value.culprit == "counter"


def test_refuses_an_unknown_topic() -> None:
    p = word_count()
    p.operator("printer", noop, inputs="wrods")
    refuse(p, "printer", "unknown topic 'wrods'")


def test_refuses_parallelism_above_the_partition_count() -> None:
    refuse(word_count(counters=5), "counter", "parallelism 5 exceeds the 4 input partitions")


def test_refuses_a_sink_with_two_writers() -> None:
    p = word_count()
    p.operator("other", noop, inputs="words", outputs="counts")
    refuse(p, "counts", "a sink has one writer; it has counter, other")


def test_refuses_writing_a_source_and_reading_a_sink() -> None:
    p = word_count()
    p.operator("echo", noop, inputs="words", outputs="lines")
    refuse(p, "echo", "writes source topic 'lines'")
    q = word_count()
    q.operator("reader", noop, inputs="counts")
    refuse(q, "reader", "reads sink topic 'counts'")


def test_refuses_inputs_that_are_not_co_partitioned() -> None:
    p = word_count()
    p.source("approvals", partitions=2)
    p.operator("join", noop, inputs=["lines", "approvals"])
    refuse(p, "join", "not co-partitioned")


def test_refuses_a_topic_nobody_writes_and_bad_names() -> None:
    p = word_count()
    p.topic("orphan", partitions=1)
    refuse(p, "orphan", "no operator writes this topic")
    with pytest.raises(PipelineError, match="declared twice"):
        p.topic("orphan", partitions=1)
    with pytest.raises(PipelineError, match="operator uid"):
        p.operator("Bad Name", noop, inputs="lines")
    with pytest.raises(PipelineError, match="at least 1 partition"):
        p.topic("empty", partitions=0)


def test_an_operator_takes_a_function_or_a_factory_not_both() -> None:
    class Noop(Operator):
        def process(self, record: Record, ctx: Context) -> None:
            return None

    p = Pipeline("p")
    p.source("in", partitions=2)
    with pytest.raises(PipelineError, match="either a process function or an operator factory"):
        p.operator("a", inputs="in")
    with pytest.raises(PipelineError, match="either"):
        p.operator("a", noop, factory=Noop, inputs="in")
    p.operator("a", factory=Noop, inputs="in", owned_topics=[OwnedTopic("journal")])
    p.sink("never", partitions=1)
    p.operator("b", noop, inputs="in", outputs="never")
    graph = p.build()
    spec = graph.operators["a"]
    assert isinstance(spec.factory(), Noop)
    assert spec.factory() is not spec.factory()  # one instance per subtask
    assert spec.owned_topic_name("p", "journal") == "sluicegate.p.a.journal"
    names = {t.name: t.topic_configs for t in wanted_topics(graph)}
    assert names["sluicegate.p.a.journal"] == {"cleanup.policy": "compact"}

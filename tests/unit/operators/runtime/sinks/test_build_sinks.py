"""`build_sinks`: one sink per sink topic, shared by the topics of one guarantee; none for
topics between operators."""

from __future__ import annotations

from sluicegate.operators.contract import Context, Record
from sluicegate.operators.graph import JobGraph, SubtaskId
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.sinks.at_least_once import AtLeastOnceSink
from sluicegate.operators.runtime.sinks.building import build_sinks
from sluicegate.operators.runtime.sinks.exactly_once import ExactlyOnceSink
from tests.unit.operators.runtime.sinks.fakes import FakeSender, MemoryState


def nothing(record: Record, ctx: Context) -> None:
    return None


def graph() -> JobGraph:
    p = Pipeline("shop")
    p.source("orders", partitions=2)
    p.topic("enriched", partitions=2)
    p.sink("invoices", partitions=2)
    p.sink("receipts", partitions=1)
    p.sink("events", partitions=1, exactly_once=False)
    p.sink("audit", partitions=1, exactly_once=False)
    p.operator(
        "enrich",
        nothing,
        inputs="orders",
        outputs=["enriched", "invoices", "events", "receipts", "audit"],
        parallelism=2,
    )
    p.operator("count", nothing, inputs="enriched")
    return p.build()


def test_each_sink_topic_gets_the_sink_of_its_guarantee() -> None:
    sinks = build_sinks(
        graph(),
        SubtaskId("enrich", 1),
        bootstrap="127.0.0.1:1",  # never contacted: nothing is started
        appender=FakeSender(),
        metadata=MemoryState(),
    )
    assert list(sinks) == ["invoices", "events", "receipts", "audit"]
    assert isinstance(sinks["invoices"], ExactlyOnceSink)
    assert sinks["receipts"] is sinks["invoices"]  # one transaction for both
    assert isinstance(sinks["events"], AtLeastOnceSink)
    assert sinks["audit"] is sinks["events"]


def test_an_operator_without_sink_topics_has_no_sinks() -> None:
    sinks = build_sinks(
        graph(),
        SubtaskId("count", 0),
        bootstrap="127.0.0.1:1",
        appender=FakeSender(),
        metadata=MemoryState(),
    )
    assert sinks == {}

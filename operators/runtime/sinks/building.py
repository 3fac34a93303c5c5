"""Which `Sink` serves each sink topic of a subtask: the one place that reads the guarantee.

Topics with the same guarantee share one sink: every exactly-once topic of a subtask goes into
one `ExactlyOnceSink` (one write-ahead log, one transaction per completed checkpoint, one
transactional id ``sluicegate.<pipeline>.<uid#index>``, so the next attempt of this subtask
fences a zombie), every at-least-once topic into one `AtLeastOnceSink` over the subtask's
producer. Topics between operators get none.
"""

from __future__ import annotations

from sluicegate.operators.graph import JobGraph, SubtaskId
from sluicegate.operators.kafka import KafkaLike
from sluicegate.operators.runtime.sinks.at_least_once import AtLeastOnceSink, RecordAppender
from sluicegate.operators.runtime.sinks.contract import Sink
from sluicegate.operators.runtime.sinks.exactly_once import ExactlyOnceSink
from sluicegate.operators.runtime.sinks.kafka_transactions import KafkaTransactions
from sluicegate.operators.runtime.sinks.write_ahead import WriteAheadLog
from sluicegate.operators.runtime.topics import sink_progress_topic
from sluicegate.operators.specs import TopicKind
from sluicegate.operators.state.store import PartitionState

__all__ = ["build_sinks"]


def build_sinks(
    graph: JobGraph,
    subtask: SubtaskId,
    *,
    bootstrap: KafkaLike,
    appender: RecordAppender,
    metadata: PartitionState,
) -> dict[str, Sink]:
    """The sink of every sink topic the operator of ``subtask`` writes, by topic name, in the
    order of its outputs. ``appender``: where the subtask gathers what its producer sends;
    ``metadata``: the subtask state's metadata area, which holds the write-ahead log. Nothing
    is started."""
    name = str(subtask)
    exactly_once: ExactlyOnceSink | None = None
    at_least_once: AtLeastOnceSink | None = None
    sinks: dict[str, Sink] = {}
    outputs = [
        t for t in graph.operators[subtask.uid].outputs if graph.topics[t].kind is TopicKind.SINK
    ]
    transactional = [t for t in outputs if graph.topics[t].exactly_once]
    for topic in outputs:
        if topic not in transactional:
            if at_least_once is None:
                at_least_once = AtLeastOnceSink(appender, operator=subtask.uid)
            sinks[topic] = at_least_once
            continue
        if exactly_once is None:
            transactions = KafkaTransactions(
                bootstrap,
                transactional_id=f"sluicegate.{graph.name}.{name}",
                progress_topic=sink_progress_topic(graph.name),
                subtask=name,
                topics=transactional,
            )
            exactly_once = ExactlyOnceSink(WriteAheadLog(metadata), transactions, subtask=name)
        sinks[topic] = exactly_once
    return sinks

"""Sinks: how a subtask's records for topics the outside world reads leave the process.

* :mod:`operators.runtime.sinks.contract`: the `Sink` lifecycle the subtask drives, and
  `SinkRecord`.
* :mod:`operators.runtime.sinks.exactly_once`: `ExactlyOnceSink`, outputs written ahead into
  state and published in a transaction when the checkpoint holding them completes;
* :mod:`operators.runtime.sinks.write_ahead`: its `WriteAheadLog` in the state;
* :mod:`operators.runtime.sinks.kafka_transactions`: its transactional producer and the
  sink-progress topic.
* :mod:`operators.runtime.sinks.at_least_once`: `AtLeastOnceSink`, records sent at once, each
  with a deterministic id to drop duplicates by.
* :mod:`operators.runtime.sinks.building`: `build_sinks`, which sink serves which topic.
"""

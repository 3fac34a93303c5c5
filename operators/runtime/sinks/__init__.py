"""Sinks: how a subtask's outputs bound for a topic the outside world reads leave the process.

* :mod:`operators.runtime.sinks.exactly_once`: outputs written ahead into state and published
  in a Kafka transaction when the checkpoint holding them completes.
* :mod:`operators.runtime.sinks.at_least_once`: outputs sent at once, each with a
  deterministic id to drop duplicates by.
"""

from operators.runtime.sinks.at_least_once import RECORD_ID_HEADER, record_id
from operators.runtime.sinks.exactly_once import (
    SinkOutput,
    SinkPublisher,
    decode_output,
    encode_output,
)

__all__ = [
    "RECORD_ID_HEADER",
    "SinkOutput",
    "SinkPublisher",
    "decode_output",
    "encode_output",
    "record_id",
]

"""Headers of a dead-letter record: why it failed and where it came from.

The dead-letter record keeps the original key and value; its headers carry the error, the
operator and subtask, and the original coordinates, so a person (or a replay tool) can find
and re-drive it.
"""

from __future__ import annotations

from aiokafka import ConsumerRecord

from sluicegate.operators.runtime.bounded import error_text

__all__ = ["dead_letter_headers"]

_MAX_ERROR = 2000


def dead_letter_headers(
    record: ConsumerRecord[bytes, bytes], error: BaseException, *, operator: str, subtask: str
) -> list[tuple[str, bytes]]:
    """The ``sg-dlq-*`` headers describing why ``record`` was dead-lettered."""
    message = error_text(error, _MAX_ERROR)
    return [
        ("sg-dlq-error", message.encode()),
        ("sg-dlq-operator", operator.encode()),
        ("sg-dlq-subtask", subtask.encode()),
        ("sg-dlq-topic", record.topic.encode()),
        ("sg-dlq-partition", str(record.partition).encode()),
        ("sg-dlq-offset", str(record.offset).encode()),
    ]

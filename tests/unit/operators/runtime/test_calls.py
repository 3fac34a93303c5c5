"""`OperatorCalls`: which process functions are called directly, and what fails a call."""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka import ConsumerRecord

from sluicegate.operators.contract import Context, FunctionOperator, ProcessFunction, Record
from sluicegate.operators.protocol.channels import TopicPartition
from sluicegate.operators.runtime.calls import OperatorCalls
from sluicegate.operators.runtime.context import Emitted
from sluicegate.operators.state.store import PartitionState


class NoOutputs:
    def send(self, emitted: Sequence[Emitted], input_partition: int, source: Record | None) -> None:
        raise AssertionError("nothing is emitted in these tests")

    async def ship(self) -> None:
        raise AssertionError("nothing is emitted in these tests")


def calls(function: ProcessFunction) -> OperatorCalls:
    def no_state(topic: str, partition: int) -> PartitionState:
        raise AssertionError("no state in these tests")

    async def no_dead_letter(incoming: ConsumerRecord[bytes, bytes], error: Exception) -> None:
        raise AssertionError("call_now returns the failure")

    return OperatorCalls(
        "op#0",
        FunctionOperator(function),
        uid="op",
        outputs_allowed={"out"},
        owned={TopicPartition("in", 0)},
        states=no_state,
        outputs=NoOutputs(),
        dead_letter=no_dead_letter,
        max_in_flight=4,
    )


def incoming() -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic="in", partition=0, offset=3, timestamp=0, timestamp_type=0, key=b"k", value=None,
        checksum=None, serialized_key_size=1, serialized_value_size=0, headers=[],
    )  # fmt: skip


class AsyncCallable:
    async def __call__(self, record: Record, ctx: Context) -> None:
        return None


async def async_function(record: Record, ctx: Context) -> None:
    return None


def test_plain_functions_are_called_directly_and_coroutines_are_not() -> None:
    assert calls(lambda record, ctx: None).direct
    assert not calls(async_function).direct
    assert not calls(AsyncCallable()).direct


def test_a_plain_function_sees_the_record_and_nothing_fails() -> None:
    seen: list[Record] = []
    assert calls(lambda record, ctx: seen.append(record)).call_now(incoming()) is None
    assert seen == [Record("in", 0, 3, b"k", b"", 0)]  # a null value reads as b""


def test_a_plain_function_that_returns_a_value_fails_its_record() -> None:
    failure = calls(lambda record, ctx: 1).call_now(incoming())  # type: ignore[arg-type,return-value]
    assert isinstance(failure, TypeError)
    assert "async def" in str(failure)


def test_an_emit_to_a_topic_that_is_not_an_output_fails_its_record() -> None:
    failure = calls(lambda record, ctx: ctx.emit("elsewhere", b"v")).call_now(incoming())
    assert isinstance(failure, ValueError)
    assert "'elsewhere', not an output of op" in str(failure)

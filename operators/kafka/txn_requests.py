"""The wire format of three Kafka requests aiokafka lacks, for `hanging_transactions`:
``DescribeTransactions`` v0 (a transactional id's state at its coordinator),
``DescribeProducers`` v0 (the active producers of a partition, with their open transactions)
and ``WriteTxnMarkers`` v0-1 (end a transaction on a partition). Field names and types follow
Kafka's message definitions (``clients/src/main/resources/common/message``); the replies are
aiokafka structs, read by position."""

from __future__ import annotations

from typing import TypeAlias

from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Array,
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    String,
    TaggedFields,
)

__all__ = ["DescribeProducers", "DescribeTransactions", "Marker", "WriteTxnMarkers"]

_Tags = TaggedFields
_NoTags: dict[int, bytes] = {}


class _DescribeTransactionsResponse_v0(Response):  # noqa: N801 (Kafka's version suffix)
    API_KEY = 65
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("transaction_states", CompactArray(
            ("error_code", Int16),
            ("transactional_id", CompactString("utf-8")),
            ("transaction_state", CompactString("utf-8")),
            ("transaction_timeout_ms", Int32),
            ("transaction_start_time_ms", Int64),
            ("producer_id", Int64),
            ("producer_epoch", Int16),
            ("topics", CompactArray(
                ("topic", CompactString("utf-8")),
                ("partitions", CompactArray(Int32)),
                ("tags", _Tags),
            )),
            ("tags", _Tags),
        )),
        ("tags", _Tags),
    )  # fmt: skip


class _DescribeTransactionsRequest_v0(RequestStruct):  # noqa: N801
    FLEXIBLE_VERSION = True
    API_KEY = 65
    API_VERSION = 0
    RESPONSE_TYPE = _DescribeTransactionsResponse_v0
    SCHEMA = Schema(("transactional_ids", CompactArray(CompactString("utf-8"))), ("tags", _Tags))


class DescribeTransactions(Request[_DescribeTransactionsRequest_v0]):
    """The state of each of ``transactional_ids``; send it to their transaction coordinator."""

    API_KEY = 65

    def __init__(self, transactional_ids: list[str]) -> None:
        self._ids = transactional_ids

    def build(
        self, request_struct_class: type[_DescribeTransactionsRequest_v0]
    ) -> _DescribeTransactionsRequest_v0:
        return request_struct_class(self._ids, _NoTags)


class _DescribeProducersResponse_v0(Response):  # noqa: N801
    API_KEY = 61
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("topics", CompactArray(
            ("name", CompactString("utf-8")),
            ("partitions", CompactArray(
                ("partition_index", Int32),
                ("error_code", Int16),
                ("error_message", CompactString("utf-8")),
                ("active_producers", CompactArray(
                    ("producer_id", Int64),
                    ("producer_epoch", Int32),
                    ("last_sequence", Int32),
                    ("last_timestamp", Int64),
                    ("coordinator_epoch", Int32),
                    ("current_txn_start_offset", Int64),
                    ("tags", _Tags),
                )),
                ("tags", _Tags),
            )),
            ("tags", _Tags),
        )),
        ("tags", _Tags),
    )  # fmt: skip


class _DescribeProducersRequest_v0(RequestStruct):  # noqa: N801
    FLEXIBLE_VERSION = True
    API_KEY = 61
    API_VERSION = 0
    RESPONSE_TYPE = _DescribeProducersResponse_v0
    SCHEMA = Schema(
        ("topics", CompactArray(
            ("name", CompactString("utf-8")),
            ("partition_indexes", CompactArray(Int32)),
            ("tags", _Tags),
        )),
        ("tags", _Tags),
    )  # fmt: skip


class DescribeProducers(Request[_DescribeProducersRequest_v0]):
    """The active producers of partitions, ``{topic: [partition, ...]}``; send it to their
    leader."""

    API_KEY = 61

    def __init__(self, partitions: dict[str, list[int]]) -> None:
        self._partitions = partitions

    def build(
        self, request_struct_class: type[_DescribeProducersRequest_v0]
    ) -> _DescribeProducersRequest_v0:
        topics = [(t, ps, _NoTags) for t, ps in sorted(self._partitions.items())]
        return request_struct_class(topics, _NoTags)


class _WriteTxnMarkersResponse_v0(Response):  # noqa: N801
    API_KEY = 27
    API_VERSION = 0
    SCHEMA = Schema(
        ("markers", Array(
            ("producer_id", Int64),
            ("topics", Array(
                ("name", String("utf-8")),
                ("partitions", Array(("partition_index", Int32), ("error_code", Int16))),
            )),
        )),
    )  # fmt: skip


class _WriteTxnMarkersResponse_v1(Response):  # noqa: N801
    API_KEY = 27
    API_VERSION = 1
    SCHEMA = Schema(
        ("markers", CompactArray(
            ("producer_id", Int64),
            ("topics", CompactArray(
                ("name", CompactString("utf-8")),
                ("partitions", CompactArray(
                    ("partition_index", Int32), ("error_code", Int16), ("tags", _Tags),
                )),
                ("tags", _Tags),
            )),
            ("tags", _Tags),
        )),
        ("tags", _Tags),
    )  # fmt: skip


class _WriteTxnMarkersRequest_v0(RequestStruct):  # noqa: N801
    API_KEY = 27
    API_VERSION = 0
    RESPONSE_TYPE = _WriteTxnMarkersResponse_v0
    SCHEMA = Schema(
        ("markers", Array(
            ("producer_id", Int64),
            ("producer_epoch", Int16),
            ("transaction_result", Boolean),
            ("topics", Array(("name", String("utf-8")), ("partition_indexes", Array(Int32)))),
            ("coordinator_epoch", Int32),
        )),
    )  # fmt: skip


class _WriteTxnMarkersRequest_v1(RequestStruct):  # noqa: N801
    FLEXIBLE_VERSION = True
    API_KEY = 27
    API_VERSION = 1
    RESPONSE_TYPE = _WriteTxnMarkersResponse_v1
    SCHEMA = Schema(
        ("markers", CompactArray(
            ("producer_id", Int64),
            ("producer_epoch", Int16),
            ("transaction_result", Boolean),
            ("topics", CompactArray(
                ("name", CompactString("utf-8")),
                ("partition_indexes", CompactArray(Int32)),
                ("tags", _Tags),
            )),
            ("coordinator_epoch", Int32),
            ("tags", _Tags),
        )),
        ("tags", _Tags),
    )  # fmt: skip


Marker: TypeAlias = tuple[int, int, bool, str, int, int]
"""One marker: producer id, producer epoch, commit (else abort), topic, partition,
coordinator epoch."""

_WriteStruct: TypeAlias = _WriteTxnMarkersRequest_v0 | _WriteTxnMarkersRequest_v1


class WriteTxnMarkers(Request[_WriteStruct]):
    """Write ``markers``; send it to the leader of their partitions."""

    API_KEY = 27

    def __init__(self, markers: list[Marker]) -> None:
        self._markers = markers

    def build(self, request_struct_class: type[_WriteStruct]) -> _WriteStruct:
        if request_struct_class is _WriteTxnMarkersRequest_v0:
            return _WriteTxnMarkersRequest_v0(
                [(pid, epoch, commit, [(topic, [partition])], coordinator_epoch)
                 for pid, epoch, commit, topic, partition, coordinator_epoch in self._markers]
            )  # fmt: skip
        return _WriteTxnMarkersRequest_v1(
            [(pid, epoch, commit, [(topic, [partition], _NoTags)], coordinator_epoch, _NoTags)
             for pid, epoch, commit, topic, partition, coordinator_epoch in self._markers],
            _NoTags,
        )  # fmt: skip

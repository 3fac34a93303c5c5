"""Which open transactions `hanging` ends, and how: only those of the producer id and epoch
whose transaction the coordinator recorded complete, as it recorded it."""

from __future__ import annotations

from sluicegate.operators.kafka.hanging_transactions import (
    OpenTransaction,
    TransactionRecord,
    hanging,
)


def open_txn(partition: int, pid: int = 6, epoch: int = 0) -> OpenTransaction:
    return OpenTransaction("counts", partition, pid, epoch, coordinator_epoch=-1, start_offset=7)


def test_a_committed_record_commits_the_open_transactions_of_its_producer_and_epoch() -> None:
    record = TransactionRecord("CompleteCommit", producer_id=6, producer_epoch=0)
    mine = [open_txn(2), open_txn(3)]
    others = [open_txn(1, pid=5), open_txn(0, pid=6, epoch=1)]
    assert hanging(record, mine + others) == (True, mine)


def test_an_aborted_record_aborts_them() -> None:
    record = TransactionRecord("CompleteAbort", producer_id=6, producer_epoch=3)
    assert hanging(record, [open_txn(0, epoch=3)]) == (False, [open_txn(0, epoch=3)])


def test_nothing_is_hanging_while_the_coordinator_has_a_transaction_under_way() -> None:
    for state in ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"):
        record = TransactionRecord(state, producer_id=6, producer_epoch=0)
        assert hanging(record, [open_txn(0)]) == (False, [])


def test_nothing_is_hanging_for_an_unknown_transactional_id() -> None:
    assert hanging(None, [open_txn(0)]) == (False, [])

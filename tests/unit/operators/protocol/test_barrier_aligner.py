"""BarrierAligner: blocking, R_p, release order, aborts, declines, stale barriers."""

from __future__ import annotations

import pytest

from sluicegate.operators.protocol.alignment import (
    Aborted,
    Aligned,
    BarrierAligner,
    Buffered,
    Decline,
    Process,
)
from sluicegate.operators.protocol.channels import Channel, TopicPartition
from sluicegate.operators.protocol.exceptions import ProtocolViolationError, UnknownChannelError
from sluicegate.operators.protocol.records import SOURCE_WRITER

P0 = TopicPartition("words", 0)
P1 = TopicPartition("words", 1)
A0, B0, A1, B1 = Channel(P0, "up#0"), Channel(P0, "up#1"), Channel(P1, "up#0"), Channel(P1, "up#1")


def aligner(*channels: Channel, max_buffered: int = 10, last: int = 0) -> BarrierAligner[str]:
    return BarrierAligner(channels, max_buffered=max_buffered, last_checkpoint_id=last)


def test_a_single_channel_aligns_on_its_barrier() -> None:
    source = Channel(TopicPartition("lines", 0), SOURCE_WRITER)
    a = aligner(source)
    assert a.on_record(source, "r1") == Process()
    assert a.on_barrier(source, 1, 5) == (Aligned(1, {source.partition: 5}),)
    assert a.release() == []
    assert a.on_record(source, "r2") == Process()


def test_blocked_channels_buffer_and_release_in_arrival_order_after_aligned() -> None:
    a = aligner(A0, B0, A1)
    assert a.on_barrier(A0, 1, 10) == ()
    assert a.on_record(A0, "a0-1") == Buffered(1)
    assert a.on_record(B0, "b0-1") == Process()
    assert a.on_barrier(A1, 1, 3) == ()
    assert a.on_record(A1, "a1-1") == Buffered(1)
    assert a.on_record(A0, "a0-2") == Buffered(1)
    assert a.buffered == 3
    (aligned,) = a.on_barrier(B0, 1, 12)
    assert aligned == Aligned(1, {P0: 10, P1: 3})
    assert a.release() == ["a0-1", "a1-1", "a0-2"]
    assert a.aligning is None
    assert a.on_record(A0, "a0-3") == Process()


def test_r_p_is_the_first_marker_of_the_barrier_among_several_writers() -> None:
    a = aligner(A0, B0)
    a.on_barrier(B0, 4, 20)
    (aligned,) = a.on_barrier(A0, 4, 27)
    assert isinstance(aligned, Aligned)
    assert dict(aligned.positions) == {P0: 20}


def test_abort_releases_the_buffer_in_order_and_later_markers_are_ignored() -> None:
    a = aligner(A0, B0)
    a.on_barrier(A0, 2, 1)
    a.on_record(A0, "x")
    a.on_record(A0, "y")
    assert a.on_abort(2) == Aborted(2, "checkpoint 2 aborted")
    assert a.release() == ["x", "y"]
    assert a.on_barrier(B0, 2, 5) == ()
    assert a.on_record(A0, "z") == Process()
    assert a.on_abort(2) is None


def test_an_abort_before_any_marker_makes_later_markers_of_it_ignored() -> None:
    a = aligner(A0, B0)
    assert a.on_abort(3) is None
    assert a.on_barrier(A0, 3, 0) == ()
    assert a.on_record(A0, "r") == Process()
    assert a.last_checkpoint_id == 3


def test_an_abort_of_a_newer_checkpoint_proves_the_aligned_one_dead() -> None:
    a = aligner(A0, B0)
    a.on_barrier(A0, 2, 1)
    a.on_record(A0, "x")
    assert a.on_abort(3) == Aborted(2, "checkpoint 3 aborted")
    assert a.release() == ["x"]


def test_a_stale_abort_leaves_the_alignment_alone() -> None:
    a = aligner(A0, B0, last=1)
    a.on_barrier(A0, 5, 1)
    assert a.on_abort(4) is None
    assert a.aligning == 5


def test_overflow_declines_and_releases_everything_in_order() -> None:
    a = aligner(A0, B0, max_buffered=2)
    a.on_barrier(A0, 1, 0)
    assert a.on_record(A0, "1") == Buffered(1)
    assert a.on_record(A0, "2") == Buffered(1)
    decline = a.on_record(A0, "3")
    assert isinstance(decline, Decline)
    assert decline.checkpoint_id == 1
    assert "bound of 2" in decline.reason
    assert a.release() == ["1", "2", "3"]
    assert a.on_barrier(B0, 1, 4) == ()
    assert a.aligning is None


def test_a_bound_of_zero_declines_the_first_blocked_record() -> None:
    a = aligner(A0, B0, max_buffered=0)
    a.on_barrier(A0, 1, 0)
    assert isinstance(a.on_record(A0, "1"), Decline)
    assert a.release() == ["1"]


def test_a_newer_barrier_aborts_the_alignment_and_aligns_on_it() -> None:
    a = aligner(A0, B0)
    a.on_barrier(A0, 1, 0)
    a.on_record(A0, "old")
    actions = a.on_barrier(B0, 3, 8)
    assert actions == (Aborted(1, "superseded by barrier 3"),)
    assert a.release() == ["old"]
    assert a.aligning == 3
    assert a.on_record(B0, "blocked") == Buffered(3)
    assert a.on_record(A0, "free") == Process()
    (aligned,) = a.on_barrier(A0, 3, 11)
    assert aligned == Aligned(3, {P0: 8})
    assert a.release() == ["blocked"]


def test_a_barrier_older_than_the_alignment_or_the_last_checkpoint_is_ignored() -> None:
    a = aligner(A0, B0, last=4)
    assert a.on_barrier(A0, 4, 0) == ()
    assert a.on_barrier(A0, 6, 1) == ()
    assert a.on_barrier(B0, 5, 2) == ()
    assert a.aligning == 6
    assert a.on_record(B0, "r") == Process()


def test_a_repeated_barrier_from_one_channel_is_a_violation() -> None:
    a = aligner(A0, B0)
    a.on_barrier(A0, 1, 0)
    with pytest.raises(ProtocolViolationError):
        a.on_barrier(A0, 1, 3)


def test_an_unknown_channel_is_refused() -> None:
    a = aligner(A0)
    with pytest.raises(UnknownChannelError) as caught:
        a.on_record(B1, "r")
    assert caught.value.channel == B1


def test_events_before_release_are_refused_so_the_order_holds() -> None:
    a = aligner(A0)
    a.on_barrier(A0, 1, 0)
    with pytest.raises(ProtocolViolationError):
        a.on_record(A0, "r")
    with pytest.raises(ProtocolViolationError):
        a.on_abort(1)
    a.release()
    assert a.on_record(A0, "r") == Process()


def test_no_channels_or_a_negative_bound_is_refused() -> None:
    with pytest.raises(ProtocolViolationError):
        aligner(max_buffered=1)
    with pytest.raises(ProtocolViolationError):
        aligner(A0, max_buffered=-1)

"""Barrier alignment at a subtask, sans-IO.

:class:`BarrierAligner` is fed the records and barriers a subtask reads (after the
:class:`~operators.protocol.restore_filter.RestoreFilter` has let them through) and the aborts
the coordinator broadcasts. It answers with actions; it never reads, writes or waits.

A channel that has delivered barrier ``n`` while the subtask aligns on ``n`` is *blocked*: its
later records are buffered, not processed. Kafka cannot pause one writer of a partition, so
blocking means buffering. When every channel has delivered barrier ``n`` the aligner answers
:class:`Aligned`; when alignment on ``n`` ends otherwise it answers :class:`Aborted` or
:class:`Decline`. In all three cases the caller then calls :meth:`BarrierAligner.release` and
processes what it returns, in order, before feeding the aligner anything else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Generic, TypeVar

from sluicegate.operators.protocol.channels import Channel, TopicPartition
from sluicegate.operators.protocol.exceptions import ProtocolViolationError, UnknownChannelError

__all__ = ["Aborted", "Aligned", "BarrierAligner", "Buffered", "Decline", "Process"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Process:
    """Process the record now."""


@dataclass(frozen=True, slots=True)
class Buffered:
    """The record came from a blocked channel and waits in the buffer of ``checkpoint_id``."""

    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class Aligned:
    """Every channel has delivered barrier ``checkpoint_id``.

    ``positions`` holds ``R_p`` for every input partition: the offset of the first marker of
    the barrier seen in that partition. The caller runs the synchronous snapshot phase, then
    calls :meth:`BarrierAligner.release` and processes the records it returns.
    """

    checkpoint_id: int
    positions: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class Decline:
    """The buffer outgrew its bound: decline ``checkpoint_id`` to the coordinator.

    The caller then calls :meth:`BarrierAligner.release` and processes the records it returns
    (the record that overflowed the buffer is the last of them).
    """

    checkpoint_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class Aborted:
    """Alignment on ``checkpoint_id`` was dropped; release and process the buffer in order."""

    checkpoint_id: int
    reason: str


class BarrierAligner(Generic[R]):
    """Aligns the barriers of one subtask's input channels.

    ``R`` is whatever the caller buffers (a consumer record, usually); the aligner only
    stores it and gives it back. ``last_checkpoint_id`` is the checkpoint the subtask was
    restored from (0 for none): barriers of it and of older checkpoints are ignored.
    """

    def __init__(
        self, channels: Iterable[Channel], *, max_buffered: int, last_checkpoint_id: int = 0
    ) -> None:
        self._channels = frozenset(channels)
        if not self._channels:
            raise ProtocolViolationError("a subtask needs at least one input channel")
        if max_buffered < 0:
            raise ProtocolViolationError(f"max_buffered must not be negative ({max_buffered})")
        self._max_buffered = max_buffered
        self._last_checkpoint_id = last_checkpoint_id
        self._aligning: int | None = None
        self._delivered: set[Channel] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._buffer: list[R] = []
        self._released: list[R] | None = None

    @property
    def channels(self) -> frozenset[Channel]:
        """The input channels this subtask aligns."""
        return self._channels

    @property
    def aligning(self) -> int | None:
        """The checkpoint being aligned, if any."""
        return self._aligning

    @property
    def last_checkpoint_id(self) -> int:
        """The newest checkpoint that was aligned, aborted or declined here."""
        return self._last_checkpoint_id

    @property
    def buffered(self) -> int:
        """How many records wait in the buffer (the barrier buffer size metric)."""
        return len(self._buffer)

    def on_record(self, channel: Channel, record: R) -> Process | Buffered | Decline:
        """A data record was read from ``channel``.

        Returns :class:`Buffered` if the channel has delivered the barrier being aligned,
        :class:`Decline` if buffering it would put the buffer over its bound, and
        :class:`Process` otherwise.
        """
        self._check(channel)
        if self._aligning is None or channel not in self._delivered:
            return Process()
        self._buffer.append(record)
        if len(self._buffer) <= self._max_buffered:
            return Buffered(self._aligning)
        checkpoint_id = self._aligning
        reason = f"barrier buffer over its bound of {self._max_buffered} records"
        self._give_up()
        return Decline(checkpoint_id, reason)

    def on_barrier(
        self, channel: Channel, checkpoint_id: int, offset: int
    ) -> tuple[Aborted | Aligned, ...]:
        """Barrier ``checkpoint_id`` was read from ``channel`` at ``offset``.

        Steps, in order:

        1. a barrier of a checkpoint not newer than :attr:`last_checkpoint_id`, or older
           than the one being aligned, is stale: nothing happens;
        2. a barrier newer than the one being aligned means that one was given up: answer
           :class:`Aborted` for it (the buffer is released) and align on the new one;
        3. mark the channel as delivered; the first marker seen in its partition fixes
           ``R_p`` = ``offset``;
        4. when every channel has delivered the barrier, answer :class:`Aligned`.

        Raises:
            ProtocolViolationError: the channel already delivered this barrier.
        """
        self._check(channel)
        if checkpoint_id <= self._last_checkpoint_id:
            return ()
        actions: list[Aborted | Aligned] = []
        if self._aligning is not None:
            if checkpoint_id < self._aligning:
                return ()
            if checkpoint_id > self._aligning:
                given_up = self._aligning
                self._give_up()
                actions.append(Aborted(given_up, f"superseded by barrier {checkpoint_id}"))
        if self._aligning is None:
            self._aligning = checkpoint_id
        if channel in self._delivered:
            raise ProtocolViolationError(
                f"channel {channel} delivered barrier {checkpoint_id} twice in one attempt"
            )
        self._delivered.add(channel)
        # Several writers share a partition: only the first marker of the barrier there
        # bounds what the snapshot holds of that partition.
        self._positions.setdefault(channel.partition, offset)
        if self._delivered == self._channels:
            actions.append(Aligned(checkpoint_id, MappingProxyType(dict(self._positions))))
            self._give_up()
        return tuple(actions)

    def on_abort(self, checkpoint_id: int) -> Aborted | None:
        """The coordinator aborted ``checkpoint_id``.

        If the subtask is aligning on it (or on an older one, which the abort of a newer
        checkpoint proves dead), alignment is dropped and the answer is :class:`Aborted`.
        Either way, later barriers of ``checkpoint_id`` and older are ignored.
        """
        self._check_released()
        aborted: Aborted | None = None
        if self._aligning is not None and self._aligning <= checkpoint_id:
            aborted = Aborted(self._aligning, f"checkpoint {checkpoint_id} aborted")
            self._give_up()
        self._last_checkpoint_id = max(self._last_checkpoint_id, checkpoint_id)
        return aborted

    def release(self) -> list[R]:
        """The records to process now, in arrival order; empty when there are none.

        Call it after :class:`Aligned` (once the synchronous snapshot phase is done),
        :class:`Decline` or :class:`Aborted`, before feeding the aligner again.
        """
        released, self._released = self._released, None
        return released or []

    def _give_up(self) -> None:
        # Alignment ended (aligned, declined or aborted): the buffer moves to the release
        # list, which the caller must drain before the next event so the order holds.
        assert self._aligning is not None
        self._last_checkpoint_id = max(self._last_checkpoint_id, self._aligning)
        self._released = (self._released or []) + self._buffer
        self._buffer = []
        self._aligning = None
        self._delivered = set()
        self._positions = {}

    def _check(self, channel: Channel) -> None:
        self._check_released()
        if channel not in self._channels:
            raise UnknownChannelError(channel)

    def _check_released(self) -> None:
        if self._released is not None:
            raise ProtocolViolationError(
                "release() the records of the last alignment before feeding the aligner"
            )

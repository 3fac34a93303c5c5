"""The demo's person at the desk: grants (or refuses) every approval request after a delay.

It follows the agent's events sink with a ``read_committed`` consumer, so it sees a request
once the checkpoint holding it completed, and answers on the approvals topic. Requests that a
replay publishes again after a recovery are answered again; the run ignores a decision that
does not match the call it waits on, so that is harmless.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from sluicegate.agents.client import send_decision
from sluicegate.agents.messages import ApprovalDecision
from sluicegate.operators.kafka import KafkaLike
from sluicegate.operators.runtime.readers import committed_from_start

__all__ = ["Approver"]

logger = logging.getLogger(__name__)


class Approver:
    """Answers approval requests seen on ``events`` by writing to ``approvals``."""

    def __init__(
        self,
        bootstrap: KafkaLike,
        *,
        events: str,
        approvals: str,
        partitions: int,
        delay_s: float = 0.0,
        approve: Callable[[dict[str, object]], bool] = lambda event: True,
        by: str = "demo-approver",
    ) -> None:
        self._bootstrap, self._events, self._approvals = bootstrap, events, approvals
        self._partitions, self._delay, self._approve, self._by = partitions, delay_s, approve, by
        self.requests = 0
        self.approved = 0
        self.rejected = 0

    async def run(self) -> None:
        """Answer requests until cancelled."""
        pending: set[asyncio.Task[None]] = set()
        reading = committed_from_start(self._bootstrap, self._events, self._partitions)
        try:
            async with reading as consumer:
                while True:
                    for records in (await consumer.getmany(timeout_ms=200)).values():
                        for record in records:
                            self._on_event(json.loads(record.value or b"{}"), pending)
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    def _on_event(self, event: dict[str, object], pending: set[asyncio.Task[None]]) -> None:
        if event.get("type") != "approval_requested":
            return
        self.requests += 1
        task = asyncio.create_task(self._answer(event))
        pending.add(task)
        task.add_done_callback(pending.discard)

    async def _answer(self, event: dict[str, object]) -> None:
        await asyncio.sleep(self._delay)
        approved = self._approve(event)
        decision = ApprovalDecision(
            run_id=str(event["run_id"]),
            call_id=str(event.get("call_id", "")),
            approved=approved,
            by=self._by,
            reason=None if approved else "refused by the demo approver",
        )
        await send_decision(self._bootstrap, self._approvals, decision)
        if approved:
            self.approved += 1
        else:
            self.rejected += 1
        logger.debug("%s run %s", "approved" if approved else "rejected", decision.run_id)

"""What the console reads and writes of the agents: the calls waiting for a person, the runs,
and a person's decision.

Nothing here reads a topic its own way: the waiting calls and the runs come from a `RunIndex`
per agent, which folds the events with the code of `RunHistory.runs` (``GET
/agents/{agent}/runs``, ``sluicegate runs``) but reads, on each request, only what was
committed since the previous one; a run's timeline is `RunHistory.events` (``GET
.../history``), read from the run's first event on; and a decision is checked and written
exactly as ``POST /agents/{agent}/runs/{run}/approve|reject`` does
(`RunDirectory.check_decision`, then `send_decision`), under the signed-in person's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sluicegate.agents.client import request_fork, request_rollback, send_decision
from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.fork.patch import ForkPatch
from sluicegate.agents.history.events import RunHistory, RunSummary
from sluicegate.agents.history.index import RunIndex
from sluicegate.agents.messages import ApprovalDecision, ForkRun, RollbackRun
from sluicegate.agents.runs.directory import RunDirectory
from sluicegate.console.run_filter import RunFilter
from sluicegate.operators.kafka import KafkaLike

__all__ = ["AgentDesk", "RunPage", "WaitingCall"]


@dataclass(frozen=True, slots=True)
class WaitingCall:
    """A call of run ``run_id`` of ``agent`` that waits for a person's decision."""

    agent: str
    run_id: str
    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    asked_at: float | None
    goal: str | None
    step: int


@dataclass(frozen=True, slots=True)
class RunPage:
    """One page of an agent's runs, most recently updated first, and how many matched."""

    runs: tuple[RunSummary, ...]
    matched: int
    offset: int


class AgentDesk:
    """The agents of a pipeline as the console sees them; see the module docstring."""

    def __init__(self, bootstrap: KafkaLike, agents: Mapping[str, AgentTopics]) -> None:
        self._bootstrap = bootstrap
        self._topics = dict(agents)
        self._histories = {n: RunHistory(bootstrap, n, t.events) for n, t in agents.items()}
        self._indexes = {n: RunIndex(h) for n, h in self._histories.items()}
        self._directories = {n: RunDirectory(bootstrap, n, t.events) for n, t in agents.items()}

    @property
    def agents(self) -> list[str]:
        return sorted(self._topics)

    def index(self, agent: str) -> RunIndex:
        """The runs of ``agent`` as this desk last read them (KeyError: no such agent)."""
        return self._indexes[agent]

    async def waiting(self) -> list[WaitingCall]:
        """Every call waiting for a person, the longest waiting first.

        Raises:
            EventsUnavailableError: an events topic cannot be read now.
        """
        found: list[WaitingCall] = []
        for agent in self.agents:
            for run in await self._indexes[agent].runs():
                asked = run.waiting
                if asked is None:
                    continue
                arguments = asked.get("arguments")
                found.append(
                    WaitingCall(
                        agent=agent,
                        run_id=run.run_id,
                        call_id=str(asked.get("call_id", "")),
                        tool=str(asked.get("tool", "")),
                        arguments=arguments if isinstance(arguments, dict) else {},
                        asked_at=run.updated_at,
                        goal=run.goal,
                        step=run.step,
                    )
                )
        return sorted(found, key=lambda c: (c.asked_at or 0.0, c.agent, c.run_id))

    async def runs(
        self, agent: str, *, where: RunFilter, now: float, offset: int, limit: int
    ) -> RunPage:
        """Runs of ``agent`` that ``where`` matches at unix time ``now``, ``limit`` from
        ``offset``.

        Raises:
            KeyError: no such agent.
            EventsUnavailableError: its events topic cannot be read now.
        """
        runs = await self._indexes[agent].runs()
        matched = [r for r in runs if where.matches(r, now)]
        return RunPage(tuple(matched[offset : offset + limit]), len(matched), offset)

    async def timeline(self, agent: str, run_id: str) -> list[dict[str, Any]]:
        """Every committed event of the run, in order.

        Raises:
            KeyError: no such agent.
            UnknownRunError, HistoryError, EventsUnavailableError: as `RunHistory.events`.
        """
        start = self._indexes[agent].first_offset(run_id)
        return await self._histories[agent].events(run_id, from_offset=start)

    async def decide(
        self, agent: str, run_id: str, *, call_id: str, approved: bool, by: str, reason: str | None
    ) -> None:
        """Check that the run waits on ``call_id``, then write the decision of ``by``.

        Raises:
            KeyError: no such agent.
            UnknownRunError, RunNotWaitingError: the run cannot take the decision.
            EventsUnavailableError: the events topic cannot be read now.
        """
        topics = self._topics[agent]
        await self._directories[agent].check_decision(run_id, call_id)
        decision = ApprovalDecision(
            run_id=run_id, approved=approved, call_id=call_id, by=by, reason=reason
        )
        await send_decision(self._bootstrap, topics.approvals, decision)

    async def fork(
        self,
        agent: str,
        run_id: str,
        *,
        from_step: int,
        by: str,
        patch: ForkPatch | None = None,
        recorded_only: bool = False,
    ) -> ForkRun:
        """Fork the run after ``from_step`` in the name of ``by``, with one change
        (``patch``) and executing no tool with an effect if ``recorded_only``: exactly as
        ``POST /agents/{agent}/runs/{run}/fork`` and ``sluicegate runs fork`` do
        (`request_fork`).

        Raises:
            KeyError: no such agent.
            UnknownRunError, EventsUnavailableError, HistoryError, ForkRefusedError: nothing
                was written.
        """
        history, approvals = self._histories[agent], self._topics[agent].approvals
        return await request_fork(
            history, approvals, run_id, from_step, patch=patch, recorded_only=recorded_only,
            by=by,
        )  # fmt: skip

    async def rollback(
        self,
        agent: str,
        run_id: str,
        *,
        to_step: int,
        by: str,
        reason: str | None,
        force: bool = False,
    ) -> None:
        """Undo the effects of the run's steps after ``to_step``, in the name of ``by``, with
        the checks of ``POST /agents/{agent}/runs/{run}/rollback`` and ``sluicegate runs
        rollback`` (`request_rollback`): the run exists and is not being rolled back already,
        unless ``force``.

        Raises:
            KeyError: no such agent.
            UnknownRunError, RollingBackError: refused, nothing was written.
            EventsUnavailableError: the events topic cannot be read now.
        """
        command = RollbackRun(run_id=run_id, to_step=to_step, by=by, reason=reason)
        approvals = self._topics[agent].approvals
        await request_rollback(self._directories[agent], approvals, command, force=force)

"""Performing one action of a run's rollback (`agents.rollback.machine`): the I/O driver.

The agent operator hands every wake-up of a run that is rolling back (or waits for a person
during a rollback) to `Compensator.perform`, which carries out the action `next_action`
chose and returns the transition to save:

* `Settle`: reads the journal's entries of the effect (no call);
* `Compensate`: calls the compensating tool through `agents.journal.perform` under the
  compensation's own key, with the tool's ``on_unknown`` and ``lookup``: after a crash the
  journal answers, so each compensation runs at most once (effectively once with ``lookup``
  or ``retry``). A compensating tool needs no approval: the person who asked for the rollback
  asked for it. A failure for good, or an outcome that stays unknown, blocks the rollback;
* `Block`: counts the alert; the transition publishes ``compensation_needed``;
* `Notify`: POSTs the alert webhook (`agents.alerts`) through the journal (policy
  ``retry``): at most once per alert once journaled ``done``.

Fault points (``agents.faults``): those of tools, ``tool.<compensating tool>.<moment>``, and
``tool.alert_webhook.<moment>``.
"""

from __future__ import annotations

import logging
from typing import Any

from sluicegate.agents.alerts import post_alert
from sluicegate.agents.declaration import Agent
from sluicegate.agents.effect_calls import EffectCalls
from sluicegate.agents.journal import Effect, EffectKind, EffectResult, Journal, OnUnknown
from sluicegate.agents.memory.tool import FORGET, REMEMBER, forget_tool, remember_tool
from sluicegate.agents.metrics import AgentMetrics
from sluicegate.agents.rollback import machine as rollback
from sluicegate.agents.runs.cache import json_value
from sluicegate.agents.runs.machine import Idle, Transition
from sluicegate.agents.runs.state import RunState
from sluicegate.agents.tools import ToolContext
from sluicegate.operators.contract import Context

__all__ = ["ALERT_EFFECT", "Compensator"]

logger = logging.getLogger(__name__)

ALERT_EFFECT = "alert_webhook"
"""The name alert webhook calls carry in the journal."""


class Compensator:
    """Performs rollback actions for the runs of one agent subtask."""

    def __init__(
        self,
        agent: Agent,
        journal: Journal,
        metrics: AgentMetrics,
        labels: tuple[str, str, str],
        calls: EffectCalls,
        *,
        pipeline: str,
    ) -> None:
        self.agent, self._journal, self._metrics = agent, journal, metrics
        self._labels, self._calls, self._pipeline = labels, calls, pipeline
        self._tools = {t.name: t for t in agent.declared_tools}
        if agent.memory is not None:  # the built-in remember and its compensation
            self._tools |= {REMEMBER: remember_tool(agent.memory.max_entry_chars)}
            self._tools |= {FORGET: forget_tool()}

    def next_action(self, state: RunState) -> rollback.RollbackAction:
        return rollback.next_action(state, self._tools)

    async def perform(self, state: RunState, ctx: Context, now: float) -> Transition | None:
        """Perform the next action of ``state``'s rollback; None when there is none.

        Raises:
            RetryableError: from a compensating tool, the webhook or the journal; the run's
                state is unchanged and the action is retried later.
        """
        action = self.next_action(state)
        match action:
            case Idle():
                return None
            case rollback.Finish():
                logger.info("run %s: rolled back", state.run_id)
                return rollback.finish(state, now)
            case rollback.Settle(effect=effect):
                issued, done = self._journal.get(effect.key)
                if done is not None:  # the run keeps the result as its document decodes
                    done = done.model_copy(update={"result": json_value(done.result)})
                return rollback.settle(state, action, issued, done, now)
            case rollback.Skip():
                self._metrics.compensations.labels(*self._labels, "skipped").inc()
                return rollback.skip(state, action, now)
            case rollback.Compensate():
                return await self._compensate(state, action, ctx, now)
            case rollback.Block(effect=effect, problem=problem):
                self._metrics.compensation_alerts.labels(*self._labels).inc()
                logger.error(
                    "run %s: rollback waits for a person: %s (%s): %s",
                    state.run_id, effect.tool, effect.key, problem,
                )  # fmt: skip
                webhook = self.agent.alert_webhook is not None
                return rollback.block(state, action, now, webhook=webhook)
            case rollback.Notify():
                return await self._notify(state, action, ctx, now)
        raise AssertionError(f"unhandled rollback action {action!r}")

    async def _compensate(
        self, state: RunState, action: rollback.Compensate, ctx: Context, now: float
    ) -> Transition:
        tool = action.tool
        tracing = self._calls.tracing
        with tracing.tool_call(state, tool, action.key) as (span, headers):
            tool_ctx = ToolContext.of_run(
                state.run_id, action.effect.step, action.key, state.metadata, headers
            )
            effect = self._calls.tool_effect(
                state, ctx, tool, tool_ctx, action.key, action.arguments
            )
            outcome = await self._calls.perform(effect)
            tracing.tool_outcome(span, outcome)
        value: Any = None
        if isinstance(outcome, EffectResult):
            value, error = outcome.value, outcome.error
        else:
            error = f"outcome_unknown: {outcome.reason}"
        self._metrics.compensations.labels(
            *self._labels, "failed" if error is not None else "compensated"
        ).inc()
        return rollback.after_compensation(state, action, value, error, now)

    async def _notify(
        self, state: RunState, action: rollback.Notify, ctx: Context, now: float
    ) -> Transition:
        url = self.agent.alert_webhook
        assert url is not None
        assert state.rollback is not None
        undone = action.effect
        alert = {
            "type": "compensation_needed",
            "pipeline": self._pipeline,
            "agent": self.agent.name,
            "run_id": state.run_id,
            "tool": undone.tool,
            "key": undone.key,
            "kind": undone.kind,
            "arguments": undone.arguments,
            "problem": action.problem,
            "to_step": state.rollback.to_step,
            "what_to_do": (
                f"undo the effect by hand, then `sluicegate approve {state.run_id}`; or "
                f"`sluicegate reject {state.run_id} --reason ...` to stop the rollback here"
            ),
        }

        async def call() -> Any:
            return await post_alert(url, action.key, alert)

        notice = Effect(
            key=action.key,
            run_id=state.run_id,
            partition=ctx.partition,
            kind=EffectKind.TOOL,
            name=ALERT_EFFECT,
            request=alert,
            on_unknown=OnUnknown.RETRY,
            call=call,
        )
        outcome = await self._calls.perform(notice)
        error = outcome.error if isinstance(outcome, EffectResult) else outcome.reason
        if error is not None:
            logger.error("run %s: alert webhook failed for good: %s", state.run_id, error)
        return rollback.after_notify(state, action, error, now)

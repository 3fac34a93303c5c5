"""Errors of a person's decision on a run, under the tree drawn in ``operators.exceptions``::

    SluicegateError
    ├── RetryableError
    │   ├── EventsUnavailableError   the agent's events topic could not be read in time
    │   └── AlertUnavailableError    the alert webhook did not answer, or answered 429/5xx
    └── FatalError
        ├── DecisionRefusedError     the decision cannot apply to the run as it stands
        │   ├── UnknownRunError      no event of the run (HTTP 404)
        │   ├── RunNotWaitingError   the run does not wait for this decision (HTTP 409)
        │   └── RollingBackError     a rollback was asked of a run rolling back (HTTP 409)
        ├── HistoryError             a run's events do not replay (gap, unknown type, ...)
        ├── ForkRefusedError         a fork cannot start from the step asked for (HTTP 409)
        └── AlertRefusedError        the alert webhook answered another 4xx

(Errors of the effect journal and of model clients are in ``agents.journal.exceptions`` and
``agents.models.exceptions``.) Each carries ``what_to_do``, which the HTTP API returns and the
CLI prints.
"""

from __future__ import annotations

from sluicegate.operators.exceptions import FatalError, RetryableError

__all__ = [
    "AlertRefusedError",
    "AlertUnavailableError",
    "DecisionRefusedError",
    "EventsUnavailableError",
    "ForkRefusedError",
    "HistoryError",
    "RollingBackError",
    "RunNotWaitingError",
    "UnknownRunError",
]


class EventsUnavailableError(RetryableError):
    """The events ``topic`` could not be read up to its end (``cause`` says why)."""

    def __init__(self, topic: str, cause: str) -> None:
        self.message = f"cannot read the agent's events topic {topic!r}: {cause}"
        self.what_to_do = (
            "check the topic's name, that the broker is up and that the pipeline was started"
        )
        super().__init__(f"{self.message}; {self.what_to_do}")
        self.topic, self.cause = topic, cause


class DecisionRefusedError(FatalError):
    """A decision on ``run_id`` of ``agent`` was refused; nothing was written."""

    def __init__(self, agent: str, run_id: str, message: str, what_to_do: str) -> None:
        super().__init__(f"{message}; {what_to_do}")
        self.agent, self.run_id, self.what_to_do = agent, run_id, what_to_do
        self.message = message


class UnknownRunError(DecisionRefusedError):
    """The agent's events ``topic`` holds no event of ``run_id``."""

    def __init__(self, agent: str, run_id: str, topic: str) -> None:
        super().__init__(
            agent,
            run_id,
            f"agent {agent!r} has no run {run_id!r}: {topic} holds no committed event of it",
            "check the run id and the agent; a run shows up once the checkpoint after its "
            "task completes (about one checkpoint interval); a task that did not validate is "
            "in the pipeline's dead-letter topic; a run whose events outlived the topic's "
            "retention can be decided with force",
        )
        self.topic = topic


class RunNotWaitingError(DecisionRefusedError):
    """Run ``run_id`` is ``status`` (its latest committed event), or waits on another call."""

    def __init__(
        self, agent: str, run_id: str, status: str, *, waits_on: str = "", call_id: str = ""
    ) -> None:
        if call_id and waits_on:
            problem = f"run {run_id!r} waits for approval of call {waits_on!r}, not {call_id!r}"
        else:
            problem = f"run {run_id!r} of agent {agent!r} is {status}, not waiting for approval"
        super().__init__(
            agent,
            run_id,
            problem,
            "decide on the call the run waits on (see its approval_requested event); a run "
            "that was just decided on shows its new status about one checkpoint interval later",
        )
        self.status, self.waits_on, self.call_id = status, waits_on, call_id


class RollingBackError(DecisionRefusedError):
    """A rollback was asked of run ``run_id``, which is being rolled back already."""

    def __init__(self, agent: str, run_id: str) -> None:
        super().__init__(
            agent,
            run_id,
            f"run {run_id!r} is being rolled back already",
            "wait until it is rolled_back (or waits for you), then roll back further",
        )


class HistoryError(FatalError):
    """The events of ``run_id`` do not replay at ``seq`` (``reason`` says why)."""

    def __init__(self, run_id: str, seq: int, reason: str) -> None:
        self.message = f"run {run_id!r}: its history does not replay at event {seq}: {reason}"
        self.what_to_do = (
            "a run whose first events outlived the events topic's retention, or that ran on a "
            "version writing events without their payloads, cannot be replayed; otherwise "
            "report it with the run's events (`sluicegate runs history RUN --json`)"
        )
        super().__init__(f"{self.message}; {self.what_to_do}")
        self.run_id, self.seq, self.reason = run_id, seq, reason


class ForkRefusedError(FatalError):
    """Run ``run_id`` cannot be forked after step ``step`` (``reason`` says why)."""

    def __init__(self, run_id: str, step: int, reason: str, what_to_do: str) -> None:
        self.message = f"cannot fork run {run_id!r} after step {step}: {reason}"
        self.what_to_do = what_to_do
        super().__init__(f"{self.message}; {what_to_do}")
        self.run_id, self.step, self.reason = run_id, step, reason


class AlertUnavailableError(RetryableError):
    """The alert webhook at ``url`` could not be reached, or answered 429 or 5xx."""

    def __init__(self, url: str, cause: str) -> None:
        super().__init__(f"alert webhook {url} unavailable: {cause}")
        self.url, self.cause = url, cause


class AlertRefusedError(FatalError):
    """The alert webhook at ``url`` refused the alert with ``status`` (a 4xx but 429)."""

    def __init__(self, url: str, status: int, body: str) -> None:
        super().__init__(f"alert webhook {url} answered {status}: {body}")
        self.url, self.status, self.body = url, status, body

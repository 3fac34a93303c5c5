"""When to restart the job after a failure, sans-IO.

:class:`RestartPolicy` is told of failures and of the job running again, with times from an
injected clock, and answers each failure with a :class:`RestartDecision` (wait this long, then
recover) or a :class:`GiveUp` (fail the job):

* delays grow exponentially: ``initial_delay_seconds``, times ``multiplier`` per consecutive
  failure, capped at ``max_delay_seconds``;
* a job that ran ``stable_seconds`` without failing is healthy again: its next failure waits
  ``initial_delay_seconds``;
* with ``max_restarts`` and ``window_seconds`` set, more than ``max_restarts`` failures within
  any ``window_seconds`` give up (Flink's failure-rate strategy). Giving up is final.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from sluicegate.operators.exceptions import ConfigError

__all__ = ["GiveUp", "RestartDecision", "RestartPolicy"]


@dataclass(frozen=True, slots=True)
class RestartDecision:
    """Wait ``delay_seconds``, then recover; ``restart`` counts restarts since the policy began."""

    delay_seconds: float
    restart: int


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Do not restart: fail the job for ``reason``."""

    reason: str
    failures_in_window: int


class RestartPolicy:
    """Exponential-delay restarts with a reset after a stable run and an optional rate limit.

    Times are seconds on the injected clock (``now`` arguments, e.g. ``time.monotonic()``).
    """

    def __init__(
        self,
        *,
        initial_delay_seconds: float = 1.0,
        multiplier: float = 2.0,
        max_delay_seconds: float = 60.0,
        stable_seconds: float = 120.0,
        max_restarts: int | None = None,
        window_seconds: float | None = None,
    ) -> None:
        if initial_delay_seconds < 0:
            raise ConfigError("initial_delay_seconds", f"must be >= 0, got {initial_delay_seconds}")
        if multiplier < 1:
            raise ConfigError("multiplier", f"must be >= 1, got {multiplier}")
        if max_delay_seconds < initial_delay_seconds:
            raise ConfigError(
                "max_delay_seconds",
                f"must be >= initial_delay_seconds ({initial_delay_seconds}), "
                f"got {max_delay_seconds}",
            )
        if stable_seconds <= 0:
            raise ConfigError("stable_seconds", f"must be > 0, got {stable_seconds}")
        if (max_restarts is None) != (window_seconds is None):
            raise ConfigError(
                "max_restarts", "max_restarts and window_seconds are set together or not at all"
            )
        if max_restarts is not None and max_restarts < 0:
            raise ConfigError("max_restarts", f"must be >= 0, got {max_restarts}")
        if window_seconds is not None and window_seconds <= 0:
            raise ConfigError("window_seconds", f"must be > 0, got {window_seconds}")
        self._initial = initial_delay_seconds
        self._multiplier = multiplier
        self._cap = max_delay_seconds
        self._stable = stable_seconds
        self._max_restarts = max_restarts
        self._window = window_seconds
        self._next_delay = initial_delay_seconds
        self._running_since: float | None = None
        self._failures: deque[float] = deque()
        self._restarts = 0
        self._given_up: GiveUp | None = None

    @property
    def restarts(self) -> int:
        """Restarts decided so far (the restarts-total metric)."""
        return self._restarts

    @property
    def next_delay_seconds(self) -> float:
        """The delay the next failure gets, unless a stable run resets it first."""
        return self._next_delay

    @property
    def given_up(self) -> GiveUp | None:
        """The decision to give up, once taken."""
        return self._given_up

    def on_running(self, now: float) -> None:
        """The job is running (again) since ``now``: start timing a stable run.

        Calling it again while running keeps the earlier start.
        """
        if self._running_since is None:
            self._running_since = now

    def on_failure(self, now: float) -> RestartDecision | GiveUp:
        """A failure at ``now``: decide whether and when to restart.

        Steps, in order:

        1. once given up, give up again;
        2. if the job had been running for ``stable_seconds``, reset the delay to the initial one;
        3. record the failure; with a rate limit, drop failures older than the window and give up
           if more than ``max_restarts`` remain;
        4. otherwise answer the current delay and grow the next one.
        """
        if self._given_up is not None:
            return self._given_up
        if self._running_since is not None and now - self._running_since >= self._stable:
            self._next_delay = self._initial
        self._running_since = None
        if self._max_restarts is not None and self._window is not None:
            self._failures.append(now)
            while self._failures and self._failures[0] <= now - self._window:
                self._failures.popleft()
            if len(self._failures) > self._max_restarts:
                self._given_up = GiveUp(
                    f"{len(self._failures)} failures within {self._window:g} s "
                    f"(at most {self._max_restarts} restarts allowed)",
                    len(self._failures),
                )
                return self._given_up
        delay = self._next_delay
        self._next_delay = min(delay * self._multiplier, self._cap)
        self._restarts += 1
        return RestartDecision(delay, self._restarts)

"""RunTracker: the oldest wait for a person, and what tracking costs with many runs parked.

A subtask may hold 100,000 runs waiting for approval (docs/performance.md, "Parked runs");
tracking a run (every safe point of any run, and once per run on restore) must not look at
every parked one. Counted in comparisons of wait starts (a `float` that counts them), not
timed."""

from __future__ import annotations

from hypothesis import given, strategies as st
from prometheus_client import CollectorRegistry

from sluicegate.agents.metrics import AgentMetrics
from sluicegate.agents.models.contract import ToolCall
from sluicegate.agents.runs.state import PendingApproval, RunState, RunStatus
from sluicegate.agents.runs.tracker import RunTracker

LABELS = ("p", "desk", "desk#0")


class Counted(float):
    """A wait start that counts how often it is compared."""

    comparisons = 0

    def __lt__(self, other: object) -> bool:
        Counted.comparisons += 1
        return float(self) < float(other)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        return float(self) == other

    def __ne__(self, other: object) -> bool:
        Counted.comparisons += 1
        return float(self) != other

    __hash__ = float.__hash__


def run(run_id: str, since: float | None) -> RunState:
    """A run waiting for approval since ``since``, or running (None); built without
    validation so that a `Counted` start stays one."""
    if since is None:
        return RunState.model_construct(run_id=run_id, goal="g", status=RunStatus.RUNNING)
    call = ToolCall(id="c1", name="refund", arguments="{}")
    approval = PendingApproval.model_construct(
        call=call, key=f"{run_id}/1/0", tool="refund", arguments={}, proposed_at=since,
        kind="call", problem=None,
    )  # fmt: skip
    return RunState.model_construct(
        run_id=run_id, goal="g", status=RunStatus.WAITING_APPROVAL, pending_approval=approval,
        rollback=None,
    )  # fmt: skip


def tracker(now: float = 1000.0) -> tuple[RunTracker, AgentMetrics]:
    metrics = AgentMetrics.of(CollectorRegistry())
    return RunTracker(metrics, LABELS, lambda: now), metrics


def oldest_age(metrics: AgentMetrics) -> float:
    return float(metrics.oldest_approval_wait.labels(*LABELS)._value.get())


@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.none() | st.floats(0, 999, allow_nan=False)),
        max_size=60,
    )
)
def test_the_oldest_wait_is_the_least_start_of_the_runs_waiting_now(
    changes: list[tuple[int, float | None]],
) -> None:
    runs, metrics = tracker(now=1000.0)
    waiting: dict[str, float] = {}
    for n, since in changes:
        runs.track(run(f"r{n}", since))
        if since is None:
            waiting.pop(f"r{n}", None)
        else:
            waiting[f"r{n}"] = since
        expected = 1000.0 - min(waiting.values()) if waiting else 0.0
        assert oldest_age(metrics) == expected
    assert runs.counts().get(RunStatus.WAITING_APPROVAL, 0) == len(waiting)


def test_tracking_runs_looks_at_no_parked_run_but_the_oldest() -> None:
    parked = 5000
    runs, metrics = tracker()
    Counted.comparisons = 0
    for i in range(parked):  # a restore tracks each run once
        runs.track(run(f"parked-{i:05d}", Counted(10.0 + i % 977)))
    # a heap: about log2(5000) = 12 comparisons a run; a scan of every wait (the bug), 12.5M
    assert Counted.comparisons <= 40 * parked, Counted.comparisons
    Counted.comparisons = 0
    for step in range(200):  # the safe points of a run making progress
        runs.track(run("busy", None if step % 2 else Counted(500.0)))
    assert Counted.comparisons <= 200 * 20, Counted.comparisons
    assert oldest_age(metrics) == 1000.0 - 10.0
    assert runs.counts()[RunStatus.WAITING_APPROVAL] == parked

"""A run's budget: the agent's default, what a task may change, and the ceiling it may not
exceed."""

from __future__ import annotations

from hypothesis import given, strategies as st

from sluicegate import Agent
from sluicegate.agents.messages import TaskRequest
from sluicegate.agents.models import ScriptedModel
from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.runs.state import DEFAULT_MAX_STEPS, Budget


def agent(budget: Budget | None = None, ceiling: Budget | None = None) -> Agent:
    model = ScriptedModel(lambda messages: ChatMessage(role="assistant", content="done"))
    if budget is None:
        return Agent("desk", model, [], "Settle.", budget_ceiling=ceiling)
    return Agent("desk", model, [], "Settle.", budget=budget, budget_ceiling=ceiling)


def asked(budget_json: str) -> Budget | None:
    """The budget of a task as it arrives on the tasks topic."""
    raw = '{"run_id": "r1", "goal": "g"%s}' % (f', "budget": {budget_json}' if budget_json else "")
    return TaskRequest.model_validate_json(raw).budget


def test_the_default_budget_is_20_steps_and_no_other_limit() -> None:
    assert DEFAULT_MAX_STEPS == 20
    assert agent().budget == Budget(max_steps=20, max_cost_usd=None, max_tokens=None)
    assert agent().budget_for(asked("")) == agent().budget


def test_without_a_ceiling_a_task_may_only_tighten_the_agents_budget() -> None:
    desk = agent(Budget(max_steps=12, max_cost_usd=0.5))
    assert desk.budget_for(asked('{"max_steps": 5}')) == Budget(max_steps=5, max_cost_usd=0.5)
    assert desk.budget_for(asked('{"max_steps": 500, "max_cost_usd": null}')) == desk.budget
    assert desk.budget_for(asked('{"max_tokens": 900}')) == Budget(
        max_steps=12, max_cost_usd=0.5, max_tokens=900
    )


def test_a_task_that_sets_one_limit_keeps_the_agents_others() -> None:
    desk = agent(Budget(max_steps=12), ceiling=Budget(max_steps=100, max_cost_usd=5.0))
    # Not Budget's own default of 20 steps: the fields the task did not name are the agent's.
    assert desk.budget_for(asked('{"max_cost_usd": 0.25}')) == Budget(
        max_steps=12, max_cost_usd=0.25
    )


def test_a_ceiling_lets_a_task_ask_for_more_than_the_default_but_no_more_than_it() -> None:
    desk = agent(Budget(max_steps=12), ceiling=Budget(max_steps=40, max_cost_usd=2.0))
    # The default itself has no cost limit, but a run never goes without the ceiling's.
    assert desk.budget_for(None) == Budget(max_steps=12, max_cost_usd=2.0)
    assert desk.budget_for(asked('{"max_steps": 30}')) == Budget(max_steps=30, max_cost_usd=2.0)
    assert desk.budget_for(asked('{"max_steps": 99, "max_cost_usd": 9}')) == Budget(
        max_steps=40, max_cost_usd=2.0
    )


def test_a_task_written_by_submit_tasks_names_only_the_limits_it_sets() -> None:
    desk = agent(Budget(max_steps=12), ceiling=Budget(max_steps=100))
    task = TaskRequest(run_id="r1", goal="g", budget=Budget(max_cost_usd=0.25))
    sent = TaskRequest.model_validate_json(task.encode())
    assert sent == task
    assert desk.budget_for(sent.budget) == Budget(max_steps=12, max_cost_usd=0.25)
    assert b"budget" not in TaskRequest(run_id="r1", goal="g").encode()


limits = st.builds(
    Budget,
    max_steps=st.integers(1, 100),
    max_cost_usd=st.none() | st.floats(0.01, 10.0),
    max_tokens=st.none() | st.integers(1, 10_000),
)


@given(default=limits, ceiling=st.none() | limits, requested=st.none() | limits)
def test_a_run_never_gets_more_than_the_ceiling(
    default: Budget, ceiling: Budget | None, requested: Budget | None
) -> None:
    granted = agent(default, ceiling).budget_for(requested)
    top = ceiling or default
    assert granted.max_steps <= top.max_steps
    for field in ("max_cost_usd", "max_tokens"):
        if getattr(top, field) is not None:
            assert getattr(granted, field) is not None
            assert getattr(granted, field) <= getattr(top, field)
    if requested is not None and requested.capped_by(top) == requested:
        assert granted == requested  # asked within the ceiling: granted as asked

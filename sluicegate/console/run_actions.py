"""The console's fork and rollback from a step of a run's timeline, as pure functions.

The timeline's form only chooses (a GET to the confirmation page); the confirmation page says
what will happen and holds the one form that acts, a POST with the session's anti-forgery
token and an explicit ``confirm``. Both actions need the ``operate`` scope, as their API
routes do:

============  ======================================================================
action        what the confirmed POST does
============  ======================================================================
fork          a new run from this run's state after the step (``runs fork``: no
              patch, effects executed as the fork's own)
rollback      undo the effects of the run's steps after the step (``runs rollback``),
              with a reason recorded with the command
============  ======================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sluicegate.console.markup import Safe, hidden_csrf, join, tag, text

__all__ = ["ACTIONS", "actions_form", "confirmation_body", "steps_of"]

ACTIONS = ("fork", "rollback")


def steps_of(events: Sequence[dict[str, Any]]) -> list[int]:
    """The steps a run's events name, in order, each once."""
    return sorted({e["step"] for e in events if isinstance(e.get("step"), int) and e["step"] >= 0})


def actions_form(agent: str, run_id: str, steps: Sequence[int], *, prefix: str) -> Safe:
    """The timeline's chooser: a step and Fork… / Roll back… (a GET: it acts on nothing)."""
    if not steps:
        return Safe("")
    options = join(tag("option", s, value=s, selected=s == steps[-1]) for s in steps)
    base = f"{prefix}runs/{agent}/{run_id}/act"
    return join(
        [
            tag("h2", "Fork or roll back"),
            Safe(f'<form method="get" action="{text(base)}" class="filters">'),
            tag("label", "From step", for_="step"),
            tag("select", options, id="step", name="step"),
            tag(
                "div",
                join(
                    [
                        tag("button", "Fork…", type="submit", name="action", value="fork"),
                        tag(
                            "button",
                            "Roll back…",
                            type="submit",
                            name="action",
                            value="rollback",
                            class_="danger",
                        ),
                    ]
                ),
                class_="actions",
            ),
            Safe("</form>"),
        ]
    )


def confirmation_body(
    agent: str, run_id: str, action: str, step: int, *, csrf: str | None, prefix: str
) -> Safe:
    """What ``action`` from ``step`` will do, and the one button that does it."""
    if action == "fork":
        what = [
            f"A new run of {agent} starts from the state of run {run_id} after step {step}.",
            "The fork calls the model again from there; its tools run as its own, effects "
            "included.",
            f"Run {run_id} itself is not changed.",
        ]
        button, extra = "Fork the run", Safe("")
    else:
        what = [
            f"Run {run_id} of {agent} undoes the effects of its steps after step {step}, "
            "newest first, compensating each that has a compensation.",
            "An effect without a compensation cannot be undone: the run says so and waits.",
        ]
        button = "Roll the run back"
        extra = join(
            [
                tag("label", "Reason (recorded with the rollback)", for_="reason"),
                Safe('<textarea id="reason" name="reason" maxlength="2000"></textarea>'),
            ]
        )
    form = join(
        [
            Safe(
                f'<form method="post" action="{text(prefix)}runs/{text(agent)}/'
                f'{text(run_id)}/{text(action)}">'
            ),
            hidden_csrf(csrf),
            Safe(f'<input type="hidden" name="step" value="{text(step)}">'),
            Safe('<input type="hidden" name="confirm" value="yes">'),
            extra,
            tag(
                "div",
                join(
                    [
                        tag("button", button, type="submit", class_="danger"),
                        tag("a", "Cancel", href=f"{prefix}runs/{agent}/{run_id}"),
                    ],
                    " ",
                ),
                class_="actions",
            ),
            Safe("</form>"),
        ]
    )
    return join([tag("ul", join(tag("li", line) for line in what)), form])

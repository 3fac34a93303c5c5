"""The console's fork and rollback from a step of a run's timeline, as pure functions.

The timeline's form only chooses (a GET to the confirmation page); the confirmation page says
what will happen and holds the one form that acts, a POST with the session's anti-forgery
token and an explicit ``confirm``. Both actions need the ``operate`` scope, as their API
routes do:

============  ======================================================================
action        what the confirmed POST does
============  ======================================================================
fork          a new run from this run's state after the step (``runs fork``), with
              an optional patch (``patch``: the JSON of ``--patch``, read by the same
              `read_patch`) and ``recorded_only`` (``--recorded-only``: no tool with
              an effect runs)
rollback      undo the effects of the run's steps after the step (``runs rollback``),
              with a reason recorded with the command; ``force`` (``--force``) skips
              the check that the run exists and is not being rolled back already
============  ======================================================================

`ActionForm.parse` reads the confirmed POST's fields; what it cannot read is said and nothing
is done.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluicegate.agents.fork.patch import ForkPatch, read_patch
from sluicegate.console.markup import Safe, hidden_csrf, join, tag, text

__all__ = ["ACTIONS", "ActionForm", "actions_form", "confirmation_body", "steps_of"]

ACTIONS = ("fork", "rollback")
_MAX_STEP = 1_000_000


@dataclass(frozen=True, slots=True)
class ActionForm:
    """A confirmed fork or rollback, as its POST asked for it."""

    step: int
    reason: str | None = None
    patch: ForkPatch | None = None
    recorded_only: bool = False
    force: bool = False

    @classmethod
    def parse(cls, action: str, form: Mapping[str, str]) -> ActionForm | str:
        """The form's request, or what is wrong with it (nothing is to be done then)."""
        raw_step = form.get("step", "")
        if form.get("confirm") != "yes" or not raw_step.isdigit() or int(raw_step) > _MAX_STEP:
            return "Nothing was done: confirm on the page that says what will happen."
        step = int(raw_step)
        if action == "rollback":
            reason = form.get("reason", "").strip()[:2000] or None
            return cls(step, reason=reason, force=form.get("force") == "yes")
        patch = None
        if raw_patch := form.get("patch", "").strip():
            try:
                patch = read_patch(raw_patch)
            except ValueError as exc:
                return f"Nothing was done: the patch {exc}"
        return cls(step, patch=patch, recorded_only=form.get("recorded_only") == "yes")


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
            "included, unless it runs on recorded results only.",
            f"Run {run_id} itself is not changed.",
        ]
        button = "Fork the run"
        extra = join(
            [
                tag("label", "Patch (optional): one change, as JSON", for_="patch"),
                Safe(
                    '<textarea id="patch" name="patch" maxlength="60000" rows="4" '
                    'aria-describedby="patch-help" placeholder=\'{"goal": "..."}\'></textarea>'
                ),
                tag(
                    "p",
                    'One of {"goal": "..."}, {"instructions": "..."}, {"message": {"index": N, '
                    '"content": "..."}} or {"tool_result": {"call_id": "...", "result": ...}}, '
                    "as sluicegate runs fork --patch takes it.",
                    id="patch-help",
                    class_="help",
                ),
                Safe(
                    '<label><input type="checkbox" name="recorded_only" value="yes"> '
                    "Recorded results only: no tool with an effect runs (a call the parent "
                    "did not record answers with an error)</label>"
                ),
            ]
        )
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
                Safe(
                    '<label><input type="checkbox" name="force" value="yes"> Force: write '
                    "the rollback without checking that the run exists and is not being "
                    "rolled back already</label>"
                ),
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

"""The console's pages as pure functions: what the API shows, rendered as HTML (`markup`).

Each takes the same values the HTTP API answers with (`JobStatus`, `WorkerInfo`,
`SubtaskInfo`, `CheckpointInfo`, `SavepointInfo`: the code behind ``GET /status`` and
``sluicegate status``), the coordinator's `CoordinatorFacts` for what only they hold
(incidents, checkpoint counts), and the agents' `WaitingCall` and `RunSummary`. None does
I/O, so each is tested on its own, planted ``<script>`` included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from sluicegate.agents.history.events import RunSummary
from sluicegate.console import records
from sluicegate.console.inbox import RunPage, WaitingCall
from sluicegate.console.markup import (
    Safe,
    ago,
    hidden_csrf,
    join,
    pretty_json,
    seconds,
    size,
    table,
    tag,
    text,
    when,
)
from sluicegate.console.run_filter import RunFilter
from sluicegate.coordinator.facts import CoordinatorFacts
from sluicegate.coordinator.httpapi.savepoint_models import SavepointInfo
from sluicegate.coordinator.httpapi.view import CheckpointInfo, JobStatus, SubtaskInfo, WorkerInfo
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.protocol.messages import RECORDS_GROUP

__all__ = [
    "approvals_body",
    "checkpoints_body",
    "job_body",
    "notice",
    "run_body",
    "runs_body",
    "sign_in_body",
]


_RECORD_HEADERS = ("Records in", "Records out", "Lag")
_UNREPORTED = records.RecordCounts()


def notice(message: str | None, *, error: bool = False) -> Safe:
    """A line saying what the last action did (``role=status``: announced when it appears)."""
    if not message:
        return Safe("")
    return tag("p", message, class_="notice error" if error else "notice", role="status")


def _facts(pairs: Sequence[tuple[str, object]]) -> Safe:
    return tag("dl", join(join([tag("dt", k), tag("dd", v)]) for k, v in pairs), class_="facts")


def _status_class(status: str) -> str:
    return f"status-{status}"


def sign_in_body(*, error: str | None, prefix: str) -> Safe:
    """The sign-in form: one API token, posted once; the session cookie does the rest."""
    form = join(
        [
            Safe(f'<form method="post" action="{text(prefix)}sign-in">'),
            tag("label", "API token", for_="token"),
            Safe(
                '<input type="password" id="token" name="token" required '
                'autocomplete="current-password" autofocus size="40">'
            ),
            tag(
                "p",
                "A token of the coordinator's SLUICEGATE_API_TOKENS_FILE (or "
                "SLUICEGATE_API_TOKEN). Its scopes decide what you may do here: read sees, "
                "approve decides, operate acts.",
                class_="muted",
            ),
            tag("div", tag("button", "Sign in", type="submit"), class_="actions"),
            Safe("</form>"),
        ]
    )
    return join([notice(error, error=True), form])


def job_body(
    graph: JobGraph,
    status: JobStatus,
    workers: Sequence[WorkerInfo],
    subtasks: Sequence[SubtaskInfo],
    facts: CoordinatorFacts,
) -> Safe:
    """The Job page: state, the pipeline graph with records in/out and lag per operator,
    where each subtask runs (with its own), workers, other counts, incidents."""
    state_class = "state-bad" if status.state in ("failed", "recovering") else "state-ok"
    summary = _facts(
        [
            ("Pipeline", status.pipeline),
            ("State", tag("span", status.state, class_=state_class)),
            ("Attempt", status.attempt),
            ("Restarts", status.restarts),
            ("Last completed checkpoint", status.last_completed_checkpoint or "—"),
            ("Checkpoint lag", seconds(status.checkpoint_lag_seconds)),
            ("Waiting for", status.waiting_for or "—"),
            ("Stop", status.stop.phase if status.stop else "—"),
        ]
    )
    topics = table(
        "Topics",
        ["Topic", "Kind", "Partitions", "Written by", "Read by"],
        [
            (
                name,
                spec.kind.value,
                spec.partitions,
                ", ".join(op.uid for op in graph.operators.values() if name in op.outputs)
                or "the outside world",
                ", ".join(op.uid for op in graph.operators.values() if name in op.inputs)
                or "the outside world",
            )
            for name, spec in sorted(graph.topics.items())
        ],
    )
    by_operator, by_subtask = records.per_operator(status.counts), records.per_subtask(facts)
    operators = table(
        "Operators (records and lag: the current attempt, summed over the subtasks)",
        ["Operator", "Kind", "Reads", "Writes", "Parallelism", *_RECORD_HEADERS],
        [
            (
                op.uid,
                op.label("kind") or "operator",
                ", ".join(op.inputs),
                ", ".join(op.outputs),
                op.parallelism,
                *by_operator.get(op.uid, _UNREPORTED).cells(),
            )
            for op in graph.operators.values()
        ],
    )
    counts = table(
        "Counts reported by the subtasks (current attempt)",
        ["Operator", "Group", "Name", "Count"],
        [
            (uid, group, name, value)
            for uid, groups in sorted(status.counts.items())
            for group, names in sorted(groups.items())
            if group != RECORDS_GROUP
            for name, value in sorted(names.items())
        ],
    )
    placed = table(
        "Subtasks",
        ["Subtask", "Worker", "Attempt", *_RECORD_HEADERS],
        [
            (
                s.subtask,
                s.worker_id or "unassigned",
                s.attempt,
                *by_subtask.get(s.subtask, _UNREPORTED).cells(),
            )
            for s in subtasks
        ],
    )
    hosts = table(
        "Workers",
        ["Worker", "Health", "Slots", "Subtasks", "Last heartbeat"],
        [
            (
                w.worker_id,
                tag("span", "alive", class_="state-ok")
                if w.alive
                else tag("span", "lost", class_="state-bad"),
                w.slots,
                ", ".join(w.subtasks) or "—",
                f"{seconds(w.seconds_since_heartbeat)} ago",
            )
            for w in workers
        ],
    )
    incidents: list[tuple[str, object]] = [
        ("Last failure", facts.failure.reason if facts.failure else "none"),
        ("Failed subtask", (facts.failure.subtask if facts.failure else None) or "—"),
        ("Restores that fell back to an older checkpoint", facts.restore_fallbacks),
        ("Fenced by a newer coordinator", facts.fenced_by or "no"),
    ]
    aborts = table(
        "Recent checkpoint aborts",
        ["Checkpoint", "Attempt", "Reason", "At"],
        [
            (a.checkpoint_id, a.attempt, a.reason, when(a.at))
            for a in facts.checkpoints.recent_aborts
        ],
    )
    return join(
        [
            summary,
            tag("h2", "Pipeline graph"),
            operators,
            topics,
            tag("h2", "Where it runs"),
            placed,
            hosts,
            tag("h2", "Counts"),
            counts,
            tag("h2", "Incidents"),
            _facts(incidents),
            aborts,
        ]
    )


def checkpoints_body(
    status: JobStatus,
    checkpoints: Sequence[CheckpointInfo],
    savepoints: Sequence[SavepointInfo],
    facts: CoordinatorFacts,
    *,
    can_operate: bool,
    csrf: str | None,
    prefix: str,
    message: str | None,
) -> Safe:
    """The Checkpoints page: counts, the latest, the history, the savepoints and a button."""
    stats = facts.checkpoints
    in_flight = [c for c in checkpoints if c.status.value == "in_progress"]
    latest = next((c for c in checkpoints if c.status.value == "completed"), None)
    counts = _facts(
        [
            ("Completed (this coordinator)", stats.completed),
            ("Failed", sum(stats.aborted.values())),
            ("In progress", f"#{stats.in_flight}" if stats.in_flight else "none"),
            ("Interval", seconds(stats.interval_seconds)),
            (
                "Latest completed",
                "none"
                if latest is None
                else f"#{latest.checkpoint_id} at {when(latest.completed_at)}, "
                f"{size(latest.full_bytes)} full, {size(latest.incremental_bytes)} uploaded",
            ),
            ("Checkpoint lag", seconds(status.checkpoint_lag_seconds)),
        ]
    )
    history = table(
        "History, newest first",
        [
            "Id",
            "Status",
            "Attempt",
            "Triggered",
            "Duration",
            "State size",
            "Uploaded",
            "Alignment",
            "Sync",
            "Async",
            "Reason",
        ],
        [
            (
                tag("a", c.checkpoint_id, href=f"{prefix}checkpoints/{c.checkpoint_id}")
                if c.status.value == "completed"
                else c.checkpoint_id,
                tag("span", c.status.value, class_=_status_class(c.status.value)),
                c.attempt,
                when(c.triggered_at),
                seconds(c.completed_at - c.triggered_at)
                if c.completed_at is not None and c.triggered_at is not None
                else "—",
                size(c.full_bytes),
                size(c.incremental_bytes),
                seconds(c.alignment_seconds),
                seconds(c.sync_seconds),
                seconds(c.async_seconds),
                c.reason or "",
            )
            for c in checkpoints
        ],
    )
    saved = table(
        "Savepoints",
        ["Name", "Status", "From checkpoint", "Created", "Size", "Rows", "Error"],
        [
            (
                s.name,
                s.status,
                s.checkpoint_id or "—",
                when(s.created_at),
                size(s.size_bytes),
                s.rows,
                s.error,
            )
            for s in savepoints
        ],
    )
    create: Safe = Safe("")
    if can_operate:
        create = join(
            [
                Safe(f'<form method="post" action="{text(prefix)}savepoints">'),
                hidden_csrf(csrf),
                tag("label", "Savepoint name (optional)", for_="savepoint-name"),
                Safe(
                    '<input type="text" id="savepoint-name" name="name" maxlength="200" '
                    'pattern="[A-Za-z0-9._-]+" title="letters, digits, dot, dash, underscore">'
                ),
                tag("div", tag("button", "Create savepoint", type="submit"), class_="actions"),
                Safe("</form>"),
                # A GET: it only opens the page that says what stopping does, and asks again.
                Safe(f'<form method="get" action="{text(prefix)}savepoints/stop">'),
                tag("label", "Savepoint name for the stop (optional)", for_="stop-name"),
                Safe(
                    '<input type="text" id="stop-name" name="name" maxlength="200" '
                    'pattern="[A-Za-z0-9._-]+" title="letters, digits, dot, dash, underscore">'
                ),
                tag(
                    "div",
                    tag("button", "Stop the job with a savepoint…", type="submit", class_="danger"),
                    class_="actions",
                ),
                Safe("</form>"),
            ]
        )
    note = tag(
        "p",
        f"{len(in_flight)} in flight. Durations are trigger to completion; alignment, sync "
        "and async are the slowest subtask's. A completed checkpoint's id opens its detail "
        "per subtask.",
        class_="muted",
    )
    return join(
        [
            notice(message),
            counts,
            tag("h2", "History"),
            note,
            history,
            tag("h2", "Savepoints"),
            saved,
            create,
        ]
    )


def approvals_body(
    waiting: Sequence[WaitingCall],
    now: float,
    *,
    can_approve: bool,
    csrf: str | None,
    prefix: str,
    message: str | None,
    error: str | None,
    watch_seconds: int | None = None,
) -> Safe:
    """The Approvals inbox: every waiting call, its run, tool, arguments, how long it waited,
    and (with the approve scope) a decision form with a reason. ``watch_seconds``: the page
    reloads itself that often (said, with a link to stop, as a reload clears a reason being
    typed)."""
    intro = tag(
        "p",
        f"{len(waiting)} call(s) wait for a person, the longest waiting first. A decision is "
        "recorded under your name.",
        class_="muted",
    )
    if watch_seconds:
        refresh = tag(
            "p",
            join(
                [
                    f"Watching: this page reloads every {watch_seconds} s (a reason being typed "
                    "is lost when it does). ",
                    tag("a", "Stop watching", href=f"{prefix}approvals"),
                ]
            ),
        )
    else:
        refresh = tag(
            "p",
            join(
                [
                    tag("a", "Refresh", href=f"{prefix}approvals"),
                    " · ",
                    tag("a", "Watch for new requests", href=f"{prefix}approvals?watch=1"),
                ]
            ),
        )
    calls = [_waiting_call(call, now, can_approve, csrf, prefix) for call in waiting]
    return join([notice(error, error=True), notice(message), intro, refresh, *calls])


def _waiting_call(
    call: WaitingCall, now: float, can_approve: bool, csrf: str | None, prefix: str
) -> Safe:
    ident = f"call-{call.agent}-{call.run_id}-{call.call_id}"
    facts = _facts(
        [
            ("Agent", call.agent),
            ("Run", tag("a", call.run_id, href=f"{prefix}runs/{call.agent}/{call.run_id}")),
            ("Step", call.step),
            ("Goal", call.goal or "—"),
            ("Waiting for", ago(call.asked_at, now)),
            ("Asked at", when(call.asked_at)),
        ]
    )
    parts: list[Safe] = [
        tag("h2", f"{call.tool} for run {call.run_id}", id=ident),
        facts,
        tag("h3", "Arguments"),
        pretty_json(dict(call.arguments)),
    ]
    if can_approve:
        reason_id = f"reason-{call.agent}-{call.run_id}"
        parts.append(
            join(
                [
                    Safe(
                        f'<form method="post" action="{text(prefix)}approvals/'
                        f'{text(call.agent)}/{text(call.run_id)}">'
                    ),
                    hidden_csrf(csrf),
                    Safe(f'<input type="hidden" name="call_id" value="{text(call.call_id)}">'),
                    tag("label", "Reason (shown in the run's history)", for_=reason_id),
                    Safe(
                        f'<textarea id="{text(reason_id)}" name="reason" maxlength="2000">'
                        "</textarea>"
                    ),
                    tag(
                        "div",
                        join(
                            [
                                tag(
                                    "button",
                                    "Approve",
                                    type="submit",
                                    name="decision",
                                    value="approve",
                                ),
                                tag(
                                    "button",
                                    "Reject",
                                    type="submit",
                                    name="decision",
                                    value="reject",
                                    class_="danger",
                                ),
                            ]
                        ),
                        class_="actions",
                    ),
                    Safe("</form>"),
                ]
            )
        )
    else:
        parts.append(tag("p", "Your token may read, not decide (scope approve).", class_="muted"))
    return tag("article", join(parts), class_="call", aria_labelledby=ident)


def runs_body(
    agents: Sequence[str],
    agent: str,
    where: RunFilter,
    page: RunPage,
    limit: int,
    *,
    prefix: str,
    statuses: Sequence[str],
    problems: Sequence[str] = (),
) -> Safe:
    """The Runs page: filters by agent, status, age and a metadata field (a GET form), one
    page of runs, paging that keeps the filters."""
    agent_options = join(tag("option", a, value=a, selected=a == agent) for a in agents)
    status_options = join(
        [tag("option", "any", value="")]
        + [tag("option", s, value=s, selected=s == where.status) for s in statuses]
    )
    query = where.query()
    filters = join(
        [
            Safe(f'<form method="get" action="{text(prefix)}runs" class="filters">'),
            tag("label", "Agent", for_="agent"),
            tag("select", agent_options, id="agent", name="agent"),
            tag("label", "Status", for_="status"),
            tag("select", status_options, id="status", name="status"),
            tag("label", "Started within (hours)", for_="hours"),
            Safe(
                '<input type="number" id="hours" name="hours" min="0" step="any" size="6" '
                f'value="{text(query.get("hours", ""))}">'
            ),
            tag("label", "Metadata (key=value)", for_="meta"),
            Safe(
                '<input type="text" id="meta" name="meta" maxlength="500" '
                f'placeholder="tenant=acme" value="{text(query.get("meta", ""))}">'
            ),
            tag("div", tag("button", "Show", type="submit"), class_="actions"),
            Safe("</form>"),
        ]
    )
    rows = [_run_row(run, agent, prefix) for run in page.runs]
    listing = table(
        f"Runs {page.offset + 1 if page.runs else 0} to {page.offset + len(page.runs)} of "
        f"{page.matched}, most recently updated first",
        ["Run", "Status", "Step", "Events", "Started", "Updated", "Cost", "Goal"],
        rows,
    )
    links: list[Safe] = []
    if page.offset > 0:
        back = urlencode({"agent": agent, **query, "offset": max(0, page.offset - limit)})
        links.append(tag("a", "Newer", href=f"{prefix}runs?{back}", rel="prev"))
    if page.offset + len(page.runs) < page.matched:
        ahead = urlencode({"agent": agent, **query, "offset": page.offset + limit})
        links.append(tag("a", "Older", href=f"{prefix}runs?{ahead}", rel="next"))
    mistakes = [notice(problem, error=True) for problem in problems]
    return join([*mistakes, filters, listing, tag("nav", join(links, " · "), aria_label="Pages")])


def _run_row(run: RunSummary, agent: str, prefix: str) -> tuple[object, ...]:
    return (
        tag("a", run.run_id, href=f"{prefix}runs/{agent}/{run.run_id}"),
        tag("span", run.status, class_=_status_class(run.status)),
        run.step,
        run.seq + 1,
        when(run.started_at),
        when(run.updated_at),
        f"${run.cost_usd:.4f}",
        run.goal or "",
    )


def run_body(agent: str, run_id: str, events: Sequence[dict[str, Any]]) -> Safe:
    """A run's timeline: every committed event in order, what it says, and its fields (in a
    ``<details>``: folded, opened from the keyboard or by a click, without a script)."""
    rows = [
        (
            event.get("seq", ""),
            event.get("step", ""),
            event.get("type", ""),
            tag("span", event.get("status", ""), class_=_status_class(str(event.get("status")))),
            when(event["at"]) if isinstance(event.get("at"), int | float) else "—",
            _event_summary(event),
            tag(
                "details",
                join([tag("summary", "fields"), pretty_json(_details(event))]),
            ),
        )
        for event in events
    ]
    return join(
        [
            _facts([("Agent", agent), ("Run", run_id), ("Events", len(events))]),
            table("Timeline", ["Seq", "Step", "Event", "Status", "At", "Summary", "Details"], rows),
        ]
    )


def _details(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in _SHOWN}


_SHOWN = frozenset({"run_id", "seq", "step", "type", "status", "at"})


def _event_summary(event: dict[str, Any]) -> str:
    kind = event.get("type")
    if kind == "approval_requested":
        return f"asks a person to approve {event.get('tool')}"
    if kind == "approval":
        verdict = "approved" if event.get("approved") else "rejected"
        reason = event.get("reason")
        return f"{verdict} by {event.get('by')}" + (f": {reason}" if reason else "")
    if kind == "tool":
        return f"called {event.get('tool') or event.get('name') or 'a tool'}"
    if kind == "model":
        cost = event.get("cost_usd")
        return "model step" + (f" (${cost:.4f})" if isinstance(cost, int | float) else "")
    return ""

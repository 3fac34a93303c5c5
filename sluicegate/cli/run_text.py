"""Plain-text views of runs for ``sluicegate runs``: the run list, one run, its history, its
replay. Payloads (model messages, tool arguments and results) are shortened to one line each;
``--json`` prints them whole."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sluicegate.agents.history.events import RunSummary
from sluicegate.agents.history.replay import Replayed
from sluicegate.agents.runs.state import RunState
from sluicegate.cli.text import table

__all__ = ["event_line", "history_text", "replay_text", "run_text", "runs_table", "short"]

_WIDTH = 160


def short(value: Any, width: int = _WIDTH) -> str:
    """``value`` as one line of at most ``width`` characters (JSON unless a string)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _time(at: object) -> str:
    if not isinstance(at, int | float):
        return "-"
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def runs_table(runs: Sequence[RunSummary]) -> str:
    if not runs:
        return "no runs"
    rows = [
        [
            r.run_id,
            r.status,
            str(r.step),
            f"{r.cost_usd:.6f}",
            _time(r.updated_at),
            "" if r.forked_from is None else f"{r.forked_from['run_id']}@{r.forked_from['step']}",
            short(r.goal or "", 60),
        ]
        for r in runs
    ]
    headers = ["RUN", "STATUS", "STEP", "COST USD", "UPDATED (UTC)", "FORKED FROM", "GOAL"]
    return table(headers, rows)


def run_text(state: RunState) -> str:
    """One run as its replayed final state shows it."""
    usage = state.usage
    rows = [
        ["run", state.run_id],
        ["status", state.status.value + (f" ({state.reason})" if state.reason else "")],
        ["goal", short(state.goal)],
        ["step", f"{state.step} of at most {state.budget.max_steps}"],
        [
            "usage",
            f"{usage.model_calls} model calls, {usage.tokens} tokens, {usage.cost_usd:.6f} USD",
        ],
        ["created", _time(state.created_at)],
        ["updated", _time(state.updated_at)],
    ]
    if state.forked_from is not None:
        origin = state.forked_from
        mode = ", recorded-only" if origin.recorded_only else ""
        rows.append(["forked from", f"{origin.run_id} after step {origin.step}{mode}"])
    if state.answer is not None:
        rows.append(["answer", short(state.answer)])
    if state.rollback is not None:
        undo = state.rollback
        rows.append(["rollback", f"#{undo.number} to step {undo.to_step} by {undo.by}"
                     f"{f' ({undo.reason})' if undo.reason else ''}"])  # fmt: skip
    if state.pending_approval is not None:
        pending = state.pending_approval
        if pending.kind == "compensation":
            waits = f"a person to undo {pending.tool} {pending.key}: {short(pending.problem, 100)}"
        else:
            waits = f"approval of {pending.tool} (call {pending.call.id})"
        rows.append(["waits for", waits])
    for effect in state.effects:
        undone = f" undone {effect.undone}" if effect.undone else ""
        rows.append(
            ["effect", f"step {effect.step} {effect.tool} {effect.status} {effect.key}{undone}"]
        )
    if state.blobs:
        rows.append(["blobs", ", ".join(state.blobs)])
    return table(None, rows)


_SETTLED = {
    "retry": " [retried after unknown outcome: the service must deduplicate]",
    "lookup": " [settled by lookup after unknown outcome]",
    "call_after_lookup": " [called after unknown outcome: the lookup found nothing]",
}
"""The mark of a tool result that settled an outcome a crash left unknown, by ``settled_by``."""


def event_line(event: dict[str, Any]) -> str:
    """One event as a line: its seq, time, step, type and what it says."""
    head = f"#{event.get('seq')} {_time(event.get('at'))} step {event.get('step')}"
    return f"{head} {event.get('type')}: {_what(event)}{_memory(event)}"


def _memory(event: dict[str, Any]) -> str:
    """The memory entries the step read and wrote (an agent with memory: docs/memory.md)."""
    parts = []
    for field, verb in (("memory_read", "read"), ("memory_written", "wrote")):
        ids = event.get(field)
        if isinstance(ids, list) and ids:
            shown = ", ".join(str(i) for i in ids[:8]) + (", ..." if len(ids) > 8 else "")
            parts.append(f"{verb} {len(ids)} memory entries ({shown})")
    return f"; {'; '.join(parts)}" if parts else ""


def _what(event: dict[str, Any]) -> str:
    kind = event.get("type")
    took = (
        f" ({event['duration_ms']:.0f} ms)"
        if isinstance(event.get("duration_ms"), int | float)
        else ""
    )
    if kind == "started":
        return f"goal {short(event.get('goal', ''), 100)}; budget {short(event.get('budget'))}"
    if kind == "forked":
        origin = event.get("forked_from") or {}
        note = f"; {event['note']}" if event.get("note") else ""
        return f"from {origin.get('run_id')} after step {origin.get('step')}{note}"
    if kind == "model":
        message = event.get("message") or {}
        calls = [f"{c.get('name')}({short(c.get('arguments', ''), 80)})"
                 for c in message.get("tool_calls", [])]  # fmt: skip
        said = ", ".join(calls) if calls else f"answer {short(message.get('content') or '', 100)}"
        cost = (f"{event.get('prompt_tokens')}+{event.get('completion_tokens')} tokens, "
                f"{event.get('cost_usd')} USD")  # fmt: skip
        return f"{said}{took}; {cost}"
    if kind == "tool":
        outcome = (
            f"error {event['error']}" if event.get("error") else short(event.get("result"), 100)
        )
        recorded = " [recorded]" if event.get("recorded") else ""
        settled = _SETTLED.get(str(event.get("settled_by")), "")
        return f"{event.get('tool')} {event.get('call_id')}{took}{recorded}{settled} -> {outcome}"
    if kind == "effect_issued":
        return f"{event.get('tool')} {short(event.get('arguments'), 80)} key {event.get('key')}"
    if kind == "tool_rejected":
        return f"{event.get('tool')} {event.get('call_id')}: {short(event.get('error', ''), 100)}"
    if kind == "approval_requested":
        return f"{event.get('tool')} {event.get('call_id')} {short(event.get('arguments'), 80)}"
    if kind == "approval":
        verdict = "approved" if event.get("approved") else "rejected"
        reason = f": {event['reason']}" if event.get("reason") else ""
        about = event.get("call_id") or f"undoing {event.get('key')}"
        return f"{about} {verdict} by {event.get('by')}{reason}"
    return _rollback_what(event) or _status_what(event)


def _rollback_what(event: dict[str, Any]) -> str | None:
    """The line of a rollback's event or a lost payload's; None for another event."""
    kind = event.get("type")
    if kind == "rollback_started":
        reason = f" ({event['reason']})" if event.get("reason") else ""
        undo = short(event.get("effects"), 100)
        return f"to step {event.get('to_step')} by {event.get('by')}{reason}; undo {undo}"
    if kind == "effect_settled":
        return f"{event.get('key')} -> {event.get('outcome')}"
    if kind == "compensation":
        if "skipped" in event:
            return f"{event.get('effect')} skipped: {event.get('skipped')}"
        outcome = (
            f"error {event['error']}" if event.get("error") else short(event.get("result"), 100)
        )
        return f"{event.get('tool')} {event.get('key')} undoing {event.get('effect')} -> {outcome}"
    if kind == "compensation_needed":
        return f"{event.get('tool')} {event.get('key')}: {short(event.get('problem', ''), 100)}"
    if kind == "alert_sent":
        failed = f" (failed: {event['error']})" if event.get("error") else ""
        return f"about {event.get('effect')} {event.get('key')}{failed}"
    if kind == "blob_unavailable":
        return f"blob {event.get('blob')} {event.get('reason')}"
    return None


def _status_what(event: dict[str, Any]) -> str:
    if event.get("status") == "rolled_back" and "to_step" in event:
        return f"rolled_back to step {event.get('to_step')} (asked by {event.get('by')})"
    if event.get("unknown_key") is not None:
        call = f"{event['tool']} call {event.get('call_id')} " if event.get("tool") else ""
        key = event["unknown_key"]
        unknown = f"{call}key {key}: it may or may not have happened; a person decides"
        return f"{event.get('status')}: {event.get('reason')} ({unknown})"
    return f"{event.get('status')}: {event.get('reason')}"


def history_text(events: Sequence[dict[str, Any]]) -> str:
    return "\n".join(event_line(e) for e in events)


def replay_text(history: Sequence[Replayed]) -> str:
    """The state after each event, as a replay rebuilds it."""
    lines = []
    for replayed in history:
        state, event = replayed.state, replayed.event
        pending = (
            f", pending {[c.name for c in state.pending_calls]}" if state.pending_calls else ""
        )
        lines.append(
            f"#{event.get('seq')} {event.get('type')} -> {state.status.value}, step {state.step}, "
            f"{len(state.messages)} messages, {state.usage.tokens} tokens, "
            f"{state.usage.cost_usd:.6f} USD, {len(state.effects)} effects{pending}"
        )
    return "\n".join(lines)

"""What the soak checks at the end, and the table it prints (`Findings`)."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.soak_large.agent import STEPS, WRITES
from bench.soak_large.ledger import SoakLedger
from bench.soak_large.rates import TOLERANCE, Fifth, percentile, rate_fell

__all__ = ["Findings", "KillRecord", "percentile"]


@dataclass(slots=True)
class KillRecord:
    """One SIGKILL the harness sent, and when the job had recovered from it: when the first
    checkpoint triggered after it (newer than ``newest_triggered``, the newest one triggered
    when it was sent) completed."""

    target: str
    timing: str
    killed_at: float
    newest_triggered: int
    recovered_at: float | None = None

    @property
    def recovery_s(self) -> float | None:
        return None if self.recovered_at is None else self.recovered_at - self.killed_at


@dataclass(slots=True)
class Findings:
    """Every figure of the table; `violations` is what must be empty."""

    runs: int
    results: Mapping[str, list[dict[str, Any]]]
    events: Mapping[str, list[int]]
    ledger: SoakLedger
    kills: Sequence[KillRecord]
    fifths: Sequence[Fifth]
    """The soak's checkpoints by fifth of its time (`rates.fifths`)."""
    other_exits: int
    broker_restarts: int
    storage_outages: int
    duration_s: float
    planned_kills: int = 0
    """Kills the plan had; fewer sent (every run finished first) is a violation."""
    violations: list[str] = field(default_factory=list)

    def check(self) -> None:
        v = self.violations
        ids = [f"run-{i:06d}" for i in range(self.runs)]
        lost = [r for r in ids if not self.results.get(r)]
        doubled = [r for r in ids if len(self.results.get(r, [])) > 1]
        not_done = [
            r for r in ids if any(x.get("status") != "done" for x in self.results.get(r, []))
        ]
        if lost:
            v.append(f"{len(lost)} runs without a result, e.g. {lost[:3]}")
        if doubled:
            v.append(f"{len(doubled)} runs with more than one result, e.g. {doubled[:3]}")
        if not_done:
            v.append(f"{len(not_done)} runs not done, e.g. {not_done[:3]}")
        incomplete = [r for r in ids if not _whole(self.events.get(r, []))]
        if incomplete:
            v.append(
                f"{len(incomplete)} runs whose events are not seq 0..n-1 once, "
                f"e.g. {incomplete[:3]}"
            )
        duplicates = self.ledger.duplicates({k for k, how in WRITES.items() if how == "lookup"})
        if duplicates:
            v.append(f"{len(duplicates)} effects executed twice, e.g. {list(duplicates)[:3]}")
        per_run: defaultdict[tuple[str, str], int] = defaultdict(int)
        for kind in WRITES:
            for key in self.ledger.executed[kind]:
                per_run[(self.ledger.runs_by_key[key], kind)] += 1
        missing = [(r, k) for r in ids for k in WRITES if per_run[(r, k)] == 0]
        twice = [(r, k) for (r, k), n in per_run.items() if n > 1]
        if missing:
            v.append(f"{len(missing)} effects lost (a run without its write), e.g. {missing[:3]}")
        if twice:
            v.append(f"{len(twice)} runs with two keys for one write, e.g. {twice[:3]}")
        if len(self.kills) < self.planned_kills:
            v.append(f"{len(self.kills)} kills of {self.planned_kills} planned: more runs needed")
        if any(k.recovered_at is None for k in self.kills):
            v.append("a kill after which the job made no progress")
        if (fell := rate_fell(self.fifths)) is not None:
            v.append(fell)

    def table(self) -> list[str]:
        lines = [f"soak: {self.runs} runs in {self.duration_s:.0f} s"]
        by = Counter((k.target.split("-")[0], k.timing) for k in self.kills)
        lines.append("kills (target, timing): " + ", ".join(
            f"{t} {m}: {n}" for (t, m), n in sorted(by.items())
        ))  # fmt: skip
        recoveries = [k.recovery_s for k in self.kills if k.recovery_s is not None]
        lines.append(f"kills {len(self.kills)} (planned {self.planned_kills}), recoveries "
                     f"{len(recoveries)}, other exits (restarted) {self.other_exits}, "
                     f"broker restarts {self.broker_restarts}, "
                     f"storage outages {self.storage_outages}")  # fmt: skip
        if recoveries:
            lines.append(
                f"recovery (kill -> a checkpoint triggered after it completed): p50 "
                f"{percentile(recoveries, 50):.1f} s, p99 {percentile(recoveries, 99):.1f} s, "
                f"max {max(recoveries):.1f} s"
            )
        lines.append(f"{'effect':<8} {'settles':<7} {'executed':>8} {'dedup':>6} "
                     f"{'found':>6} {'missing':>7} {'twice':>6}")  # fmt: skip
        lines.append(f"{'read':<8} {'-':<7} {self.ledger.reads:>8}")
        for kind, how in WRITES.items():
            o = self.ledger.outcomes[kind]
            twice = sum(1 for n in self.ledger.executed[kind].values() if n > 1)
            lines.append(
                f"{kind:<8} {how:<7} {o['executed']:>8} {o['deduplicated']:>6} "
                f"{o['found']:>6} {o['not_found']:>7} {twice:>6}"
            )
        one = sum(1 for r in range(self.runs) if len(self.results.get(f"run-{r:06d}", [])) == 1)
        whole = sum(1 for seqs in self.events.values() if _whole(seqs))
        steps = Counter(x.get("steps") for rs in self.results.values() for x in rs)
        lines.append(f"runs with exactly one result {one}/{self.runs}, lost "
                     f"{self.runs - len([r for r in self.results.values() if r])}, "
                     f"event sequences complete {whole}/{self.runs}, steps {dict(steps)} "
                     f"(expected {STEPS})")  # fmt: skip
        lines.extend(self._fifths_table())
        lines.append(
            "violations: " + ("none" if not self.violations else "; ".join(self.violations))
        )
        by_timing: defaultdict[str, list[float]] = defaultdict(list)
        for kill in self.kills:
            if kill.recovery_s is not None:
                by_timing[kill.timing].append(kill.recovery_s)
        if by_timing:
            lines.append("recovery p50 by timing: " + ", ".join(
                f"{t} {statistics.median(rs):.1f} s" for t, rs in sorted(by_timing.items())
            ))  # fmt: skip
        return lines

    def _fifths_table(self) -> list[str]:
        """Per fifth: checkpoints per minute of wall time and of undisturbed time (the one
        checked, with `rates.TOLERANCE`), duration, bytes uploaded and state size."""
        lines = [
            f"checkpoints by fifth (rate checked: per undisturbed minute, last >= first "
            f"- {TOLERANCE:.0%}):",
            f"{'fifth':<5} {'done':>5} {'/min':>6} {'undist s':>8} {'/undist min':>11} "
            f"{'p50 s':>6} {'p99 s':>6} {'upl p50':>9} {'state':>11}",
        ]
        for i, f in enumerate(self.fifths):
            wall = f.completed / (f.end - f.start) * 60 if f.end > f.start else 0.0
            lines.append(
                f"{i + 1:<5} {f.completed:>5} {wall:>6.1f} {f.undisturbed_s:>8.0f} "
                f"{f.rate:>11.1f} {_num(f.duration_p50_s):>6} {_num(f.duration_p99_s):>6} "
                f"{_num(f.uploaded_p50_bytes):>9} {_num(f.state_bytes):>11}"
            )
        return lines


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _whole(seqs: Sequence[int]) -> bool:
    """Events ``0..n-1``, each once (and at least one)."""
    return bool(seqs) and sorted(seqs) == list(range(len(seqs)))

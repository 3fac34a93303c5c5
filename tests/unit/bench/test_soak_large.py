"""``make soak-large``'s own checks have teeth: its schedule spreads kills of every timing over
workers and the coordinator, its service tells a deduplicated write from one executed twice,
and its findings catch a lost run, a second result, a broken event sequence and a duplicate
effect planted in otherwise clean figures."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from bench.soak_large.agent import WRITES
from bench.soak_large.checks import Findings, KillRecord, percentile
from bench.soak_large.ledger import SoakLedger
from bench.soak_large.plan import Plan, Timing
from bench.soak_large.rates import CheckpointRecord, Fifth, fifths

RUNS = 3


def paced(slower_at: float | None = None) -> tuple[Fifth, ...]:
    """Fifths of 500 s of checkpoints 1 s apart (1.5 s apart from ``slower_at`` on), each
    taking 0.4 s and uploading 2000 bytes; none from a kill at 10.5 s to its recovery at 30 s."""
    records, t, n = [], 0.0, 1
    while t <= 500.0:
        if not 10.5 < t < 30.0:
            records.append(CheckpointRecord(n, t, t - 0.4, 2000, 50_000 + n))
        t += 1.5 if slower_at is not None and t >= slower_at else 1.0
        n += 1
    return fifths(records, [(10.5, 30.0)], 500.0)


@pytest.fixture
def ledger() -> Iterator[SoakLedger]:
    service = SoakLedger(latency_s=0)
    try:
        yield service
    finally:
        service.close()


def post(ledger: SoakLedger, path: str, key: str, run_id: str) -> dict[str, Any]:
    request = urllib.request.Request(
        ledger.url + path, method="POST", data=json.dumps({"run_id": run_id}).encode(),
        headers={"Idempotency-Key": key, "Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def test_the_plan_spreads_kills_of_every_timing_over_workers_and_the_coordinator() -> None:
    plan = Plan.of(10_000, 100, seed=7)
    assert len(plan.kills) == 100
    assert {k.timing for k in plan.kills} == set(Timing)
    assert 20 <= sum(k.coordinator for k in plan.kills) <= 40
    assert not any(k.coordinator and k.timing is Timing.MID_WRITE for k in plan.kills)
    moments = [k.after_results for k in plan.kills]
    assert moments == sorted(moments)
    assert moments[0] > 0
    assert moments[-1] < 10_000
    assert 0 < plan.broker_restart_after < plan.storage_outage_after < 10_000
    assert Plan.of(10_000, 100, seed=7) == plan


def test_the_service_deduplicates_only_where_it_says_so(ledger: SoakLedger) -> None:
    first = post(ledger, "/dedup/record", "k1", "run-000000")
    assert post(ledger, "/dedup/record", "k1", "run-000000") == first
    post(ledger, "/write/entry", "k2", "run-000000")
    post(ledger, "/write/entry", "k2", "run-000000")
    assert ledger.outcomes["record"] == {"executed": 1, "deduplicated": 1}
    assert ledger.duplicates({"entry"}) == {"k2": 2}
    assert ledger.duplicates({"record"}) == {}


def clean(ledger: SoakLedger) -> dict[str, Any]:
    """Figures of ``RUNS`` runs that each did everything once."""
    for r in range(RUNS):
        for kind, how in WRITES.items():
            post(ledger, f"/{'dedup' if how == 'dedup' else 'write'}/{kind}", f"{r}-{kind}",
                 f"run-{r:06d}")  # fmt: skip
    return {
        "results": {f"run-{r:06d}": [{"status": "done", "steps": 6}] for r in range(RUNS)},
        "events": {f"run-{r:06d}": [0, 1, 2] for r in range(RUNS)},
        "kills": [KillRecord("worker-1", "any", 10.0, 4, 12.0)],
    }


def findings(ledger: SoakLedger, figures: dict[str, Any]) -> Findings:
    found = Findings(RUNS, figures["results"], figures["events"], ledger, figures["kills"],
                     paced(), 0, 1, 1, 30.0)  # fmt: skip
    found.check()
    return found


def test_clean_figures_pass(ledger: SoakLedger) -> None:
    found = findings(ledger, clean(ledger))
    assert found.violations == []
    table = found.table()
    assert "violations: none" in table
    rows = [line.split() for line in table if line[:1].isdigit() and len(line.split()) == 9]
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5"]
    assert {r[4] for r in rows} == {"60.0"}  # per undisturbed minute, the kill left out
    assert rows[0][2] != "60.0"  # per minute of wall time, it is not
    assert {(r[5], r[7]) for r in rows} == {("0.40", "2000")}


@pytest.mark.parametrize(
    "bug", ["lost", "twice", "gap", "effect", "no recovery", "slow", "few kills"]
)
def test_each_planted_violation_is_found(ledger: SoakLedger, bug: str) -> None:
    figures = clean(ledger)
    rates, planned = paced(), 1
    if bug == "lost":
        del figures["results"]["run-000001"]
    elif bug == "twice":
        figures["results"]["run-000001"].append({"status": "done", "steps": 6})
    elif bug == "gap":
        figures["events"]["run-000002"] = [0, 2]
    elif bug == "effect":
        post(ledger, "/write/notify", "0-notify", "run-000000")
    elif bug == "no recovery":
        figures["kills"].append(KillRecord("coordinator", "savepoint", 20.0, 5))
    elif bug == "slow":
        rates = paced(slower_at=300.0)
    else:
        planned = 2
    found = Findings(RUNS, figures["results"], figures["events"], ledger, figures["kills"],
                     rates, 0, 1, 1, 30.0, planned)  # fmt: skip
    found.check()
    assert len(found.violations) == 1, found.violations


def test_percentiles() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(n) for n in range(1, 101)], 99) == 99.0

"""Every benchmark against one broker, then the report: ``make bench`` and ``make bench-quick``.

    uv run python -m bench.run_all [--quick]

Starts the development broker once (unless ``SLUICEGATE_KAFKA_BOOTSTRAP`` is set), empties
``results.jsonl`` in the output folder (`bench.table.out_dir`), runs each benchmark as a child
process with ``SLUICEGATE_KAFKA_BOOTSTRAP`` pointing at the broker, then ``bench/report.py`` in
a throwaway environment with matplotlib, which writes ``report.md`` and the PNG plots beside
``results.jsonl``. ``--quick`` runs every benchmark at small sizes (a few minutes): to check
that they work, not to quote. Stops at the first benchmark that fails (a wrong word count in
``bench.peers_wordcount`` is a failure).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.processes import kafka_bootstrap
from bench.table import out_dir

_REPO = Path(__file__).resolve().parent.parent
MATPLOTLIB = "matplotlib==3.11.2"

# Every peer on the same input, in one run, paired rounds: 20,000 lines, as at 5,000
# sluicegate's runs (about 1 s) are at the commit floor and a ratio only a bound, and faust
# (20-50x slower) at more would keep the full run over an hour on 2 cores.
FULL: list[list[str]] = [
    [
        "bench.peers_wordcount",
        "--systems",
        "sluicegate,quix,faust",
        "--lines",
        "20000",
        "--rounds",
        "3",
    ],
    # the unchanged faust app both ways, 4,000 posts, 3 paired rounds: under 5 minutes
    ["bench.faust_both_ways"],
    ["bench.wordcount_throughput"],
    ["bench.checkpoint_e2e"],
    ["bench.recovery"],
    ["bench.checkpoint_cost"],
    ["bench.agent_steps"],
    ["bench.incremental_upload"],
    ["bench.memory_state"],
    ["bench.profile_wordcount"],
    ["bench.savepoint_cost"],
    ["bench.console_runs"],
    ["bench.coordinator_scale"],
    ["bench.parked_runs"],
]
QUICK: list[list[str]] = [
    ["bench.peers_wordcount", "--lines", "2000", "--rounds", "2"],
    ["bench.faust_both_ways", "--quick"],
    ["bench.wordcount_throughput", "--lines", "5000", "--rounds", "2"],
    ["bench.checkpoint_e2e", "--rate", "2000", "--seconds", "10"],
    ["bench.recovery", "--sizes-mb", "5,20"],
    ["bench.checkpoint_cost", "--sizes", "10000", "--fractions", "0.1,1"],
    ["bench.agent_steps", "--runs", "5", "--steps", "10", "--job-rounds", "2"],
    ["bench.incremental_upload", "--keys", "20000", "--checkpoints", "10"],
    ["bench.memory_state", "--keys", "5000", "--rounds", "3"],
    ["bench.profile_wordcount", "--lines", "2000"],
    ["bench.savepoint_cost", "--sizes", "10000"],
    ["bench.console_runs", "--runs", "1000"],
    ["bench.coordinator_scale", "--subtasks", "100,1000", "--checkpoints", "3", "--rounds", "2"],
    [
        "bench.parked_runs",
        "--parked",
        "100,2000",
        "--memory-keys",
        "100,20000",
        "--rounds",
        "2",
        "--active",
        "5",
    ],
]


def commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=_REPO, capture_output=True, text=True
    )
    return done.stdout.strip() or "(unknown)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few minutes")
    args = parser.parse_args()
    out = out_dir()
    (out / "results.jsonl").unlink(missing_ok=True)
    started = time.monotonic()
    with kafka_bootstrap() as bootstrap:
        env = {**os.environ, "SLUICEGATE_KAFKA_BOOTSTRAP": bootstrap,
               "SLUICEGATE_BENCH_OUT": str(out)}  # fmt: skip
        for command in QUICK if args.quick else FULL:
            print(f"\n== {' '.join(command)}", flush=True)
            subprocess.run([sys.executable, "-m", *command], cwd=_REPO, env=env, check=True)
    uv = shutil.which("uv") or str(_REPO / ".tools" / "bin" / "uv")
    clean = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    report = [uv, "run", "--isolated", "--no-project", "--with", MATPLOTLIB, "python",
              str(_REPO / "bench" / "report.py"), str(out), "--commit", commit()]  # fmt: skip
    subprocess.run(report, cwd=_REPO, env=clean, check=True)
    print(f"all benchmarks took {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()

"""``bench/out/report.md`` and PNG plots from the benchmarks' ``results.jsonl``.

    uv run --isolated --no-project --with matplotlib==3.11.2 \\
        python bench/report.py bench/out [--commit abc1234]

Runs in its own throwaway environment (matplotlib is not a dependency of the project), so it
imports nothing from the repository and reaches matplotlib only through ``importlib``: mypy of
the project checks this file without matplotlib installed. Reads the JSON lines the benchmarks
appended (``bench.table.record``): every ``table`` becomes a markdown table under its title, in
the order the benchmarks ran; the data points become three plots, each shown under the table
of its benchmark and skipped when that benchmark did not run:

* ``throughput.png``: word count words/s vs processes, sluicegate and the peers (median of the
  rounds, bars from the slowest to the fastest round), from ``bench.peers_wordcount``;
* ``checkpoints.png``: end-to-end and alignment time of each checkpoint over the run, from
  ``bench.checkpoint_e2e``;
* ``recovery.png``: SIGKILL to the first record processed vs state size, with and without a
  local copy, from ``bench.recovery``;
* ``coordinator_scale.png``: the coordinator's CPU per checkpoint (median of the rounds, bars
  from the lowest to the highest round) and trigger-to-complete p50 vs subtasks, with the
  line of linear growth from the smallest size, from ``bench.coordinator_scale``;
* ``parked_runs.png``: checkpoint duration, uploaded bytes (medians, bars from the lowest to
  the highest round) and memory per parked run vs runs parked for approval, from
  ``bench.parked_runs``; ``idle_memory.png`` the same vs idle memory keys, when it measured
  more than one count of them.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

Row = dict[str, Any]


def load(path: Path) -> list[Row]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        row = json.loads(line)
        if not isinstance(row, dict) or "bench" not in row or "kind" not in row:
            raise ValueError(f"{path}:{n}: not a benchmark result: {line[:200]}")
        rows.append(row)
    return rows


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    rule = "|---|" + "".join("---:|" for _ in header[1:])  # names left, numbers right
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def plot_throughput(plt: Any, rows: list[Row], out: Path) -> bool:
    runs = [r for r in rows if r["bench"] == "peers_wordcount" and r["kind"] == "run"]
    if not runs:
        return False
    by_system: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:  # a series per system and input size (make bench compares two sizes)
        series = f"{r['system']}, {r['words']:,} words"
        by_system[series][r["processes"]].append(r["words"] / r["seconds"])
    figure, axes = plt.subplots(figsize=(6, 4))
    for system, by_processes in sorted(by_system.items()):
        xs = sorted(by_processes)
        mids = [median(by_processes[x]) for x in xs]
        low = [m - min(by_processes[x]) for m, x in zip(mids, xs, strict=True)]
        high = [max(by_processes[x]) - m for m, x in zip(mids, xs, strict=True)]
        axes.errorbar(xs, mids, yerr=[low, high], marker="o", capsize=4, label=system)
    axes.set(xlabel="processes", ylabel="words/s (to visible read_committed)",
             title="Word count, warm (median, bars: min-max; guarantees: table)",
             xticks=sorted({r["processes"] for r in runs}))  # fmt: skip
    axes.set_yscale("log")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out / "throughput.png", dpi=110)
    plt.close(figure)
    return True


def plot_checkpoints(plt: Any, rows: list[Row], out: Path) -> bool:
    points = [r for r in rows if r["bench"] == "checkpoint_e2e" and r["kind"] == "checkpoint"]
    if not points:
        return False
    points.sort(key=lambda r: r["at_s"])
    figure, axes = plt.subplots(figsize=(7, 4))
    at = [r["at_s"] for r in points]
    axes.plot(at, [r["end_to_end_s"] * 1000 for r in points], marker=".", label="end-to-end")
    axes.plot(at, [r["alignment_s"] * 1000 for r in points], marker=".", label="alignment")
    axes.set_ylim(bottom=0)
    axes.set(xlabel="seconds since the input started", ylabel="ms",
             title=f"Checkpoint duration at {points[0]['rate']:,} records/s")  # fmt: skip
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out / "checkpoints.png", dpi=110)
    plt.close(figure)
    return True


def plot_recovery(plt: Any, rows: list[Row], out: Path) -> bool:
    ticker = importlib.import_module("matplotlib.ticker")
    points = [r for r in rows if r["bench"] == "recovery" and r["kind"] == "restore"]
    if not points:
        return False
    figure, axes = plt.subplots(figsize=(6, 4))
    for local in (True, False):
        mine = sorted((r["state_mb"], r["seconds"]) for r in points if r["local"] == local)
        label = "local copy (same worker)" if local else "download (new worker)"
        axes.plot([m for m, _ in mine], [s for _, s in mine], marker="o", label=label)
    axes.set(xlabel="state MB", ylabel="SIGKILL to first record, s",
             title="Recovery time vs state size")  # fmt: skip
    axes.set_xscale("log")
    axes.set_xticks(sorted({r["state_mb"] for r in points}))
    axes.xaxis.set_major_formatter(ticker.FormatStrFormatter("%.0f"))
    axes.xaxis.set_minor_formatter(ticker.NullFormatter())
    axes.set_ylim(0, max(r["seconds"] for r in points) * 1.15)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out / "recovery.png", dpi=110)
    plt.close(figure)
    return True


def spread_bars(
    axes: Any, xs: Sequence[float], values: Sequence[Sequence[float]], scale: float, label: str
) -> list[float]:
    """Plot each x's median of ``values`` (times ``scale``) with its min-max as error bars;
    returns the medians."""
    mids = [median(v) * scale for v in values]
    low = [m - min(v) * scale for m, v in zip(mids, values, strict=True)]
    high = [max(v) * scale - m for m, v in zip(mids, values, strict=True)]
    axes.errorbar(xs, mids, yerr=[low, high], marker="o", capsize=4, label=label)
    return mids


def plot_coordinator_scale(plt: Any, rows: list[Row], out: Path) -> bool:
    points = sorted(
        (r for r in rows if r["bench"] == "coordinator_scale" and r["kind"] == "size"),
        key=lambda r: r["subtasks"],
    )
    if not points:
        return False
    figure, axes = plt.subplots(figsize=(6, 4))
    xs = [r["subtasks"] for r in points]
    mids = spread_bars(axes, xs, [r["cpu_s"] for r in points], 1000, "CPU a checkpoint")
    axes.plot(xs, [r["wall_p50_s"] * 1000 for r in points], marker="s",
              label="trigger to complete, p50")  # fmt: skip
    axes.plot(xs, [mids[0] * x / xs[0] for x in xs], linestyle="--", color="grey",
              label="linear from the smallest")  # fmt: skip
    axes.axhline(1000, color="red", linestyle=":", label="target at 10,000: 1 s")
    axes.set(xlabel="subtasks", ylabel="ms (coordinator only)",
             title="Coordinator at scale, simulated")  # fmt: skip
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out / "coordinator_scale.png", dpi=110)
    plt.close(figure)
    return True


def _idle_rows(rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """``bench.parked_runs``' sizes: (those with the fewest idle memory keys, by parked runs;
    those with the fewest parked runs, by idle memory keys)."""
    sizes = [r for r in rows if r["bench"] == "parked_runs" and r["kind"] == "size"]
    if not sizes:
        return [], []
    fewest_keys = min(r.get("memory_keys", 0) for r in sizes)
    fewest_parked = min(r["parked"] for r in sizes)
    parked = [r for r in sizes if r.get("memory_keys", 0) == fewest_keys]
    memory = [r for r in sizes if r["parked"] == fewest_parked]
    return (
        sorted(parked, key=lambda r: r["parked"]),
        sorted(memory, key=lambda r: r.get("memory_keys", 0)),
    )


def _plot_idle(plt: Any, points: list[Row], x: str, item: str, out: Path) -> None:
    figure, (duration, uploaded, memory) = plt.subplots(1, 3, figsize=(12, 3.8))
    xs = [r.get(x, 0) for r in points]

    def bars(axes: Any, values: list[list[float]], scale: float, label: str) -> None:
        mids = spread_bars(axes, xs, values, scale, label)
        axes.axhspan(mids[0] * 0.9, mids[0] * 1.1, color="green", alpha=0.15,
                     label="smallest +-10%")  # fmt: skip

    bars(duration, [r["seconds"] for r in points], 1000, "checkpoint (sync + upload)")
    duration.set(ylabel="ms", title="Checkpoint duration")
    bars(uploaded, [[float(u) for u in r["uploaded"]] for r in points], 1e-3, "uploaded")
    uploaded.set(ylabel="KB", title="Uploaded bytes a checkpoint")
    uploaded.set_yscale("log")
    if item == "parked run":
        memory.plot(xs, [r["kept_per_run"] for r in points], marker="o",
                    label="kept by the operator")  # fmt: skip
        memory.plot(xs, [r["rss_per_run"] for r in points], marker="s", label="RSS growth")
        memory.axhline(2048, color="red", linestyle=":", label="target: 2 KB")
        memory.set(ylabel="bytes per parked run", title="Memory per parked run")
        memory.set_yscale("log")
    else:  # what an open keeps in all: flat if idle keys cost nothing
        memory.plot(xs, [r.get("kept_bytes", 0) / 1e3 for r in points], marker="o",
                    label="kept by the operator")  # fmt: skip
        memory.plot(xs, [r.get("rss_bytes", 0) / 1e3 for r in points], marker="s",
                    label="RSS growth")  # fmt: skip
        memory.set(ylabel="KB in all", title="Memory after an open")
        memory.set_ylim(bottom=0)
    for axes in (duration, uploaded, memory):
        axes.set_xscale("log")
        axes.set_xlabel("runs parked for approval" if item == "parked run" else "idle memory keys")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize="small")
    duration.set_ylim(bottom=0)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def plot_parked_runs(plt: Any, rows: list[Row], out: Path) -> bool:
    parked, memory = _idle_rows(rows)
    if not parked:
        return False
    _plot_idle(plt, parked, "parked", "parked run", out / "parked_runs.png")
    if len(memory) > 1:
        _plot_idle(plt, memory, "memory_keys", "idle memory key", out / "idle_memory.png")
    return True


PLOTS = {
    "peers_wordcount": ("throughput.png", plot_throughput),
    "checkpoint_e2e": ("checkpoints.png", plot_checkpoints),
    "recovery": ("recovery.png", plot_recovery),
    "coordinator_scale": ("coordinator_scale.png", plot_coordinator_scale),
    "parked_runs": ("parked_runs.png", plot_parked_runs),
}


def report(out: Path, commit: str) -> Path:
    rows = load(out / "results.jsonl")
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")
    drawn = {bench for bench, (_, draw) in PLOTS.items() if draw(plt, rows, out)}
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [f"# sluicegate benchmarks\n\n{stamp}, commit {commit}. Made by `make bench` "
             f"from `results.jsonl`; each script's docstring says what it measures.\n"]  # fmt: skip
    placed: set[str] = set()
    tables = [r for r in rows if r["kind"] == "table"]
    last_of = {r["bench"]: i for i, r in enumerate(tables)}
    for i, table in enumerate(tables):
        parts.append(f"## {table['title']}\n\n*bench.{table['bench']}*\n")
        parts.append(markdown_table(table["header"], table["rows"]) + "\n")
        parts.extend(note + "\n" for note in table["notes"])
        if table["bench"] in drawn and last_of[table["bench"]] == i:
            image = PLOTS[table["bench"]][0]
            parts.append(f"![{image}]({image})\n")
            placed.add(table["bench"])
    for bench in sorted(drawn - placed):
        image = PLOTS[bench][0]
        parts.append(f"## bench.{bench}\n\n![{image}]({image})\n")
    path = out / "report.md"
    path.write_text("\n".join(parts))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder holding results.jsonl")
    parser.add_argument("--commit", default="(unknown)")
    args = parser.parse_args()
    path = report(args.out, args.commit)
    print(f"wrote {path} and its plots")


if __name__ == "__main__":
    main()

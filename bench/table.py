"""Printing benchmark results as an aligned text table, and recording them for the report.

Every table a benchmark prints through `report_table` is also appended, with the data points
its plots need (`record`), as one JSON line to ``results.jsonl`` in the output folder
(``$SLUICEGATE_BENCH_OUT``, default ``bench/out``, gitignored). ``bench/report.py`` turns that
file into ``report.md`` and PNG plots; ``make bench`` empties it first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["out_dir", "print_table", "record", "report_table"]


def out_dir() -> Path:
    """The folder the benchmarks write their results to (created when missing)."""
    default = Path(__file__).resolve().parent / "out"
    folder = Path(os.environ.get("SLUICEGATE_BENCH_OUT") or default)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def record(bench: str, kind: str, **fields: Any) -> None:
    """Append ``{"bench": bench, "kind": kind, **fields}`` to ``results.jsonl``."""
    line = json.dumps({"bench": bench, "kind": kind, **fields}, sort_keys=True)
    with (out_dir() / "results.jsonl").open("a") as results:
        results.write(line + "\n")


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` under ``header``, right-aligned, with a rule below the header."""
    table = [tuple(header), *(tuple(r) for r in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for n, row in enumerate(table):
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def report_table(
    bench: str,
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    notes: Sequence[str] = (),
) -> None:
    """`print_table`, then each note on a line of its own; also recorded for the report."""
    print_table(header, rows)
    for note in notes:
        print(note)
    record(
        bench, "table", title=title, header=list(header), rows=[list(r) for r in rows],
        notes=list(notes),
    )  # fmt: skip

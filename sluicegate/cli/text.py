"""Plain-text formatting shared by the CLI views: status, checkpoint list, --watch."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["bytes_text", "counts_rows", "duration_text", "seconds_text", "table"]


def table(headers: list[str] | None, rows: list[list[str]]) -> str:
    """Columns aligned left, two spaces apart; no trailing spaces."""
    lines = ([headers] if headers else []) + rows
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def counts_rows(counts: Mapping[str, Mapping[str, Mapping[str, int]]]) -> list[list[str]]:
    """Rows of operators' status counts (uid -> group -> name -> n), e.g.
    ``["runs (refund-desk)", "done 40, running 3"]``; sorted, zeros left out."""
    rows = []
    for uid, groups in sorted(counts.items()):
        for group, by_name in sorted(groups.items()):
            named = ", ".join(f"{name} {n}" for name, n in sorted(by_name.items()) if n)
            rows.append([f"{group} ({uid})", named or "none"])
    return rows


def placement_rows(waiting_for: str | None, fenced_by: int | None) -> list[list[str]]:
    """Rows of a job status's ``waiting_for`` and ``fenced_by``, each only when set."""
    rows = [["waiting for", waiting_for]] if waiting_for else []
    if fenced_by is not None:
        rows.append(["FENCED", f"by coordinator epoch {fenced_by}: this status is stale"])
    return rows


def duration_text(start: float | None, end: float | None) -> str:
    return "-" if start is None or end is None else seconds_text(max(0.0, end - start))


def seconds_text(value: float) -> str:
    if value < 10:
        return f"{value:.2f}s"
    if value < 100:
        return f"{value:.1f}s"
    return f"{value:.0f}s"


def bytes_text(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"

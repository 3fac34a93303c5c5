"""Which runs the console's Runs page lists: a filter read from the page's query, sans-IO.

A `RunFilter` holds every condition the page can set; a run is listed when it meets all:

=============  ==============================================================================
query          a run matches when
=============  ==============================================================================
``status``     its latest event's status is this one
``hours``      it started (its ``started`` or ``forked`` event) within the last N hours
``meta``       ``key=value``: its task's metadata has ``key``, and the value is ``value``: a
               string as it is, any other JSON value as its JSON text (``vip=true``, ``n=3``)
=============  ==============================================================================

`RunFilter.parse` takes the query's raw strings and says what it could not read, so the page
shows the mistake instead of silently listing everything.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from sluicegate.agents.history.events import RunSummary

__all__ = ["RunFilter"]

_MAX_HOURS = 24 * 365 * 100


@dataclass(frozen=True, slots=True)
class RunFilter:
    """The conditions of the module docstring; None: no condition."""

    status: str | None = None
    hours: float | None = None
    meta: tuple[str, str] | None = None

    @classmethod
    def parse(
        cls,
        *,
        status: str | None,
        hours: str | None,
        meta: str | None,
        statuses: frozenset[str],
    ) -> tuple[RunFilter, list[str]]:
        """The filter of a query's raw values, and a line per value it could not read (left
        out of the filter)."""
        problems: list[str] = []
        wanted = status if status in statuses else None
        if status and wanted is None:
            problems.append(f"There is no status {status!r}.")
        within: float | None = None
        if hours and hours.strip():
            try:
                within = float(hours)
            except ValueError:
                within = None
            if within is None or not math.isfinite(within) or not 0 < within <= _MAX_HOURS:
                problems.append("Started within: a number of hours greater than 0.")
                within = None
        pair: tuple[str, str] | None = None
        if meta and meta.strip():
            key, equals, value = meta.strip().partition("=")
            if not equals or not key.strip():
                problems.append("Metadata: key=value, e.g. tenant=acme.")
            else:
                pair = (key.strip(), value.strip())
        return cls(wanted, within, pair), problems

    def matches(self, run: RunSummary, now: float) -> bool:
        """Whether ``run`` meets every condition, at unix time ``now``."""
        if self.status is not None and run.status != self.status:
            return False
        if self.hours is not None and (
            run.started_at is None or run.started_at < now - self.hours * 3600
        ):
            return False
        if self.meta is not None:
            key, value = self.meta
            metadata = run.metadata or {}
            if key not in metadata or _as_text(metadata[key]) != value:
                return False
        return True

    def query(self) -> dict[str, str]:
        """The filter as the page's query parameters (what its paging links carry)."""
        found: dict[str, str] = {}
        if self.status is not None:
            found["status"] = self.status
        if self.hours is not None:
            found["hours"] = f"{self.hours:g}"
        if self.meta is not None:
            found["meta"] = f"{self.meta[0]}={self.meta[1]}"
        return found


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

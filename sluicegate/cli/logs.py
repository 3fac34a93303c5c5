"""The CLI's logging: one handler on the root logger, with repeated library lines held back.

Kafka clients log an ERROR per retry: ``sluicegate up`` logged 1-2k ``Topic ... not found in
cluster metadata`` lines while its topics were being created, a 40 s broker outage ~13k. The
`RepeatFilter` lets the first line of a kind through, then at most one every ``window_s``
seconds, which says how many like it were held back. A kind is the logger, the level and the
message template (``Topic %s not found in cluster metadata``), whatever its arguments.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO

__all__ = ["LIBRARY_LOGGERS", "RepeatFilter", "configure_logging"]

LIBRARY_LOGGERS = ("aiokafka", "kafka")
"""Loggers (and their children) whose repeated lines are held back."""

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@dataclass(slots=True)
class _Kind:
    last_passed: float
    held_back: int = 0


class RepeatFilter(logging.Filter):
    """Passes the first record of a kind, then at most one per ``window_s`` with the count of
    those held back in between; records of other loggers than ``loggers`` pass unchanged."""

    def __init__(
        self,
        window_s: float = 30.0,
        *,
        loggers: Iterable[str] = LIBRARY_LOGGERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._window_s = window_s
        self._loggers = tuple(loggers)
        self._clock = clock
        self._kinds: dict[tuple[str, int, str], _Kind] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is written; a passing repeat gets the count appended."""
        if not self._is_library(record.name):
            return True
        now = self._clock()
        key = (record.name, record.levelno, str(record.msg))
        kind = self._kinds.get(key)
        if kind is None:
            self._kinds[key] = _Kind(last_passed=now)
            return True
        if now - kind.last_passed < self._window_s:
            kind.held_back += 1
            return False
        if kind.held_back:
            seconds = now - kind.last_passed
            # Appended to the template: no "%" in it, so the record's arguments still fit.
            record.msg = f"{record.msg} [{kind.held_back} more like this in {seconds:.0f} s]"
        kind.last_passed, kind.held_back = now, 0
        return True

    def _is_library(self, name: str) -> bool:
        return any(name == lib or name.startswith(f"{lib}.") for lib in self._loggers)


def configure_logging(*, verbose: bool, stream: IO[str] | None = None) -> logging.Handler:
    """Log to ``stream`` (default stderr) at INFO (DEBUG if ``verbose``); the Kafka client at
    WARNING, with repeats held back. Returns the handler installed on the root logger."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(RepeatFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    return handler

"""Fault injection for tests: named fault points that SIGKILL the process when they fire.

Code calls :func:`fault_point` at the moments a crash is worth testing (for example between a
tool's execution and its journal ``done`` write). Which points fire is set by the environment,
read once per process:

* ``SLUICEGATE_FAULTS`` — comma-separated ``name=probability`` or ``name=probabilityxMAX``,
  e.g. ``effect.after_call=0.05x3,effect.before_call=0.01``: each time the point is reached
  it fires with ``probability``, at most ``MAX`` times in all.
* ``SLUICEGATE_FAULTS_STATE`` — a file counting fires across processes (one line per fire,
  written and fsynced before the kill), so that ``MAX`` holds across the restarts the kills
  cause. Without it, ``MAX`` counts per process.

With ``SLUICEGATE_FAULTS`` unset, :func:`fault_point` does nothing, at the cost of one check.
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sluicegate.operators.exceptions import ConfigError

__all__ = [
    "FAULTS_ENV",
    "FAULTS_STATE_ENV",
    "FaultInjector",
    "FaultSpec",
    "fault_point",
    "parse_faults",
    "reload_faults",
]

logger = logging.getLogger(__name__)

FAULTS_ENV = "SLUICEGATE_FAULTS"
FAULTS_STATE_ENV = "SLUICEGATE_FAULTS_STATE"
_FORMAT = (
    "expected comma-separated name=probability or name=probabilityxMAX, "
    "with 0 <= probability <= 1 and MAX >= 1, e.g. 'effect.after_call=0.05x3'"
)


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """Fault point ``name`` fires with ``probability``, at most ``max_fires`` times (if set)."""

    name: str
    probability: float
    max_fires: int | None = None


def parse_faults(spec: str, *, setting: str = FAULTS_ENV) -> dict[str, FaultSpec]:
    """The fault points of a ``SLUICEGATE_FAULTS`` value, by name; empty items are ignored.

    Raises:
        ConfigError: an item is malformed, out of range, or names a point twice; the error
            names ``setting`` and the expected format.
    """
    faults: dict[str, FaultSpec] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not name or not value:
            raise ConfigError(setting, f"bad item {item!r}: {_FORMAT}")
        probability_text, x, max_text = value.partition("x")
        try:
            probability = float(probability_text)
            max_fires = int(max_text) if x else None
        except ValueError:
            raise ConfigError(setting, f"bad item {item!r}: {_FORMAT}") from None
        if not 0.0 <= probability <= 1.0 or (max_fires is not None and max_fires < 1):
            raise ConfigError(setting, f"out of range in {item!r}: {_FORMAT}")
        if name in faults:
            raise ConfigError(setting, f"fault point {name!r} is given twice: {_FORMAT}")
        faults[name] = FaultSpec(name, probability, max_fires)
    return faults


def _sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class FaultInjector:
    """Fires fault points per their :class:`FaultSpec`.

    ``state_path`` is the cross-process fire count (``None``: count in this process only);
    ``draw`` returns a float in ``[0, 1)``; ``kill`` is what firing does (SIGKILL this process
    by default; tests inject something else).
    """

    def __init__(
        self,
        faults: Mapping[str, FaultSpec],
        *,
        state_path: Path | None = None,
        draw: Callable[[], float] = random.random,
        kill: Callable[[], None] = _sigkill,
    ) -> None:
        self._faults = dict(faults)
        self._state_path = state_path
        self._draw = draw
        self._kill = kill
        self._fired: dict[str, int] = {}
        self._exhausted: set[str] = set()

    def fires(self, name: str) -> int:
        """How many times ``name`` has fired: in all processes if counted in a state file."""
        if self._state_path is None:
            return self._fired.get(name, 0)
        try:
            lines = self._state_path.read_text().splitlines()
        except FileNotFoundError:
            return 0
        return sum(1 for line in lines if line == name)

    def point(self, name: str) -> None:
        """Reach fault point ``name``: maybe fire.

        Steps when it fires: 1. count the fire (appended and fsynced to the state file, under
        an exclusive lock, if there is one); 2. kill. Once ``MAX`` fires are counted the point
        never fires again.
        """
        spec = self._faults.get(name)
        if spec is None or name in self._exhausted or self._draw() >= spec.probability:
            return
        if not self._count_fire(spec):
            self._exhausted.add(name)
            return
        logger.warning("fault point %s fires", name)
        self._kill()

    def _count_fire(self, spec: FaultSpec) -> bool:
        """Count one fire of ``spec`` if its budget allows; return whether it does."""
        if self._state_path is None:
            fired = self._fired.get(spec.name, 0)
            if spec.max_fires is not None and fired >= spec.max_fires:
                return False
            self._fired[spec.name] = fired + 1
            return True
        with self._state_path.open("a+") as state:
            fcntl.flock(state, fcntl.LOCK_EX)
            state.seek(0)
            fired = sum(1 for line in state.read().splitlines() if line == spec.name)
            if spec.max_fires is not None and fired >= spec.max_fires:
                return False
            state.write(spec.name + "\n")
            state.flush()
            os.fsync(state.fileno())
        return True

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> FaultInjector | None:
        """The injector ``environ`` asks for, or ``None`` when ``SLUICEGATE_FAULTS`` is unset
        or empty.

        Raises:
            ConfigError: ``SLUICEGATE_FAULTS`` is malformed.
        """
        faults = parse_faults(environ.get(FAULTS_ENV, ""))
        if not faults:
            return None
        state = environ.get(FAULTS_STATE_ENV)
        return cls(faults, state_path=Path(state) if state else None)


_injector: FaultInjector | None = None
_loaded = False


def reload_faults(environ: Mapping[str, str] | None = None) -> FaultInjector | None:
    """Read the fault settings again (from ``environ``, default ``os.environ``); return the
    injector :func:`fault_point` now uses."""
    global _injector, _loaded
    _injector = FaultInjector.from_env(os.environ if environ is None else environ)
    _loaded = True
    return _injector


def fault_point(name: str) -> None:
    """Reach fault point ``name``: SIGKILL this process if the environment says it fires.

    Raises:
        ConfigError: on first use, if ``SLUICEGATE_FAULTS`` is malformed.
    """
    injector = _injector if _loaded else reload_faults()
    if injector is not None:
        injector.point(name)

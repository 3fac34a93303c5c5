"""Versioned operator state: the version of an operator's own rows, and forward upgraders.

An operator declares the version its code reads and writes (`StateVersions.current`, 1 unless
said) and, for every older version ``k`` still to be restored, an upgrader from ``k`` to
``k + 1``. A restore from a savepoint (or from a checkpoint of an older version, which goes
the same way) applies the chain ``k -> k+1 -> ... -> current`` to every row before the new
state is written; nothing reads rows of two versions at once. State newer than the code, or a
gap in the chain, is refused before anything is written (`operators.savepoints.compatibility`).

An upgrader is a pure function of one row: ``(key, value) -> (key, value)``, or None to drop
the row. Rows stay in the input partition they were in (the partition is the routing, not the
operator's to change).

Remove an upgrader only when no checkpoint or savepoint of its version is left:
``sluicegate state versions`` counts them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sluicegate.operators.exceptions import FatalError

__all__ = ["RowUpgrader", "StateVersions", "UpgradeError"]

RowUpgrader = Callable[[bytes, bytes], "tuple[bytes, bytes] | None"]
"""Upgrades one row from version ``k`` to ``k + 1``: the new row, or None to drop it."""


class UpgradeError(FatalError):
    """An upgrader failed or broke the rules (two rows onto one key)."""


@dataclass(frozen=True, slots=True)
class StateVersions:
    """The state version an operator's code reads and writes, and its upgraders ``k -> k+1``."""

    current: int = 1
    upgraders: tuple[tuple[int, RowUpgrader], ...] = ()

    def __post_init__(self) -> None:
        if self.current < 1:
            raise ValueError(f"a state version is at least 1, not {self.current}")
        for version, _ in self.upgraders:
            if not 1 <= version < self.current:
                raise ValueError(
                    f"an upgrader from version {version} makes no sense at version {self.current}"
                )

    @classmethod
    def of(cls, current: int, upgraders: Mapping[int, RowUpgrader] | None = None) -> StateVersions:
        """``current`` with ``upgraders`` (from-version -> upgrader to the next version)."""
        return cls(current, tuple(sorted((upgraders or {}).items(), key=lambda kv: kv[0])))

    def missing(self, from_version: int) -> list[int]:
        """Versions ``k`` in ``[from_version, current)`` without an upgrader to ``k + 1``."""
        known = {version for version, _ in self.upgraders}
        return [k for k in range(from_version, self.current) if k not in known]

    def upgrade(
        self, rows: Iterable[tuple[bytes, bytes]], from_version: int
    ) -> list[tuple[bytes, bytes]]:
        """``rows`` of ``from_version`` as rows of `current`, in key order.

        Raises `UpgradeError` if an upgrader is missing or raises, or two rows land on one key.
        """
        if self.missing(from_version):
            raise UpgradeError(f"no upgrader from state version(s) {self.missing(from_version)}")
        chain = [fn for version, fn in self.upgraders if version >= from_version]
        upgraded: dict[bytes, bytes] = {}
        for key, value in rows:
            row = self._upgrade_row((key, value), chain, from_version)
            if row is None:
                continue
            if row[0] in upgraded:
                raise UpgradeError(f"two rows were upgraded onto key {row[0][:80]!r}")
            upgraded[row[0]] = row[1]
        return sorted(upgraded.items())

    @staticmethod
    def _upgrade_row(
        row: tuple[bytes, bytes], chain: list[RowUpgrader], from_version: int
    ) -> tuple[bytes, bytes] | None:
        for step, fn in enumerate(chain, start=from_version):
            try:
                upgraded = fn(*row)
            except Exception as exc:
                raise UpgradeError(
                    f"the upgrader from version {step} failed on key {row[0][:80]!r}: {exc}"
                ) from exc
            if upgraded is None:
                return None
            row = upgraded
        return row

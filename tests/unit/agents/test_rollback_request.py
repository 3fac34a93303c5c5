"""`request_rollback`, the one check of ``runs rollback``, ``POST .../rollback`` and the
console: an unknown run and a run rolling back already are refused before anything is
written (the write itself is tested against a broker in tests/integration/agents)."""

from __future__ import annotations

import pytest

from sluicegate.agents.client import request_rollback
from sluicegate.agents.exceptions import RollingBackError, UnknownRunError
from sluicegate.agents.messages import RollbackRun
from sluicegate.agents.runs.directory import RunDirectory, RunSeen


class KnownRuns(RunDirectory):
    """A directory of fixed runs; ``bootstrap`` is never contacted."""

    def __init__(self, runs: dict[str, RunSeen]) -> None:
        super().__init__("127.0.0.1:1", "desk", "desk.events")
        self.runs = runs

    async def lookup(self, run_id: str) -> RunSeen | None:
        return self.runs.get(run_id)


@pytest.mark.parametrize(
    ("run_id", "refused"), [("ghost", UnknownRunError), ("undoing", RollingBackError)]
)
async def test_a_rollback_that_cannot_apply_is_refused_before_any_write(
    run_id: str, refused: type[Exception]
) -> None:
    directory = KnownRuns({"undoing": RunSeen("undoing", "rolling_back", 9, "")})
    command = RollbackRun(run_id=run_id, to_step=1, by="ann")
    with pytest.raises(refused) as caught:
        await request_rollback(directory, "desk.approvals", command)
    assert run_id in str(caught.value)
    if refused is RollingBackError:
        assert "being rolled back already" in str(caught.value)

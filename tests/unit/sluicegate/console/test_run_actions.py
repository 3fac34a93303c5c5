"""Fork and rollback from a step of a run's timeline: offered with operate only, behind a
confirmation page; the confirmed POST needs the scope, the session's token and the same origin,
and is recorded under the signed-in name; a refusal is said, hostile values are text."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sluicegate.agents.exceptions import DecisionRefusedError
from sluicegate.agents.fork.patch import MAX_PATCH_BYTES, ForkPatch, GoalChange, describe_patch
from sluicegate.agents.messages import ForkRun
from tests.unit.sluicegate.console.test_console_routes import (
    ANN,
    BASE,
    HOSTILE,
    OLGA,
    TOKENS,
    FakeDesk,
    app_with,
    same_origin,
    sign_in,
)


class ActingDesk(FakeDesk):
    """A run of three steps whose goal is hostile; records forks and rollbacks."""

    def __init__(self) -> None:
        super().__init__()
        self.forks: list[tuple[str, int, str]] = []
        self.fork_options: list[tuple[ForkPatch | None, bool]] = []
        self.rollbacks: list[tuple[str, int, str, str | None]] = []
        self.forced: list[bool] = []
        self.rolling_back = False

    async def timeline(self, agent: str, run_id: str) -> list[dict[str, Any]]:
        return [
            {"run_id": run_id, "seq": 0, "step": 0, "type": "started", "goal": HOSTILE},
            {"run_id": run_id, "seq": 1, "step": 1, "type": "model", "cost_usd": 0.01},
            {"run_id": run_id, "seq": 2, "step": 2, "type": "tool", "tool": "send_email"},
        ]

    async def fork(
        self,
        agent: str,
        run_id: str,
        *,
        from_step: int,
        by: str,
        patch: ForkPatch | None = None,
        recorded_only: bool = False,
    ) -> ForkRun:
        self.forks.append((run_id, from_step, by))
        self.fork_options.append((patch, recorded_only))
        note = None if patch is None else describe_patch(patch)
        return ForkRun.model_construct(
            run_id=f"{run_id}.fork-1", note=note, recorded_only=recorded_only
        )

    async def rollback(
        self,
        agent: str,
        run_id: str,
        *,
        to_step: int,
        by: str,
        reason: str | None,
        force: bool = False,
    ) -> None:
        if self.rolling_back and not force:
            raise DecisionRefusedError(agent, run_id, "being rolled back already", "wait")
        self.rollbacks.append((run_id, to_step, by, reason))
        self.forced.append(force)
        self.rolling_back = True


@pytest.fixture
def desk() -> ActingDesk:
    return ActingDesk()


@pytest.fixture
async def browser(desk: ActingDesk) -> Any:
    transport = httpx.ASGITransport(app=app_with(TOKENS, desk))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


async def test_an_operator_is_offered_the_steps_and_a_reader_is_not(
    browser: httpx.AsyncClient,
) -> None:
    await sign_in(browser, OLGA)
    page = (await browser.get("/console/runs/desk/r-1")).text
    assert 'action="/console/runs/desk/r-1/act"' in page
    assert '<option value="2" selected>2</option>' in page
    assert "<script" not in page
    await sign_in(browser, ANN)  # approve, not operate
    page = (await browser.get("/console/runs/desk/r-1")).text
    assert "/act" not in page
    assert (await browser.get("/console/runs/desk/r-1/act?action=fork&step=1")).status_code == 403


async def test_a_fork_asks_first_then_is_recorded_under_the_signed_in_name(
    browser: httpx.AsyncClient, desk: ActingDesk
) -> None:
    csrf = await sign_in(browser, OLGA)
    asking = await browser.get("/console/runs/desk/r-1/act", params={"action": "fork", "step": 1})
    assert asking.status_code == 200
    assert "starts from the state of run r-1 after step 1" in asking.text
    assert 'action="/console/runs/desk/r-1/fork"' in asking.text
    assert desk.forks == []
    unconfirmed = {"csrf": csrf, "step": "1"}
    assert (await browser.post("/console/runs/desk/r-1/fork", data=unconfirmed)).status_code == 400
    confirmed = {**unconfirmed, "confirm": "yes", "by": "mallory"}
    done = await browser.post("/console/runs/desk/r-1/fork", data=confirmed, headers=same_origin())
    assert (done.status_code, done.headers["location"]) == (303, "/console/runs/desk/r-1")
    assert desk.forks == [("r-1", 1, "olga")]
    shown = (await browser.get("/console/runs/desk/r-1")).text
    assert "Fork r-1.fork-1 of run r-1 after step 1 requested by olga." in shown


async def test_a_rollback_carries_its_reason_and_a_refusal_is_said(
    browser: httpx.AsyncClient, desk: ActingDesk
) -> None:
    csrf = await sign_in(browser, OLGA)
    asking = await browser.get("/console/runs/desk/r-1/act?action=rollback&step=0")
    assert "undoes the effects of its steps after step 0" in asking.text
    form = {"csrf": csrf, "step": "0", "confirm": "yes", "reason": f"wrong {HOSTILE}"}
    done = await browser.post("/console/runs/desk/r-1/rollback", data=form)
    assert done.status_code == 303
    assert desk.rollbacks == [("r-1", 0, "olga", f"wrong {HOSTILE}")]
    assert (
        "Rollback of run r-1 to step 0 requested by olga."
        in (await browser.get("/console/runs/desk/r-1")).text
    )
    again = await browser.post("/console/runs/desk/r-1/rollback", data=form)
    assert again.status_code == 303
    assert (
        "Nothing done: being rolled back already"
        in (await browser.get("/console/runs/desk/r-1")).text
    )
    assert len(desk.rollbacks) == 1


async def test_a_run_action_needs_operate_the_sessions_token_and_the_same_origin(
    browser: httpx.AsyncClient, desk: ActingDesk
) -> None:
    csrf = await sign_in(browser, ANN)
    form = {"csrf": csrf, "step": "1", "confirm": "yes"}
    assert (await browser.post("/console/runs/desk/r-1/fork", data=form)).status_code == 403
    csrf = await sign_in(browser, OLGA)
    forged = {"csrf": "forged", "step": "1", "confirm": "yes"}
    assert (await browser.post("/console/runs/desk/r-1/rollback", data=forged)).status_code == 403
    form = {"csrf": csrf, "step": "1", "confirm": "yes"}
    other = {"Origin": "https://evil.example"}
    answer = await browser.post("/console/runs/desk/r-1/fork", data=form, headers=other)
    assert answer.status_code == 403
    for bad in ({**form, "step": "-1"}, {**form, "step": "x"}, {**form, "step": ""}):
        assert (await browser.post("/console/runs/desk/r-1/fork", data=bad)).status_code == 400
    assert (await browser.post("/console/runs/desk/r-1/delete", data=form)).status_code == 404
    assert (await browser.post("/console/runs/nobody/r-1/fork", data=form)).status_code == 404
    assert (desk.forks, desk.rollbacks) == ([], [])


async def test_a_fork_with_a_patch_on_recorded_results_only_is_read_as_the_cli_reads_it(
    browser: httpx.AsyncClient, desk: ActingDesk
) -> None:
    csrf = await sign_in(browser, OLGA)
    asking = await browser.get("/console/runs/desk/r-1/act", params={"action": "fork", "step": 2})
    assert 'name="patch"' in asking.text
    assert 'name="recorded_only"' in asking.text
    form = {"csrf": csrf, "step": "2", "confirm": "yes", "recorded_only": "yes",
            "patch": '{"goal": "refund half"}'}  # fmt: skip
    done = await browser.post("/console/runs/desk/r-1/fork", data=form)
    assert done.status_code == 303
    assert desk.fork_options == [(GoalChange(goal="refund half"), True)]
    shown = (await browser.get("/console/runs/desk/r-1")).text
    assert "after step 2 (goal replaced), on recorded results only requested by olga." in shown


@pytest.mark.parametrize(
    "patch",
    ['{"goal": 3}', '{"goal": "a", "instructions": "b"}', "not json", f'{{"goal": "{HOSTILE}"'],
)
async def test_a_patch_that_is_not_one_is_refused_and_nothing_is_forked(
    browser: httpx.AsyncClient, desk: ActingDesk, patch: str
) -> None:
    csrf = await sign_in(browser, OLGA)
    form = {"csrf": csrf, "step": "1", "confirm": "yes", "patch": patch}
    refused = await browser.post("/console/runs/desk/r-1/fork", data=form)
    assert refused.status_code == 400
    assert "Nothing was done: the patch is not a patch" in refused.text
    assert "<script" not in refused.text
    assert desk.forks == []


def test_a_patch_larger_than_the_cli_takes_is_refused_too() -> None:
    from sluicegate.console.run_actions import ActionForm

    big = '{"goal": "' + "x" * MAX_PATCH_BYTES + '"}'
    form = {"step": "1", "confirm": "yes", "patch": big}
    assert ActionForm.parse("fork", form) == (
        f"Nothing was done: the patch is larger than {MAX_PATCH_BYTES} bytes"
    )


async def test_a_forced_rollback_skips_the_check_and_says_so(
    browser: httpx.AsyncClient, desk: ActingDesk
) -> None:
    csrf = await sign_in(browser, OLGA)
    asking = await browser.get("/console/runs/desk/r-1/act?action=rollback&step=1")
    assert 'name="force"' in asking.text
    form = {"csrf": csrf, "step": "1", "confirm": "yes"}
    assert (await browser.post("/console/runs/desk/r-1/rollback", data=form)).status_code == 303
    again = await browser.post("/console/runs/desk/r-1/rollback", data=form)
    assert again.status_code == 303
    assert "Nothing done" in (await browser.get("/console/runs/desk/r-1")).text
    forced = await browser.post("/console/runs/desk/r-1/rollback", data={**form, "force": "yes"})
    assert forced.status_code == 303
    assert desk.forced == [False, True]
    shown = (await browser.get("/console/runs/desk/r-1")).text
    assert "Rollback of run r-1 to step 1 (forced: not checked) requested by olga." in shown

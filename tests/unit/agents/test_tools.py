"""`@tool` declarations: what each kind of tool promises, and the defaults that follow."""

from __future__ import annotations

import pytest

from sluicegate.agents.journal import LookupNotFound, LookupResult, OnUnknown
from sluicegate.agents.tools import ToolContext, ToolDeclarationError, ToolKind, tool


async def nothing_found(ctx: ToolContext) -> LookupResult:
    return LookupNotFound()


@pytest.mark.parametrize(
    ("kind", "on_unknown", "approval"),
    [
        (ToolKind.READ_ONLY, OnUnknown.RETRY, False),
        (ToolKind.IDEMPOTENT_WRITE, OnUnknown.RETRY, False),
        (ToolKind.IRREVERSIBLE, OnUnknown.FAIL, True),
    ],
)
def test_each_kind_has_its_default_settlement_and_approval(
    kind: ToolKind, on_unknown: OnUnknown, approval: bool
) -> None:
    @tool(kind=kind)
    async def act(ctx: ToolContext, x: int) -> int:
        return x

    assert (act.on_unknown, act.needs_approval, act.compensate) == (on_unknown, approval, None)
    assert kind.has_effect is (kind is not ToolKind.READ_ONLY)


def test_a_reversible_tool_fails_closed_by_default_and_names_its_compensation() -> None:
    @tool(kind=ToolKind.REVERSIBLE, compensate="release")
    async def reserve(ctx: ToolContext, x: int) -> int:
        return x

    assert (reserve.on_unknown, reserve.needs_approval) == (OnUnknown.FAIL, False)


def test_an_idempotent_write_may_choose_another_settlement() -> None:
    @tool(kind=ToolKind.IDEMPOTENT_WRITE, on_unknown=OnUnknown.LOOKUP, lookup=nothing_found)
    async def put_profile(ctx: ToolContext, name: str) -> str:
        return name

    assert put_profile.on_unknown is OnUnknown.LOOKUP
    assert put_profile.lookup is nothing_found


def test_an_idempotent_write_has_no_compensation() -> None:
    with pytest.raises(ToolDeclarationError, match="only a reversible tool has a compensation"):

        @tool(kind=ToolKind.IDEMPOTENT_WRITE, compensate="undo")
        async def upsert(ctx: ToolContext, x: int) -> int:
            return x

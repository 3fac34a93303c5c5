"""The seat-booking tools the rollback and replay tests share: ``hold`` (reversible, undone by
``unhold``), ``unhold`` (refuses the hold ``refuse``, to make a compensation fail) and ``pay``
(irreversible: approval, and a rollback blocks on it). Each call is logged in ``calls``."""

from __future__ import annotations

from sluicegate.agents.tools import Tool, ToolContext, ToolKind, tool


def seat_tools(calls: list[str], refuse: str = "") -> list[Tool]:
    @tool(kind=ToolKind.REVERSIBLE, compensate="unhold")
    async def hold(ctx: ToolContext, seat: str) -> dict[str, str]:
        """Hold a seat."""
        calls.append(f"hold {seat}")
        return {"hold_id": f"h-{seat}"}

    @tool(kind=ToolKind.IRREVERSIBLE)
    async def unhold(ctx: ToolContext, hold_id: str) -> str:
        """Release a held seat."""
        calls.append(f"unhold {hold_id} as {ctx.idempotency_key}")
        if hold_id == refuse:
            raise ValueError(f"{hold_id} was sold on")
        return f"released {hold_id}"

    @tool(kind=ToolKind.IRREVERSIBLE)
    async def pay(ctx: ToolContext, amount: float) -> str:
        """Pay."""
        calls.append(f"pay {amount}")
        return "paid"

    return [hold, unhold, pay]

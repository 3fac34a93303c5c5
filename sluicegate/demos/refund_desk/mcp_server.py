"""The refund desk's tools as an MCP server, on the official SDK (streamable HTTP).

``python -m sluicegate.demos.refund_desk.mcp_server --world URL --port N`` serves, at
``http://127.0.0.1:N/mcp``, the tools `refund_desk_mcp` gives the agent through
`mcp_server`:

* ``lookup_order`` (``readOnlyHint``): the order, from the world service;
* ``issue_refund`` (``idempotentHint``, not destructive): the world deduplicates a refund by
  its ``Idempotency-Key``, so an unknown outcome is retried with the same key;
* ``send_email`` (``destructiveHint``): a person approves it before it is called.

Each effect forwards the idempotency key the agent's journal put in the request's
``_meta["sluicegate/idempotency-key"]`` as the world's ``Idempotency-Key`` header, so a call
the journal repeats after a crash is answered by the world from its first execution. A call
without that key (a client other than sluicegate) is refused: the server cannot make it safe.
The run id the world counts emails by is the key's first part (``<run_id>/<step>/<call>``).

A tool answers the world's JSON object as the result's structured content, which the agent
gives the model as it gives a `@tool` function's result. The refund's compensation
(`reverse_refund`) is not served: an MCP tool cannot be declared reversible (docs/mcp.md), so
this desk does not roll refunds back.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from sluicegate.agents.mcp import IDEMPOTENCY_KEY_META
from sluicegate.demos.refund_desk.world_client import WorldClient

__all__ = ["build", "main"]


class _World:
    """One `WorldClient` for the server's life, made in the server's event loop on first use."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: WorldClient | None = None

    @property
    def client(self) -> WorldClient:
        if self._client is None:
            self._client = WorldClient(self.url)
        return self._client


def _key(ctx: Context) -> str:
    meta: dict[str, Any] = dict(ctx.request_context.meta or {})
    key = meta.get(IDEMPOTENCY_KEY_META)
    if not isinstance(key, str) or not key:
        raise ValueError(f"this tool needs an idempotency key in _meta[{IDEMPOTENCY_KEY_META!r}]")
    return key


def _run_id(key: str) -> str:
    return key.rsplit("/", 2)[0]


def build(world_url: str) -> MCPServer:
    """The server, its tools calling the world service at ``world_url``."""
    app = MCPServer("refund-desk")
    world = _World(world_url)

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up an order: customer, email, amount, currency, status."""
        return await world.client.get_order(order_id)

    @app.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
    async def issue_refund(order_id: str, amount: float, ctx: Context) -> dict[str, Any]:
        """Refund ``amount`` of order ``order_id`` to the customer."""
        key = _key(ctx)
        return await world.client.issue_refund(order_id, amount, _run_id(key), key=key)

    @app.tool(annotations=ToolAnnotations(destructive_hint=True))
    async def send_email(to: str, subject: str, body: str, ctx: Context) -> dict[str, Any]:
        """Email the customer."""
        key = _key(ctx)
        return await world.client.send_email(to, subject, body, _run_id(key), key=key)

    return app


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the desk's tools over streamable HTTP until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", default="http://127.0.0.1:8480", help="world service URL")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8481)
    args = parser.parse_args(argv)
    build(args.world).run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()

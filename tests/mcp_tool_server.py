"""A real MCP server for tests, on the official SDK: ``python tests/mcp_tool_server.py``.

Its tools, one per kind a server can claim:

* ``record_note`` (``idempotentHint``, not destructive): a write; every call is appended to the
  ledger with the idempotency key of its ``_meta`` (a server that deduplicates would keep one
  note per key: this one records them all, so a test can count executions);
* ``read_balance`` (``readOnlyHint``): a read, also recorded;
* ``close_account`` (``destructiveHint``): recorded;
* ``sync_contacts``: no annotations at all, recorded.

The ledger is JSON lines (``tool``, ``key``, ``arguments``, ``auth``: the ``Authorization``
header over HTTP, ``traceparent`` and ``tracestate``: the trace context of the ``_meta``, or
null). ``--without TOOL`` leaves a tool out (a server that lost it);
``--transport http --port N`` serves streamable HTTP on 127.0.0.1, else stdio.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

KEY_META = "sluicegate/idempotency-key"


def build(ledger: Path, without: set[str]) -> MCPServer:
    app = MCPServer("test-tools")

    def record(tool: str, ctx: Context, **arguments: Any) -> str:
        meta = ctx.request_context.meta or {}
        request = getattr(ctx.request_context, "request", None)
        headers = getattr(request, "headers", None)
        auth = headers.get("authorization") if headers is not None else None
        line = {
            "tool": tool, "key": meta.get(KEY_META), "arguments": arguments, "auth": auth,
            "traceparent": meta.get("traceparent"), "tracestate": meta.get("tracestate"),
        }  # fmt: skip
        with ledger.open("a") as out:
            out.write(json.dumps(line) + "\n")
            out.flush()
            os.fsync(out.fileno())
        return str(meta.get(KEY_META))

    if "record_note" not in without:

        @app.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
        async def record_note(account: str, note: str, ctx: Context) -> str:
            """Add a note to an account (deduplicated by the idempotency key)."""
            return f"noted {record('record_note', ctx, account=account, note=note)}"

    if "read_balance" not in without:

        @app.tool(annotations=ToolAnnotations(read_only_hint=True))
        async def read_balance(account: str, ctx: Context) -> str:
            """The balance of an account."""
            record("read_balance", ctx, account=account)
            return f"{account}: 42.00"

    if "close_account" not in without:

        @app.tool(annotations=ToolAnnotations(destructive_hint=True))
        async def close_account(account: str, ctx: Context) -> str:
            """Close an account for good."""
            return f"closed {record('close_account', ctx, account=account)}"

    if "sync_contacts" not in without:

        @app.tool()
        async def sync_contacts(account: str, ctx: Context) -> str:
            """Copy an account's contacts to the CRM."""
            return f"synced {record('sync_contacts', ctx, account=account)}"

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger", type=Path, required=True)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--without", action="append", default=[])
    args = parser.parse_args()
    app = build(args.ledger, set(args.without))
    if args.transport == "http":
        app.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        app.run("stdio")


if __name__ == "__main__":
    main()

"""The LangGraph half of ``bench.agent_steps``: the same scripted run, checkpointed to SQLite.

    uv run --isolated --no-project --with langgraph==1.2.24 \\
        --with langgraph-checkpoint-sqlite==3.1.2 \\
        python bench/langgraph_steps.py --runs 20 --steps 40

Runs in its own throwaway environment (LangGraph is not a dependency of the project), so it
imports nothing from the repository and reaches LangGraph only through ``importlib``: mypy of
the project checks this file without LangGraph installed. Prints one JSON line.

The graph: a ``model`` node applies the same deterministic policy as the sluicegate side (tool
call ``add(a=n, b=1)`` for the first ``steps - 1`` model calls, then a final answer), a ``tool``
node calls ``add``, a conditional edge goes back to ``model`` or ends. A run is ``steps`` model
calls and ``steps - 1`` tool calls: ``2 * steps - 1`` super-steps, each checkpointed. Measured,
each after one warm-up run:

* ``plain``: compiled without a checkpointer, runs one after another;
* ``sqlite_sync``: `SqliteSaver` on a file, ``durability="sync"`` (each super-step's checkpoint
  is written before the next one starts), runs one after another, a thread id per run;
* ``sqlite_async``: the same with LangGraph's default ``durability="async"`` (the checkpoint of
  a super-step is written while the next one runs);
* ``sqlite_sync_concurrent``: `AsyncSqliteSaver`, ``durability="sync"``, all runs at once
  (``asyncio.gather`` of ``ainvoke``), as the sluicegate job runs them.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.metadata
import json
import operator
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

Message = dict[str, Any]


class RunGraphState(TypedDict):
    messages: Annotated[list[Message], operator.add]


def policy(messages: list[Message], steps: int) -> Message:
    """The next assistant message: ``add(n, 1)`` for ``n < steps - 1``, then the answer."""
    n = sum(1 for m in messages if m["role"] == "assistant")
    if n + 1 < steps:
        call = {"id": f"call-{n}", "name": "add", "arguments": json.dumps({"a": n, "b": 1})}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": f"done after {n} tool calls", "tool_calls": []}


def add(a: int, b: int) -> int:
    return a + b


def build_graph(steps: int) -> Any:
    """The uncompiled `StateGraph` of one run."""
    graph_module = importlib.import_module("langgraph.graph")

    def model(state: RunGraphState) -> dict[str, list[Message]]:
        return {"messages": [policy(state["messages"], steps)]}

    def tool(state: RunGraphState) -> dict[str, list[Message]]:
        (call,) = state["messages"][-1]["tool_calls"]
        result = add(**json.loads(call["arguments"]))
        answer = {"role": "tool", "content": json.dumps(result), "tool_call_id": call["id"]}
        return {"messages": [answer]}

    def route(state: RunGraphState) -> str:
        return "tool" if state["messages"][-1]["tool_calls"] else str(graph_module.END)

    builder = graph_module.StateGraph(RunGraphState)
    builder.add_node("model", model)
    builder.add_node("tool", tool)
    builder.add_edge(graph_module.START, "model")
    builder.add_conditional_edges("model", route, ["tool", graph_module.END])
    builder.add_edge("tool", "model")
    return builder


def task_input(i: int) -> RunGraphState:
    return {
        "messages": [
            {"role": "system", "content": "You add numbers with the add tool, then answer."},
            {"role": "user", "content": f"run {i}: count with add, then say done"},
        ]
    }


def config(thread: str, steps: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 2 * steps + 10}


def check(final: Any, steps: int) -> None:
    answer = final["messages"][-1]
    if answer["content"] != f"done after {steps - 1} tool calls":
        raise RuntimeError(f"unexpected final message {answer!r}")


def timed_sequential(
    invoke: Callable[[RunGraphState, dict[str, Any]], Any], runs: int, steps: int, label: str
) -> dict[str, float]:
    check(invoke(task_input(-1), config(f"{label}-warmup", steps)), steps)
    started = time.perf_counter()
    for i in range(runs):
        check(invoke(task_input(i), config(f"{label}-{i}", steps)), steps)
    return measured(time.perf_counter() - started, runs, steps)


def measured(elapsed: float, runs: int, steps: int) -> dict[str, float]:
    return {
        "elapsed_s": elapsed,
        "steps_per_s": runs * steps / elapsed,
        "ms_per_step": elapsed * 1000 / (runs * steps),
    }


async def timed_concurrent(builder: Any, db: Path, runs: int, steps: int) -> dict[str, float]:
    aio = importlib.import_module("langgraph.checkpoint.sqlite.aio")
    async with aio.AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        graph = builder.compile(checkpointer=saver)

        async def one(thread: str, i: int) -> None:
            final = await graph.ainvoke(task_input(i), config(thread, steps), durability="sync")
            check(final, steps)

        await one("concurrent-warmup", -1)
        started = time.perf_counter()
        await asyncio.gather(*(one(f"concurrent-{i}", i) for i in range(runs)))
        return measured(time.perf_counter() - started, runs, steps)


def bench(runs: int, steps: int) -> dict[str, Any]:
    sqlite_module = importlib.import_module("langgraph.checkpoint.sqlite")
    builder = build_graph(steps)
    result: dict[str, Any] = {
        "versions": {
            name: importlib.metadata.version(name)
            for name in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite")
        },
        "runs": runs,
        "steps": steps,
    }
    plain = builder.compile()
    result["plain"] = timed_sequential(plain.invoke, runs, steps, "plain")
    with tempfile.TemporaryDirectory(prefix="langgraph-bench-") as tmp:
        db = Path(tmp) / "checkpoints.sqlite"
        conn = sqlite3.connect(db, check_same_thread=False)
        try:
            saver = sqlite_module.SqliteSaver(conn)
            graph = builder.compile(checkpointer=saver)
            for durability in ("sync", "async"):

                def invoke(data: RunGraphState, cfg: dict[str, Any], d: str = durability) -> Any:
                    return graph.invoke(data, cfg, durability=d)

                label = f"sqlite_{durability}"
                result[label] = timed_sequential(invoke, runs, steps, label)
            result["sqlite_pragmas"] = {
                "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
                "synchronous": conn.execute("PRAGMA synchronous").fetchone()[0],
            }
            rows = conn.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", ("sqlite_sync-0",)
            ).fetchone()
            result["checkpoints_per_run"] = rows[0]
        finally:
            conn.close()
        concurrent_db = Path(tmp) / "concurrent.sqlite"
        result["sqlite_sync_concurrent"] = asyncio.run(
            timed_concurrent(builder, concurrent_db, runs, steps)
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=40, help="model calls per run")
    args = parser.parse_args()
    print(json.dumps(bench(args.runs, args.steps)))


if __name__ == "__main__":
    main()

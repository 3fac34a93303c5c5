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
calls and ``steps - 1`` tool calls: ``2 * steps - 1`` super-steps, each checkpointed. The
nodes are plain functions under ``invoke`` and ``async def`` under ``ainvoke`` (a plain function
under ``ainvoke`` runs in a thread pool, which costs LangGraph 4-10%): each mode in its best
form. Every mode, each after one warm-up run, with the process CPU seconds beside the wall
time (SQLite's fsync is system time of this process):

==============================  =================  ===========  ==========  =============
key                             checkpointer       durability   API         runs
==============================  =================  ===========  ==========  =============
``plain``                       none               -            invoke      one at a time
``plain_async``                 none               -            ainvoke     one at a time
``plain_concurrent``            none               -            ainvoke     all at once
``sqlite_sync``                 SqliteSaver        sync         invoke      one at a time
``sqlite_async``                SqliteSaver        async        invoke      one at a time
``aiosqlite_sync``              AsyncSqliteSaver   sync         ainvoke     one at a time
``aiosqlite_async``             AsyncSqliteSaver   async        ainvoke     one at a time
``sqlite_sync_concurrent``      AsyncSqliteSaver   sync         ainvoke     all at once
``aiosqlite_async_concurrent``  AsyncSqliteSaver   async        ainvoke     all at once
==============================  =================  ===========  ==========  =============

``durability="sync"`` writes each super-step's checkpoint before the next one starts;
``"async"`` (LangGraph's default) writes it while the next one runs. `SqliteSaver` has no
asynchronous methods, so it runs only under ``invoke``; all at once means ``asyncio.gather``
of ``ainvoke``, as the sluicegate job runs them. Each checkpointer writes to its own file.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
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


def calls_so_far(messages: list[Message]) -> int:
    """The assistant messages so far: one past the last one's call number (``call-<n>``). It
    reads back to the last assistant message only, as the sluicegate side does, so neither
    side's policy walks a conversation that grows every step."""
    for m in reversed(messages):
        if m["role"] == "assistant":
            return int(m["tool_calls"][0]["id"].removeprefix("call-")) + 1
    return 0


def policy(messages: list[Message], steps: int) -> Message:
    """The next assistant message: ``add(n, 1)`` for ``n < steps - 1``, then the answer."""
    n = calls_so_far(messages)
    if n + 1 < steps:
        call = {"id": f"call-{n}", "name": "add", "arguments": json.dumps({"a": n, "b": 1})}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": f"done after {n} tool calls", "tool_calls": []}


def add(a: int, b: int) -> int:
    return a + b


def build_graph(steps: int, *, asynchronous: bool) -> Any:
    """The uncompiled `StateGraph` of one run: ``async def`` nodes if ``asynchronous``."""
    graph_module = importlib.import_module("langgraph.graph")

    def model(state: RunGraphState) -> dict[str, list[Message]]:
        return {"messages": [policy(state["messages"], steps)]}

    def tool(state: RunGraphState) -> dict[str, list[Message]]:
        (call,) = state["messages"][-1]["tool_calls"]
        result = add(**json.loads(call["arguments"]))
        answer = {"role": "tool", "content": json.dumps(result), "tool_call_id": call["id"]}
        return {"messages": [answer]}

    async def amodel(state: RunGraphState) -> dict[str, list[Message]]:
        return model(state)

    async def atool(state: RunGraphState) -> dict[str, list[Message]]:
        return tool(state)

    def route(state: RunGraphState) -> str:
        return "tool" if state["messages"][-1]["tool_calls"] else str(graph_module.END)

    builder = graph_module.StateGraph(RunGraphState)
    builder.add_node("model", amodel if asynchronous else model)
    builder.add_node("tool", atool if asynchronous else tool)
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
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(runs):
        check(invoke(task_input(i), config(f"{label}-{i}", steps)), steps)
    return measured(time.perf_counter() - started, time.process_time() - cpu, runs, steps)


def measured(elapsed: float, cpu: float, runs: int, steps: int) -> dict[str, float]:
    return {
        "elapsed_s": elapsed,
        "cpu_s": cpu,
        "steps_per_s": runs * steps / elapsed,
        "ms_per_step": elapsed * 1000 / (runs * steps),
        "cpu_ms_per_step": cpu * 1000 / (runs * steps),
    }


async def timed_async(
    graph: Any, runs: int, steps: int, label: str, *, at_once: bool, **kwargs: Any
) -> dict[str, float]:
    """``runs`` runs of ``graph.ainvoke``: one after another, or all at once."""

    async def one(i: int) -> None:
        check(await graph.ainvoke(task_input(i), config(f"{label}-{i}", steps), **kwargs), steps)

    await one(-1)
    started, cpu = time.perf_counter(), time.process_time()
    if at_once:
        await asyncio.gather(*(one(i) for i in range(runs)))
    else:
        for i in range(runs):
            await one(i)
    return measured(time.perf_counter() - started, time.process_time() - cpu, runs, steps)


async def async_modes(builder: Any, folder: Path, runs: int, steps: int) -> dict[str, Any]:
    """The modes under ``ainvoke`` (``async def`` nodes)."""
    aio = importlib.import_module("langgraph.checkpoint.sqlite.aio")
    result: dict[str, Any] = {}
    plain = builder.compile()
    result["plain_async"] = await timed_async(plain, runs, steps, "pa", at_once=False)
    result["plain_concurrent"] = await timed_async(plain, runs, steps, "pc", at_once=True)
    modes = [("aiosqlite_sync", "sync", False), ("aiosqlite_async", "async", False),
             ("sqlite_sync_concurrent", "sync", True),
             ("aiosqlite_async_concurrent", "async", True)]  # fmt: skip
    for key, durability, at_once in modes:
        db = folder / f"{key}.sqlite"
        async with aio.AsyncSqliteSaver.from_conn_string(str(db)) as saver:
            graph = builder.compile(checkpointer=saver)
            result[key] = await timed_async(
                graph, runs, steps, key, at_once=at_once, durability=durability
            )
    return result


def bench(runs: int, steps: int) -> dict[str, Any]:
    sqlite_module = importlib.import_module("langgraph.checkpoint.sqlite")
    builder = build_graph(steps, asynchronous=False)
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
        for durability in ("sync", "async"):
            conn = sqlite3.connect(Path(tmp) / f"{durability}.sqlite", check_same_thread=False)
            try:
                graph = builder.compile(checkpointer=sqlite_module.SqliteSaver(conn))

                invoke = functools.partial(graph.invoke, durability=durability)

                label = f"sqlite_{durability}"
                result[label] = timed_sequential(invoke, runs, steps, label)
                result["sqlite_pragmas"] = {
                    "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
                    "synchronous": conn.execute("PRAGMA synchronous").fetchone()[0],
                }
                rows = conn.execute(
                    "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (f"{label}-0",)
                ).fetchone()
                result["checkpoints_per_run"] = rows[0]
            finally:
                conn.close()
        asynchronous = build_graph(steps, asynchronous=True)
        result |= asyncio.run(async_modes(asynchronous, Path(tmp), runs, steps))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=40, help="model calls per run")
    args = parser.parse_args()
    print(json.dumps(bench(args.runs, args.steps)))


if __name__ == "__main__":
    main()

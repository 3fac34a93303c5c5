"""Reading a faust ``App`` without starting it: its agents, topics, codecs and tables, into a
`FaustPlan`, and every feature sluicegate does not run into a `Refusal` with its source line.

Nothing of faust is started: no worker, consumer, producer or web server. What is read:

1. ``app.agents``: each agent's function, its topic (name, partitions, the ``Topic`` whose
   codecs decode it), ``concurrency``, ``isolated_partitions`` and ``sink=[...]``;
2. what each agent may send to: the faust topics and agents its function (and the module's
   functions it calls) names, found in its code's globals and closure;
3. each agent's stream calls, by a *probe*: the function is started on a `FeedStream` and run
   to the point where it awaits its first record (so ``stream.group_by(...)`` and
   ``stream.take(...)`` have been called, and an unsupported stream method has raised), then
   closed;
4. ``app.tables``: ``app.Table(name, default=...)``, plain or windowed by ``.tumbling(...)``
   or ``.hopping(...)`` (no ``on_window_close``, no ``key_index=True``, no other window);
5. ``@app.timer(interval)`` and ``@app.crontab(spec)``: each function, its schedule (read from
   the closure of faust's wrapper: ``interval_s``, or ``cron_format`` and ``timezone``) and
   what it may send to, as for an agent; one that names a table is refused (a timer runs on no
   partition of it);
6. tasks, services and web pages: refused.
"""

from __future__ import annotations

import ast
import dis
import inspect
import re
import types
from collections.abc import Iterable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

from faust.agents.agent import Agent as FaustAgent
from faust.models.fields import FieldDescriptor
from faust.tables.base import Collection as FaustCollection
from faust.tables.table import Table as FaustTable
from faust.tables.wrappers import WindowWrapper
from faust.topics import Topic as FaustTopic
from faust.web.views import View as FaustView
from faust.windows import HoppingWindow

from sluicegate.faust_adapter.exceptions import UnsupportedFeatureError
from sluicegate.faust_adapter.plan import (
    AgentPlan,
    FaustPlan,
    Refusal,
    Repartition,
    TablePlan,
    Take,
    TimerPlan,
    TopicPlan,
)
from sluicegate.faust_adapter.stepping import (
    AgentStepper,
    Awaiting,
    Failed,
    Finished,
    GroupByCall,
    TakeCall,
)
from sluicegate.faust_adapter.ticking import Cron, Interval, Schedule

__all__ = ["read_app"]

_PIPELINE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,99}")
_GLOBAL_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LATER = "see docs/faust.md, 'Not supported yet'"


def read_app(
    app: Any, *, modules: Iterable[types.ModuleType] = (), pipeline: str | None = None
) -> FaustPlan:
    """The plan of ``app``; ``modules`` are where its objects are defined (for source lines;
    the agents' modules are added), ``pipeline`` the job's name (default: the app's id)."""
    refusals: list[Refusal] = []
    scanned = _modules_of(app, modules)
    name = (pipeline or str(app.conf.id)).lower()
    if not _PIPELINE.fullmatch(name):
        refusals.append(Refusal(
            f"app id {name!r} as a pipeline name", _line_of(app, scanned),
            "a pipeline name is 1-100 of [a-z0-9_.-], starting alnum: pass --name",
        ))  # fmt: skip
    topics: dict[str, TopicPlan] = {}
    agents = [
        plan
        for agent in app.agents.values()
        if (plan := _agent(app, agent, name, topics, refusals)) is not None
    ]
    tables = [t for table in app.tables.values() if (t := _table(table, scanned, refusals))]
    timers = [
        timer
        for task in getattr(app, "_app_tasks", ())
        if (timer := _task(app, task, topics, refusals)) is not None
    ]
    refusals.extend(_services(app))
    refusals.extend(_pages(scanned))
    return FaustPlan(app, name, tuple(agents), tuple(topics.values()), tuple(tables),
                     tuple(refusals), tuple(timers))  # fmt: skip


# -- agents -----------------------------------------------------------------------------------


def _agent(
    app: Any, agent: Any, pipeline: str, topics: dict[str, TopicPlan], refusals: list[Refusal]
) -> AgentPlan | None:
    where = _where_function(agent.fun)
    before = len(refusals)
    source = _topic_of(app, agent.channel, f"@app.agent({agent.channel!r})", where, refusals)
    if getattr(agent, "concurrency", 1) != 1:
        refusals.append(Refusal(f"@app.agent(concurrency={agent.concurrency})", where,
                                "an agent runs one record at a time per subtask; raise the "
                                "parallelism instead"))  # fmt: skip
    if getattr(agent, "isolated_partitions", False):
        refusals.append(Refusal("@app.agent(isolated_partitions=True)", where, _LATER))
    sinks = [
        plan.name
        for sink in getattr(agent, "_sinks", ()) or ()
        if (plan := _send_target(app, sink, "sink=[...]", where, refusals)) is not None
        and _remember(topics, plan)
    ]
    sends = [
        plan.name
        for target in _referenced(agent.fun)
        if (plan := _send_target(app, target, "send", where, refusals)) is not None
        and _remember(topics, plan)
    ]
    calls = _probe(agent, refusals)
    repartition = take = None
    if calls is not None:
        group_bys, takes = calls
        repartition = _repartition(app, agent, pipeline, source, group_bys, refusals)
        take = _take(takes, refusals)
    if source is None or len(refusals) > before:
        return None
    _remember(topics, source)
    if repartition is not None:
        _remember(topics, repartition.topic)
    return AgentPlan(
        name=agent.name, uid=_uid(agent.name), function=agent.fun, source=source,
        repartition=repartition, sends=tuple(dict.fromkeys(sends)),
        sinks=tuple(dict.fromkeys(sinks)), where=where, take=take,
    )  # fmt: skip


def _remember(topics: dict[str, TopicPlan], plan: TopicPlan) -> bool:
    topics.setdefault(plan.name, plan)
    return True


def _topic_of(
    app: Any, channel: Any, feature: str, where: str, refusals: list[Refusal]
) -> TopicPlan | None:
    if not isinstance(channel, FaustTopic):
        refusals.append(Refusal(f"{feature} over an in-memory channel", where,
                                "agents read Kafka topics (app.topic(...))"))  # fmt: skip
        return None
    if channel.pattern is not None or len(channel.topics) != 1:
        refusals.append(Refusal(f"{feature} over a topic pattern or several topics", where,
                                "give each topic its own agent"))  # fmt: skip
        return None
    partitions = int(channel.partitions or app.conf.topic_partitions)
    return TopicPlan(channel.get_topic_name(), partitions, channel)


def _send_target(
    app: Any, target: Any, feature: str, where: str, refusals: list[Refusal]
) -> TopicPlan | None:
    if isinstance(target, FaustAgent):
        return _topic_of(app, target.channel, f"{feature} to agent {target.name}", where,
                         refusals)  # fmt: skip
    if isinstance(target, FaustTopic):
        return _topic_of(app, target, f"{feature} to {target!r}", where, refusals)
    if feature == "sink=[...]":
        refusals.append(Refusal(f"sink={target!r} (a callable sink)", where,
                                "sinks are topics or agents"))  # fmt: skip
    return None


def _referenced(function: Any) -> Iterator[Any]:
    """The objects ``function`` loads as globals (not attribute names: ``line.split`` is no
    reference to a global ``split``) or from its closure, and those of the module's functions
    it names, recursively."""
    seen: set[int] = set()
    pending = [function]
    while pending:
        fun = pending.pop()
        if id(fun) in seen or not inspect.isfunction(fun):
            continue
        seen.add(id(fun))
        names: set[str] = set()
        codes = [fun.__code__]
        while codes:
            code = codes.pop()
            names.update(i.argval for i in dis.get_instructions(code) if i.opname in _GLOBAL_LOADS)
            codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        found = [fun.__globals__[n] for n in sorted(names) if n in fun.__globals__]
        found += [cell.cell_contents for cell in fun.__closure__ or () if _filled(cell)]
        for obj in found:
            if inspect.isfunction(obj):
                pending.append(obj)
            else:
                yield obj


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _probe(agent: Any, refusals: list[Refusal]) -> tuple[list[GroupByCall], list[TakeCall]] | None:
    """Run the agent to its first wait on a `FeedStream`: its stream calls are then made."""
    stepper = AgentStepper(agent.name, agent.fun)
    where = _where_function(agent.fun)
    try:
        step = stepper.start()
        stream = stepper.stream
        calls = (list(stream.calls), list(stream.takes)) if stream is not None else ([], [])
    finally:
        stepper.close()
    if isinstance(step, Failed):
        if isinstance(step.error, UnsupportedFeatureError):
            refusals.append(Refusal(step.error.feature, step.error.where, step.error.hint))
        else:
            refusals.append(Refusal(
                f"agent {agent.name} raising {step.error!r} before its first record", where
            ))  # fmt: skip
        return None
    if isinstance(step, Finished):
        refusals.append(Refusal(f"agent {agent.name} returning before its first record", where))
        return None
    assert isinstance(step, Awaiting)
    return calls


def _take(takes: list[TakeCall], refusals: list[Refusal]) -> Take | None:
    if not takes:
        return None
    if len(takes) > 1:
        refusals.append(Refusal(f"stream.{takes[1].kind} twice in one agent", takes[1].where,
                                "take once per agent"))  # fmt: skip
        return None
    call = takes[0]
    size = call.max_
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        refusals.append(Refusal(f"stream.{call.kind}({size!r}, ...)", call.where,
                                "max_ is a number of values, at least 1"))  # fmt: skip
        return None
    if call.within is not None and call.within < 0:
        refusals.append(Refusal(f"stream.{call.kind}(within={call.within})", call.where,
                                "within is not negative"))  # fmt: skip
        return None
    return Take(call.kind, size, call.within, call.where)


def _repartition(
    app: Any, agent: Any, pipeline: str, source: TopicPlan | None, calls: list[GroupByCall],
    refusals: list[Refusal],
) -> Repartition | None:  # fmt: skip
    """``stream.group_by(...)``'s repartition topic, from the probe's calls."""
    if not calls:
        return None
    if len(calls) > 1:
        refusals.append(
            Refusal(
                "stream.group_by twice in one agent",
                calls[1].where,
                "group once per agent; send to another agent to regroup",
            )
        )
        return None
    call = calls[0]
    if source is None:
        return None
    if call.topic is not None:
        plan = _topic_of(app, call.topic, "stream.group_by(topic=...)", call.where, refusals)
        return Repartition(call.key, plan, call.where) if plan is not None else None
    name = call.name
    if name is None and isinstance(call.key, FieldDescriptor):
        name = call.key.ident
    if not name:
        refusals.append(
            Refusal(
                "stream.group_by(callable) without name=",
                call.where,
                "faust needs name= too: the repartition topic's suffix",
            )
        )
        return None
    channel = source.channel
    prefix = "" if channel.has_prefix else f"{agent.name}-"
    partitions = call.partitions or int(app.conf.topic_partitions)
    derived = channel.derive(
        prefix=prefix, suffix=f"-{name}-repartition", partitions=partitions, internal=True
    )
    topic = TopicPlan(f"sluicegate.{pipeline}.{derived.get_topic_name()}", partitions, derived)
    return Repartition(call.key, topic, call.where)


def _uid(agent_name: str) -> str:
    uid = re.sub(r"[^a-z0-9_.-]", "-", agent_name.lower()).strip("-._")
    return uid[:100] or "agent"


# -- tables, timers, tasks, services, pages --------------------------------------------------------


def _table(table: Any, modules: list[types.ModuleType], refusals: list[Refusal]) -> TablePlan:
    where = _line_of(table, modules)
    kind = type(table)
    window = getattr(table, "window", None)
    if kind is not FaustTable:
        refusals.append(Refusal(f"app.{kind.__name__}({table.name!r})", where, _LATER))
    elif getattr(table, "_on_window_close", None) is not None:
        refusals.append(Refusal(f"table {table.name!r} on_window_close", where, _LATER))
    elif window is not None and not isinstance(window, HoppingWindow):
        refusals.append(Refusal(f"table {table.name!r} with a {type(window).__name__}", where,
                                "supported windows: .tumbling(...) and .hopping(...)"))  # fmt: skip
    elif window is not None and f"{table.name}-key_index" in table.app.tables:
        refusals.append(Refusal(f"windowed table {table.name!r} with key_index=True (keys(), "
                                "items(), values())", where, _LATER))  # fmt: skip
    return TablePlan(table.name, table, where)


def _task(
    app: Any, task: Any, topics: dict[str, TopicPlan], refusals: list[Refusal]
) -> TimerPlan | None:
    """The plan of a timer or crontab; a plain ``app.task`` is refused."""
    starter = getattr(task, "__wrapped__", task)
    user = inspect.unwrap(task)
    where = _where_function(user)
    kind = {"around_timer": "app.timer", "cron_starter": "app.crontab"}.get(
        getattr(getattr(starter, "__code__", None), "co_name", ""), "app.task"
    )
    label = f"{kind} {getattr(user, '__name__', '?')}"
    if kind == "app.task":
        refusals.append(Refusal(label, where, _LATER))
        return None
    closed = _closure(starter)
    try:
        schedule: Schedule = (
            Interval(float(closed["interval_s"])) if kind == "app.timer"
            else Cron(str(closed["cron_format"]), closed["timezone"] or app.conf.timezone or UTC)
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        refusals.append(Refusal(f"{label} with a schedule sluicegate cannot read ({exc})", where))
        return None
    before = len(refusals)
    sends: list[str] = []
    for target in _referenced(user):
        if isinstance(target, FaustCollection | WindowWrapper):
            table = getattr(target, "table", target)
            refusals.append(Refusal(f"table {table.name!r} used in {label}", where,
                                    "a timer runs on no partition of a table: send to an "
                                    "agent that keeps the table instead"))  # fmt: skip
        elif (plan := _send_target(app, target, "send", where, refusals)) is not None:
            _remember(topics, plan)
            sends.append(plan.name)
    if len(refusals) > before:
        return None
    name = str(closed.get("timer_name") or f"{user.__module__}.{user.__qualname__}")
    # faust's names of functions defined in a function hold "<locals>"; its agents' do not.
    uid = _uid(name.replace("<locals>.", ""))
    return TimerPlan(name=name, uid=uid, kind=kind, function=user, schedule=schedule,
                     sends=tuple(dict.fromkeys(sends)), where=where,
                     takes_app=bool(inspect.signature(user).parameters))  # fmt: skip


def _closure(function: Any) -> dict[str, Any]:
    """The variables ``function`` closes over, by name (empty cells left out)."""
    code = getattr(function, "__code__", None)
    cells = getattr(function, "__closure__", None) or ()
    if code is None:
        return {}
    return {
        name: cell.cell_contents
        for name, cell in zip(code.co_freevars, cells, strict=True)
        if _filled(cell)
    }


def _services(app: Any) -> Iterator[Refusal]:
    for service in getattr(app, "_extra_services", ()):
        yield Refusal(f"app.service {service.__name__}", _where_function(service), _LATER)


def _pages(modules: list[types.ModuleType]) -> Iterator[Refusal]:
    seen: set[int] = set()
    for module in modules:
        for value in list(vars(module).values()):
            if (
                inspect.isclass(value)
                and issubclass(value, FaustView)
                and getattr(value, "view_path", None)
                and id(value) not in seen
            ):
                seen.add(id(value))
                yield Refusal(
                    f"app.page({value.view_path!r})",
                    _line_of(value, modules),
                    "web views are not served; read the tables' topics instead",
                )


# -- where things are -------------------------------------------------------------------------


def _modules_of(app: Any, modules: Iterable[types.ModuleType]) -> list[types.ModuleType]:
    found = list(modules)
    for agent in app.agents.values():
        module = inspect.getmodule(agent.fun)
        if module is not None and module not in found:
            found.append(module)
    return found


def _where_function(function: Any) -> str:
    """``file:line`` of a function's (or class's) definition, decorators included."""
    try:
        path = inspect.getsourcefile(function) or "<unknown>"
        code = getattr(function, "__code__", None)
        line = code.co_firstlineno if code is not None else inspect.getsourcelines(function)[1]
    except (OSError, TypeError):
        return "<unknown>"
    return f"{path}:{line}"


def _line_of(obj: Any, modules: list[types.ModuleType]) -> str:
    """``file:line`` of the module-level assignment or definition that binds ``obj`` (or an
    object wrapping it, such as a windowed table); a decorated one's first decorator."""
    for module in modules:
        names = {n for n, v in vars(module).items() if v is obj or getattr(v, "table", None) is obj}
        path: str | None = getattr(module, "__file__", None)
        if not names or path is None:
            continue
        try:
            tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        except (OSError, SyntaxError):
            return path
        for node in ast.walk(tree):
            targets = (
                node.targets if isinstance(node, ast.Assign)
                else [node.target] if isinstance(node, ast.AnnAssign) else []
            )  # fmt: skip
            if isinstance(node, ast.Assign | ast.AnnAssign) and any(
                isinstance(t, ast.Name) and t.id in names for t in targets
            ):
                return f"{path}:{node.lineno}"
            if isinstance(node, _DEFINITIONS) and node.name in names:
                first = node.decorator_list[0] if node.decorator_list else node
                return f"{path}:{first.lineno}"
        return path
    return "<unknown>"

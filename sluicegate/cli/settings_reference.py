"""docs/configuration.md, generated from the settings models and the ``sluicegate`` parser, so
that the page cannot drift from the code::

    python -m sluicegate.cli.settings_reference > docs/configuration.md

For each settings model (one per process kind, `SECTIONS`), every field is a row: its
environment variable (from the model's variables: ``_CoordinatorEnv``, ``_WorkerEnv``,
`CliSettings`, ``_EnvKafkaSettings``), its flags (the parser's options whose ``dest`` is the
field's name), its type and default (the model's) and its description (the field's docstring).
Then the flags of each process command that set no field. A unit test
(``tests/unit/sluicegate/test_settings_reference.py``) fails when the committed page differs.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import inspect
import itertools
import sys
import textwrap
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_settings import BaseSettings

from sluicegate.agents.models.selection import ModelSettings
from sluicegate.cli.settings import CliSettings
from sluicegate.coordinator.settings import CoordinatorSettings, _CoordinatorEnv
from sluicegate.deploy.render import RenderSettings
from sluicegate.operators.kafka.settings import KafkaSettings, _EnvKafkaSettings
from sluicegate.operators.runtime.subtask import SubtaskSettings
from sluicegate.operators.runtime.worker_settings import WorkerSettings, _WorkerEnv
from sluicegate.operators.state.codec import RocksDBSettings

__all__ = ["SECTIONS", "Section", "environment_variables", "flag_bindings", "reference"]

_PROCESS_COMMANDS = ("coordinator", "worker", "up", "dev kafka", "demo", "deploy render")
"""The commands whose every flag the page lists (the others' flags are arguments of one call,
not configuration: ``status --json``)."""


@dataclass(frozen=True, slots=True)
class Section:
    """One settings model on the page."""

    title: str
    model: type[Any]
    """A pydantic model or a dataclass."""
    read_by: str
    """The process kinds that read it (a field's ``read_by`` extra overrides it)."""
    about: str
    env: type[BaseSettings] | None = None
    """Its environment variables: the fields of this model, under its prefix."""
    commands: tuple[str, ...] = ()
    """The commands whose flags set its fields (and their subcommands; ``""``: every one)."""
    exclude: tuple[str, ...] = ()
    """Commands of ``commands`` that do not (and their subcommands)."""
    flag_dests: Mapping[str, str] = field(default_factory=dict)
    """A field set by flags of another ``dest`` (``coordinator_url``: ``--url``)."""


SECTIONS = (
    Section(
        "Coordinator",
        CoordinatorSettings,
        "coordinator",
        "`sluicegate.coordinator.settings.CoordinatorSettings`: how the coordinator behaves "
        "(read by `Coordinator` and `LocalJob` too), and where the `sluicegate coordinator` "
        "process keeps checkpoints and serves its API.",
        env=_CoordinatorEnv,
        commands=("coordinator", "up"),
    ),
    Section(
        "Worker",
        WorkerSettings,
        "worker",
        "`sluicegate.operators.runtime.worker_settings.WorkerSettings`: what a "
        "`sluicegate worker` process is configured with.",
        env=_WorkerEnv,
        commands=("worker", "up"),
    ),
    Section(
        "Kafka",
        KafkaSettings,
        "coordinator, worker, CLI",
        "`sluicegate.operators.kafka.KafkaSettings`: how every process reaches Kafka "
        "(the CLI's commands that read topics too: `runs`, `approve`, `reject`, `demo`).",
        env=_EnvKafkaSettings,
        commands=("",),
        exclude=("deploy",),
    ),
    Section(
        "The sluicegate command",
        CliSettings,
        "CLI",
        "`sluicegate.cli.settings.CliSettings`: what the `sluicegate` command itself reads. "
        "*client*: the commands that ask a running coordinator (those with `--url`: `status`, "
        "`stop`, `checkpoint list|trigger`, `savepoint create|delete`, `approve`, `reject`, "
        "`runs rollback`); *storage*: the ones that read checkpoint storage (`checkpoint "
        "audit`, `savepoint list`, `blobs`).",
        env=CliSettings,
        commands=("",),
        exclude=("coordinator", "worker", "deploy"),
        flag_dests={"coordinator_url": "url", "storage_url": "storage"},
    ),
    Section(
        "Models",
        ModelSettings,
        "worker",
        "`sluicegate.agents.models.selection.ModelSettings`: the model client of an agent whose "
        "model comes from `model_from_env` (the demo's agents); read where the agent runs. "
        "Provider keys: `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` ([models.md](models.md)).",
        env=ModelSettings,
    ),
    Section(
        "Kubernetes manifests",
        RenderSettings,
        "deploy render",
        "`sluicegate.deploy.RenderSettings`: what `sluicegate deploy render` writes into the "
        "manifests (the variables it sets are the pods' settings above).",
        commands=("deploy render",),
    ),
    Section(
        "Subtasks (Python only)",
        SubtaskSettings,
        "worker",
        "`sluicegate.operators.runtime.subtask.SubtaskSettings`: given as "
        "`Worker(subtask_settings=...)` or `LocalJob(subtask_settings=...)`; a worker process "
        "sets `state_changelog` only.",
    ),
    Section(
        "RocksDB (Python only)",
        RocksDBSettings,
        "worker",
        "`sluicegate.operators.state.RocksDBSettings`: the tuning of a subtask's database "
        "(`RocksDBStateStore.open(settings=...)`), explained in "
        "`sluicegate.operators.state.codec`.",
    ),
)


@dataclass(frozen=True, slots=True)
class _Setting:
    name: str
    type: Any
    default: str
    description: str
    read_by: str | None


def reference() -> str:
    """The page: every setting of `SECTIONS`, then the other flags of the process commands."""
    from sluicegate.cli.main import _parser

    commands = dict(_commands(_parser()))
    lines = [
        "# Configuration",
        "",
        "<!-- Generated by `python -m sluicegate.cli.settings_reference > docs/configuration.md`"
        " from the settings models and the command line; do not edit by hand. -->",
        "",
        "Every process reads its settings from `SLUICEGATE_*` environment variables; a flag "
        "overrides the variable, which overrides the default. An empty variable is unset. "
        "The settings models are also what Python code passes (`Coordinator(settings=...)`, "
        "`LocalJob(settings=...)`).",
        "",
        "Process kinds: *coordinator* (`sluicegate coordinator`), *worker* "
        "(`sluicegate worker`), *CLI* (the `sluicegate` command's other commands: `up` starts "
        "the first two and passes its flags on, `dev kafka`, `up` and `demo` start the "
        "development broker).",
    ]
    bound: set[tuple[str, str]] = set()
    for section in SECTIONS:
        lines += ["", f"## {section.title}", "", section.about, ""]
        lines += [
            "| setting | environment variable | flag | type | default | read by | description |",
            "|---|---|---|---|---|---|---|",
        ]
        env_names = _env_names(section.env)
        for setting in _settings(section.model):
            dest = section.flag_dests.get(setting.name, setting.name)
            scope = _scope(commands, section)
            flags = _flags(scope, dest)
            helps = [
                a.help for parser in scope.values() for a in _options(parser) if a.dest == dest
            ]
            bound |= {(path, dest) for path, _ in flags}
            flag_text = "<br>".join(f"`{path} {opt}`" for path, opt in flags) or "-"
            env = env_names.get(setting.name)
            lines.append(
                "| "
                + " | ".join(
                    [
                        f"`{setting.name}`",
                        f"`{env}`" if env else "-",
                        flag_text,
                        _cell(_type_text(setting.type)),
                        _cell(setting.default),
                        setting.read_by or section.read_by,
                        _cell(setting.description or next(filter(None, helps), "")),
                    ]
                )
                + " |"
            )
    lines += [
        "",
        "## Other flags",
        "",
        "Flags of the process commands that set none of the settings above.",
    ]
    for path in _PROCESS_COMMANDS:
        rows = [
            f"| `{_option(action)}` | {_cell(_flag_default(action))} | {_cell(action.help or '')} |"
            for action in _options(commands[path])
            if (path, action.dest) not in bound
        ]
        if rows:
            lines += ["", f"### sluicegate {path}", "", "| flag | default | description |"]
            lines += ["|---|---|---|", *rows]
    return "\n".join(lines) + "\n"


def environment_variables() -> set[str]:
    """Every ``SLUICEGATE_*`` variable a settings model reads."""
    return {name for section in SECTIONS for name in _env_names(section.env).values()}


def flag_bindings() -> Iterator[tuple[str, str, type[Any], str]]:
    """(command, flag, model, field) of every flag that sets a field of `SECTIONS`' models."""
    from sluicegate.cli.main import _parser

    commands = dict(_commands(_parser()))
    for section in SECTIONS:
        scope = _scope(commands, section)
        for setting in _settings(section.model):
            dest = section.flag_dests.get(setting.name, setting.name)
            for path, option in _flags(scope, dest):
                yield path, option, section.model, setting.name


def _scope(
    commands: Mapping[str, argparse.ArgumentParser], section: Section
) -> dict[str, argparse.ArgumentParser]:
    """The commands whose flags may set ``section``'s fields."""

    def within(path: str, prefixes: tuple[str, ...]) -> bool:
        return any(path == p or path.startswith(f"{p} ") or not p for p in prefixes)

    return {
        path: parser
        for path, parser in commands.items()
        if within(path, section.commands) and not within(path, section.exclude)
    }


def _env_names(env: type[BaseSettings] | None) -> dict[str, str]:
    if env is None:
        return {}
    prefix = str(env.model_config.get("env_prefix", ""))
    return {name: f"{prefix}{name}".upper() for name in env.model_fields}


def _settings(model: type[Any]) -> Iterator[_Setting]:
    docs = _attribute_docs(model)
    if dataclasses.is_dataclass(model):
        hints = typing.get_type_hints(model)
        for f in dataclasses.fields(model):
            given = f.default is not dataclasses.MISSING
            default = _default_text(f.default) if given else "required"
            yield _Setting(f.name, hints[f.name], default, docs.get(f.name, ""), None)
        return
    assert issubclass(model, BaseModel)
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if info.default_factory is not None:
            default = str(extra.get("default", "computed"))
        elif info.is_required():
            default = "required"
        else:
            default = _default_text(info.default)
        read_by = extra.get("read_by")
        yield _Setting(
            name,
            info.annotation,
            default,
            docs.get(name, ""),
            str(read_by) if read_by is not None else None,
        )


def _attribute_docs(model: type[Any]) -> dict[str, str]:
    """The docstrings under a class's annotated attributes (what pydantic's
    ``use_attribute_docstrings`` reads), for dataclasses too."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(model)))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = typing.get_args(annotation)
        text = " or ".join(_type_text(a) for a in args if a is not type(None))
        return f"{text} (optional)" if type(None) in args else text
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " / ".join(str(member.value) for member in annotation)
    return getattr(annotation, "__name__", str(annotation))


def _default_text(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Path | str):
        return str(value) or '""'
    return repr(value)


def _commands(
    parser: argparse.ArgumentParser, path: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command's parser by its path (``"savepoint create"``)."""
    if path:
        yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{path} {name}".strip())


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)
    ]


def _flags(commands: Mapping[str, argparse.ArgumentParser], dest: str) -> list[tuple[str, str]]:
    return [
        (path, _option(action))
        for path, parser in commands.items()
        for action in _options(parser)
        if action.dest == dest
    ]


def _option(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


def _flag_default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if isinstance(action, argparse._StoreTrueAction):
        return "off"
    if isinstance(action, argparse._AppendAction):
        return "none"
    return _default_text(action.default)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    sys.stdout.write(reference())

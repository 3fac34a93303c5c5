"""The kind of an MCP tool: its annotations, overridden by the agent's declaration; an
unannotated tool refused by name; header secrets never shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from sluicegate.agents.mcp import Hints, McpToolDescription, McpToolKindError, Secret, kind_of
from sluicegate.agents.mcp.secrets import HeaderValue, masked, resolved
from sluicegate.agents.tools import AnyArguments, Tool, ToolArgumentsError, ToolKind
from sluicegate.operators.exceptions import ConfigError

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "title": "args"}


def described(hints: Hints | None, name: str = "act") -> McpToolDescription:
    return McpToolDescription(name=name, description="acts", input_schema=SCHEMA, hints=hints)


@pytest.mark.parametrize(
    ("hints", "kind"),
    [
        (Hints(read_only=True), ToolKind.READ_ONLY),
        (Hints(read_only=True, destructive=True), ToolKind.READ_ONLY),
        (Hints(destructive=True), ToolKind.IRREVERSIBLE),
        (Hints(idempotent=True, destructive=True), ToolKind.IRREVERSIBLE),
        (Hints(idempotent=True, destructive=False), ToolKind.IDEMPOTENT_WRITE),
        # destructiveHint defaults to true in MCP: an idempotent tool must say it is not
        (Hints(idempotent=True), ToolKind.IRREVERSIBLE),
        # an additive write: not safe to retry, nothing undoes it
        (Hints(read_only=False, destructive=False), ToolKind.IRREVERSIBLE),
        (Hints(read_only=False), ToolKind.IRREVERSIBLE),
    ],
)
def test_annotations_map_to_kinds(hints: Hints, kind: ToolKind) -> None:
    assert kind_of("crm", described(hints), None) is kind


@pytest.mark.parametrize("hints", [None, Hints()])
def test_an_unannotated_tool_needs_a_declared_kind_and_the_error_names_it(
    hints: Hints | None,
) -> None:
    with pytest.raises(McpToolKindError) as raised:
        kind_of("crm", described(hints, name="sync_contacts"), None)
    assert raised.value.tool == "sync_contacts"
    assert raised.value.server == "crm"
    assert "sync_contacts" in str(raised.value)
    assert "kinds=" in str(raised.value)
    assert kind_of("crm", described(hints), ToolKind.IDEMPOTENT_WRITE) is ToolKind.IDEMPOTENT_WRITE


hint = st.none() | st.booleans()


@given(
    hints=st.none() | st.builds(Hints, read_only=hint, destructive=hint, idempotent=hint),
    declared=st.sampled_from(
        [ToolKind.READ_ONLY, ToolKind.IDEMPOTENT_WRITE, ToolKind.IRREVERSIBLE]
    ),
)
def test_the_declaration_wins_over_any_annotation(hints: Hints | None, declared: ToolKind) -> None:
    assert kind_of("crm", described(hints), declared) is declared


@given(hints=st.builds(Hints, read_only=hint, destructive=hint, idempotent=hint))
def test_no_annotation_but_read_only_skips_the_journal_and_only_idempotent_skips_approval(
    hints: Hints,
) -> None:
    """A server's hints never make a write unjournaled unless it claims readOnly, and never
    spare a write approval unless it claims both idempotent and not destructive."""
    if hints.empty:
        return
    kind = kind_of("crm", described(hints), None)
    assert (kind is ToolKind.READ_ONLY) == bool(hints.read_only)
    if kind is ToolKind.IDEMPOTENT_WRITE:
        assert hints.idempotent
        assert hints.destructive is False
    assert kind is not ToolKind.REVERSIBLE


def test_reversible_cannot_be_declared() -> None:
    with pytest.raises(McpToolKindError, match="reversible"):
        kind_of("crm", described(Hints(read_only=True)), ToolKind.REVERSIBLE)


def test_a_tool_with_a_json_schema_offers_it_and_takes_any_object() -> None:
    async def call(ctx: object, **arguments: object) -> object:
        return arguments

    listed = Tool(
        name="act", description="acts", function=call, arguments=AnyArguments,
        kind=ToolKind.READ_ONLY, on_unknown=ToolKind.READ_ONLY.default_on_unknown,
        parameters=SCHEMA,
    )  # fmt: skip
    offered = {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert listed.schema().parameters == offered
    assert SCHEMA["title"] == "args"  # the listed schema is not changed
    assert listed.parse('{"x": 1, "y": [2]}') == {"x": 1, "y": [2]}
    with pytest.raises(ToolArgumentsError):
        listed.parse("[1]")


def test_secrets_are_read_when_resolved_and_masked_when_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-file\n")
    monkeypatch.setenv("CRM_TOKEN", "s3cr3t-env")
    headers: dict[str, HeaderValue] = {
        "Authorization": Secret.env("CRM_TOKEN", prefix="Bearer "),
        "X-Api-Key": Secret.file(token),
        "X-Literal": "literal-value",
    }
    assert resolved(headers) == {
        "Authorization": "Bearer s3cr3t-env",
        "X-Api-Key": "s3cr3t-file",
        "X-Literal": "literal-value",
    }
    shown = repr(masked(headers)) + repr(headers)
    assert "s3cr3t" not in shown
    assert "literal-value" not in repr(masked(headers))
    monkeypatch.delenv("CRM_TOKEN")
    with pytest.raises(ConfigError, match="CRM_TOKEN"):
        resolved(headers)

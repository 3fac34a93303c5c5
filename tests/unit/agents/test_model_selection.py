"""`model_from_env`: the provider from SLUICEGATE_MODEL_PROVIDER or the keys present, the model
name and server from the environment, and a clear refusal of an unknown provider."""

from __future__ import annotations

import pytest

from sluicegate.agents.models import ScriptedModel
from sluicegate.agents.models.anthropic_client import AnthropicModel
from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.models.openai_client import OpenAIModel
from sluicegate.agents.models.selection import model_from_env
from sluicegate.operators.exceptions import ConfigError

VARIABLES = (
    "SLUICEGATE_MODEL_PROVIDER", "SLUICEGATE_MODEL", "SLUICEGATE_MODEL_URL",
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
)  # fmt: skip


def scripted() -> ScriptedModel:
    return ScriptedModel(lambda messages: ChatMessage(role="assistant", content="done"))


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_no_key_and_no_provider_is_the_scripted_stand_in() -> None:
    assert isinstance(model_from_env(scripted), ScriptedModel)


@pytest.mark.parametrize(
    ("env", "kind", "name"),
    [
        ({"OPENAI_API_KEY": "sk-1"}, OpenAIModel, "gpt-4o-mini"),
        ({"SLUICEGATE_MODEL_URL": "http://127.0.0.1:1/v1"}, OpenAIModel, "gpt-4o-mini"),
        ({"ANTHROPIC_API_KEY": "sk-ant"}, AnthropicModel, "claude-sonnet-4-5"),
        ({"OPENAI_API_KEY": "sk-1", "ANTHROPIC_API_KEY": "sk-ant"}, OpenAIModel, "gpt-4o-mini"),
        (
            {"OPENAI_API_KEY": "sk-1", "SLUICEGATE_MODEL_PROVIDER": "anthropic",
             "SLUICEGATE_MODEL": "claude-haiku-4-5"},
            AnthropicModel,
            "claude-haiku-4-5",
        ),
    ],
)  # fmt: skip
def test_the_provider_follows_the_setting_then_the_keys(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], kind: type, name: str
) -> None:
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    model = model_from_env(scripted)
    assert isinstance(model, kind)
    assert isinstance(model, OpenAIModel | AnthropicModel)
    assert model.model == name


def test_scripted_wins_over_keys_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    monkeypatch.setenv("SLUICEGATE_MODEL_PROVIDER", "scripted")
    assert isinstance(model_from_env(scripted), ScriptedModel)


def test_an_unknown_provider_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLUICEGATE_MODEL_PROVIDER", "gemini")
    with pytest.raises(ConfigError) as caught:
        model_from_env(scripted)
    assert caught.value.setting == "SLUICEGATE_MODEL_PROVIDER"
    assert "'gemini'" in str(caught.value)
    assert "anthropic" in str(caught.value)

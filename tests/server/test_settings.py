"""Settings of the models (summarizer, extractor, embedder, their endpoints, keys and
timeouts): checked before anything starts, keys never in the repr, and the models built
by ``create_app`` without calling them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from convomem.errors import ConfigError
from convomem.recall.openai_embeddings import OpenAIEmbedder
from convomem.server import create_app
from convomem.server.settings import Settings, build_models
from convomem.summaries.llm import LLMSummarizer
from convomem.summaries.llm_extractor import LLMExtractor

DEAD = "http://127.0.0.1:9/v1"  # nothing listens on the discard port


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "CONVOMEM_LLM_API_KEY",
        "CONVOMEM_EMBEDDING_API_KEY",
        "CONVOMEM_LLM_BASE_URL",
        "CONVOMEM_EMBEDDING_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("summarizer", "gpt-4o-mini"),
        ("summarizer", "offline"),  # the extractor's name, not the summarizer's
        ("extractor", "extractive"),
        ("extractor", "openai:"),
        ("embedder", "openai"),
        ("embedder", "bert"),
        ("llm_base_url", "localhost:11434"),
        ("embedding_base_url", ""),
        ("llm_timeout", 0),
        ("embedding_timeout", -1.0),
    ],
)
def test_a_bad_model_setting_names_the_field_and_the_value(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=rf"^{field}={value!r}"):
        Settings(**{field: value})


def test_keys_never_show_in_the_settings_repr() -> None:
    settings = Settings(
        llm_api_key="sk-llm-secret", embedding_api_key="sk-emb-secret", upstream_api_key="sk-up"
    )
    text = repr(settings)
    assert "secret" not in text and "sk-up" not in text and "llm_base_url=None" in text


def test_the_defaults_are_the_offline_models() -> None:
    models = build_models(Settings())
    assert models.summarizer is None and models.extractor is None
    assert type(models.embedder).__name__ == "HashingEmbedder"
    assert build_models(Settings(use_recall=False)).embedder is None


def test_openai_models_are_built_without_being_called() -> None:
    models = build_models(
        Settings(
            summarizer="openai:chat",
            extractor="openai:chat",
            embedder="openai:emb",
            llm_base_url=DEAD,
            embedding_base_url=DEAD,
            llm_timeout=2.5,
            embedding_timeout=1.5,
        )
    )
    assert isinstance(models.summarizer, LLMSummarizer) and models.summarizer.timeout == 2.5
    assert isinstance(models.extractor, LLMExtractor) and models.extractor.base_url == DEAD
    assert isinstance(models.embedder, OpenAIEmbedder) and models.embedder.timeout == 1.5
    assert models.embedder.base_url == DEAD and models.embedder.requests == 0


def test_an_explicit_key_is_used_and_the_environment_is_the_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONVOMEM_LLM_BASE_URL", DEAD)
    models = build_models(Settings(summarizer="openai:chat", llm_api_key="sk-given"))
    assert isinstance(models.summarizer, LLMSummarizer)
    assert models.summarizer.base_url == DEAD


def test_create_app_refuses_a_model_it_cannot_use(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(ConfigError, match=r"^summarizer='openai:chat': needs an API key"):
        create_app(Settings(store=store, summarizer="openai:chat"))
    with pytest.raises(ConfigError, match=r"^embedder=openai:emb: needs an API key"):
        create_app(Settings(store=store, embedder="openai:emb"))
    create_app(Settings(store=store, summarizer="openai:chat", llm_base_url=DEAD))

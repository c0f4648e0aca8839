"""Model names to tokenizers, offline; and the compat package's public names."""

from __future__ import annotations

import logging
import sys

import pytest

import convomem.compat as compat
from convomem.compat import _models, model_tokenizer
from convomem.errors import ConfigError, TokenizerError
from convomem.tokens import Tokenizer, get_tokenizer


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("gpt-4", "tiktoken:cl100k_base"),  # its own encoding, installed offline
        ("gpt-3.5-turbo", "tiktoken:cl100k_base"),
        ("cl100k_base", "tiktoken:cl100k_base"),  # an encoding name works too
        ("approx", "approx"),  # tokenizer specs pass through
        ("words", "words"),
        ("tiktoken:gpt-4", "tiktoken:gpt-4"),
    ],
)
def test_model_names_map_to_offline_tokenizers(model: str, name: str) -> None:
    assert model_tokenizer(model).name == name


def o200k_installed() -> bool:
    try:
        get_tokenizer("tiktoken:o200k_base")
    except TokenizerError:
        return False
    return True


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "gpt-4.1"])
def test_o200k_models_use_their_own_encoding_when_installed(model: str) -> None:
    own = "tiktoken:o200k_base"
    assert model_tokenizer(model).name == (own if o200k_installed() else "tiktoken:cl100k_base")


def no_o200k(spec: object) -> Tokenizer:
    if spec == "tiktoken:o200k_base":
        raise TokenizerError("o200k_base is not installed")
    return get_tokenizer(spec)  # type: ignore[arg-type]


def test_cl100k_stands_in_and_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _models._resolve.cache_clear()
    monkeypatch.setattr(_models, "get_tokenizer", no_o200k)
    with caplog.at_level(logging.WARNING, logger="convomem.compat"):
        assert model_tokenizer("gpt-4o").name == "tiktoken:cl100k_base"
        assert model_tokenizer("gpt-4o").name == "tiktoken:cl100k_base"
    warnings = [r for r in caplog.records if "o200k_base" in r.getMessage()]
    assert len(warnings) == 1
    assert "cl100k_base" in warnings[0].getMessage()
    _models._resolve.cache_clear()


def test_tokenizers_and_functions_pass_through() -> None:
    tok = get_tokenizer("approx")
    assert model_tokenizer(tok) is tok
    fn = model_tokenizer(len)
    assert isinstance(fn, Tokenizer) and fn.count("abc") == 3


def test_without_tiktoken_counting_is_approx(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _models._resolve.cache_clear()
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken raises ImportError
    monkeypatch.setitem(sys.modules, "tiktoken.model", None)
    with caplog.at_level(logging.WARNING, logger="convomem.compat"):
        assert model_tokenizer("gpt-4o").name == "approx"
    assert "not installed" in caplog.text
    _models._resolve.cache_clear()


def test_without_an_offline_stand_in_counting_is_approx(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(spec: object) -> Tokenizer:
        if isinstance(spec, str) and spec.startswith("tiktoken:"):
            raise TokenizerError("not installed")
        return get_tokenizer(spec)  # type: ignore[arg-type]

    _models._resolve.cache_clear()
    monkeypatch.setattr(_models, "get_tokenizer", missing)
    assert model_tokenizer("gpt-4").name == "approx"
    _models._resolve.cache_clear()


@pytest.mark.parametrize(
    ("value", "match"),
    [("", "model=''"), ("gtp-4o", "model='gtp-4o'"), (3.5, "model=3.5"), (None, "model=None")],
)
def test_bad_names_are_config_errors(value: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        model_tokenizer(value)  # type: ignore[arg-type]


def test_an_explicit_spec_that_cannot_load_says_so() -> None:
    with pytest.raises(TokenizerError):
        model_tokenizer("hf:/nonexistent/tokenizer.json")


def test_every_public_name_is_exported() -> None:
    expected = {
        "AdaptiveSlidingWindow",
        "ContextDriftDetector",
        "ConversationMemoryManager",
        "ConversationTurn",
        "HierarchicalMemory",
        "HybridWindow",
        "MemoryTier",
        "ProgressiveSummarizer",
        "SlidingWindowMemory",
        "SummaryValidator",
        "TimeBasedWindow",
        "TokenBudgetManager",
        "TokenWindowMemory",
        "model_tokenizer",
    }
    assert set(compat.__all__) == expected
    for name in expected:
        assert getattr(compat, name).__module__.startswith("convomem.compat")

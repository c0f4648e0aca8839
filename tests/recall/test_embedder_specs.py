"""The ``openai:MODEL`` embedder spec (``embedder_named``): endpoint and key from arguments
or the environment, a recall index built from a spec, and the configured embedder against
a local fake OpenAI-compatible server through every fault it makes (timeouts, 429 with
Retry-After, 500, malformed bodies, answers without data), its breaker included."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from _fake_openai import HASH, FakeOpenAI, start
from convomem.errors import ConfigError, EmbeddingError, TransientError
from convomem.model import Message
from convomem.recall import AsyncRecallIndex, GuardedRecall, RecallIndex
from convomem.recall.embedders import (
    EMBEDDING_API_KEY_ENV,
    EMBEDDING_BASE_URL_ENV,
    embedder_named,
)
from convomem.recall.openai_embeddings import OpenAIEmbedder
from convomem.stores import aopen_store

TIMEOUT = 0.2
FAULTS: dict[str, type[Exception]] = {
    "timeout": TransientError,
    "429": TransientError,
    "500": TransientError,
    "malformed": EmbeddingError,
    "garbage": EmbeddingError,
}
TEXTS = ["my dentist is Dr. Okafor", "the parcel went to Lisbon"]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    yield from start(FakeOpenAI())


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (EMBEDDING_BASE_URL_ENV, EMBEDDING_API_KEY_ENV, "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_the_spec_names_an_openai_compatible_embedder(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EMBEDDING_BASE_URL_ENV, fake.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    embedder = embedder_named("openai:text-embedding-3-small")
    assert isinstance(embedder, OpenAIEmbedder) and embedder.model == "text-embedding-3-small"
    assert embedder.embed_batch(TEXTS) == [HASH.embed(t) for t in TEXTS]
    assert fake.authorizations[-1] == "Bearer sk-openai"
    monkeypatch.setenv(EMBEDDING_API_KEY_ENV, "sk-convomem")  # convomem's own name wins
    embedder_named("openai:m").embed("x")
    assert fake.authorizations[-1] == "Bearer sk-convomem"
    embedder_named("openai:m", api_key="sk-given").embed("x")  # an argument wins
    assert fake.authorizations[-1] == "Bearer sk-given"
    monkeypatch.setenv(EMBEDDING_BASE_URL_ENV, "http://127.0.0.1:9/v1")  # nothing listens
    assert embedder_named("openai:m", base_url=fake.url).embed("x") == HASH.embed("x")


@pytest.mark.parametrize("spec", ["openai:", "openai: m", "cohere:embed", "bert", "", None])
def test_a_bad_spec_names_the_option_and_the_value(spec: object) -> None:
    with pytest.raises(ConfigError) as error:
        embedder_named(spec)  # type: ignore[arg-type]
    assert str(error.value).startswith(f"embedder={spec!r}: must be one of 'hashing'")
    with pytest.raises(ConfigError, match=r"^--embedder="):
        embedder_named(spec, option="--embedder")  # type: ignore[arg-type]


def test_without_a_key_or_a_local_server_it_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError) as error:
        embedder_named("openai:m")
    text = str(error.value)
    assert text.startswith("embedder=openai:m: needs an API key")
    assert EMBEDDING_API_KEY_ENV in text and EMBEDDING_BASE_URL_ENV in text
    monkeypatch.setenv(EMBEDDING_BASE_URL_ENV, "localhost:8000")
    with pytest.raises(ConfigError, match=f"^{EMBEDDING_BASE_URL_ENV}='localhost:8000'"):
        embedder_named("openai:m")


def test_a_recall_index_takes_the_spec(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(EMBEDDING_BASE_URL_ENV, fake.url)
    with RecallIndex(f"sqlite:///{tmp_path / 'r.db'}", embedder="openai:emb") as index:
        assert "OpenAIEmbedder(model='emb'" in repr(index)
        index.add([Message(role="user", content=t) for t in TEXTS], user_id="u", session_id="s")
        hits = index.search("who is my dentist?", user_id="u", k=1)
        assert [h.text for h in hits] == [TEXTS[0]] and hits[0].similarity is not None
    assert fake.count("embeddings") >= 2
    with pytest.raises(ConfigError, match=r"^embedder='bert'"):
        RecallIndex(f"sqlite:///{tmp_path / 'r.db'}", embedder="bert")


async def test_an_async_recall_index_takes_the_spec(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(EMBEDDING_BASE_URL_ENV, fake.url)
    db = await aopen_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        index = AsyncRecallIndex(db, embedder="openai:emb")
        await index.add([Message(role="user", content=TEXTS[1])], user_id="u", session_id="s")
        hits = await index.search("where did the parcel go", user_id="u", k=1)
        assert [h.text for h in hits] == [TEXTS[1]]
    finally:
        await db.aclose()


@pytest.mark.parametrize("mode", FAULTS)
def test_each_fault_is_typed_and_retried_only_when_transient(fake: FakeOpenAI, mode: str) -> None:
    embedder = embedder_named("openai:m", base_url=fake.url, timeout=TIMEOUT)
    fake.retry_after = "0"
    fake.fail("embeddings", mode)
    with pytest.raises(FAULTS[mode]) as error:
        embedder.embed_batch(TEXTS)
    assert fake.count("embeddings") == (3 if mode in ("429", "500") else 1)  # not a timeout
    if mode == "429":
        assert error.value.retry_after == 0.0  # type: ignore[attr-defined]


def test_a_retry_after_is_honoured_and_a_long_one_is_not_waited_for(fake: FakeOpenAI) -> None:
    embedder = embedder_named("openai:m", base_url=fake.url, timeout=TIMEOUT)
    fake.retry_after = "0.01"
    fake.fail("embeddings", "429", times=2)
    assert embedder.embed("x") == HASH.embed("x") and fake.count("embeddings") == 3
    fake.retry_after = "60"
    fake.fail("embeddings", "429")
    with pytest.raises(TransientError) as error:
        embedder.embed("y")
    assert error.value.retry_after == 60.0 and fake.count("embeddings") == 4


def test_the_breaker_stops_calling_an_endpoint_that_keeps_failing(fake: FakeOpenAI) -> None:
    embedder = embedder_named("openai:m", base_url=fake.url, timeout=TIMEOUT)
    fake.retry_after = "0"
    fake.fail("embeddings", "500")
    sent = []
    for _ in range(3):
        with pytest.raises(TransientError):
            embedder.embed("x")
        sent.append(fake.count("embeddings"))
    assert sent == [3, 5, 5] and embedder.breaker.state == "open"


def test_a_guarded_search_answers_failed_while_the_embedder_fails(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    embedder = embedder_named("openai:m", base_url=fake.url, timeout=TIMEOUT)
    with RecallIndex(f"sqlite:///{tmp_path / 'g.db'}", embedder=embedder) as index:
        index.add([Message(role="user", content=TEXTS[0])], user_id="u", session_id="s")
        guarded = GuardedRecall(index, deadline=5.0)
        fake.fail("embeddings", "malformed")
        outcome = guarded.search("dentist", user_id="u", k=3)
        assert outcome.status == "failed" and outcome.hits == []
        assert "not an embeddings response" in (outcome.error or "")
        fake.heal()
        assert [h.text for h in guarded.search("dentist", user_id="u", k=3).hits] == [TEXTS[0]]


def test_the_key_is_sent_and_never_shown(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-SECRET-embeddings-0815"
    caplog.set_level(logging.DEBUG)
    shown = []
    for mode in FAULTS:  # a new embedder each time: its breaker never opens here
        embedder = embedder_named("openai:m", base_url=fake.url, api_key=secret, timeout=TIMEOUT)
        shown += [repr(embedder), embedder.name]
        fake.fail("embeddings", mode)
        with pytest.raises((TransientError, EmbeddingError)) as error:
            embedder.embed_batch(TEXTS)
        shown += [str(error.value), repr(error.value)]
        fake.heal()
    shown.append(caplog.text)
    assert f"Bearer {secret}" in fake.authorizations
    assert all(secret not in text for text in shown)

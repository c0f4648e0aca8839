"""A ConversationMemory whose summarizer, fact extractor and recall embedder are models
behind a local fake OpenAI-compatible server (``_fake_openai``), configured by spec
(``"openai:MODEL"``, endpoints from the environment), end to end over a durable SQLite
session: with the models answering, and with every model failing in each way the fake
can (timeouts, 429, 500, malformed bodies, answers without content), where every message
is still stored, the summary is the extractive fallback marked degraded, the facts are
the offline extractor's, and the context is still assembled (recall says it failed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _fake_openai import FakeOpenAI, start
from convomem.errors import EmbeddingError, TransientError
from convomem.recall import AsyncGuardedRecall, AsyncRecallIndex, GuardedRecall, RecallIndex
from convomem.recall.embedders import EMBEDDING_BASE_URL_ENV, embedder_named
from convomem.session import ConversationMemory
from convomem.stores import aopen_store, open_store
from convomem.summaries.specs import LLM_BASE_URL_ENV, extractor_from, summarizer_from

TIMEOUT = 0.2  # the clients'; the fake's "timeout" answers wait 2 s
MODES = ("timeout", "429", "500", "malformed", "garbage")
TURNS = [
    ("user", "Hi, I'm Ana. My name is Ana and my email is ana@example.org. codeword: falcon"),
    ("assistant", "Hello Ana, I noted your email address for the parcel question."),
    ("user", "The parcel 4471 went to Lisbon instead of Porto, can you check the courier?"),
    ("assistant", "I checked with the courier: the parcel 4471 is held at the Lisbon depot."),
    ("user", "Please send it on to Porto then, the street is Rua das Flores 12."),
    ("assistant", "Done: the depot forwards parcel 4471 to Rua das Flores 12 in Porto."),
    ("user", "Thanks. Also my dentist appointment moved, remind me about it later."),
    ("assistant", "Noted, I will remind you about the dentist appointment later."),
]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    for name in ("OPENAI_API_KEY", "CONVOMEM_LLM_API_KEY", "CONVOMEM_EMBEDDING_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for served in start(FakeOpenAI()):
        monkeypatch.setenv(LLM_BASE_URL_ENV, served.url)
        monkeypatch.setenv(EMBEDDING_BASE_URL_ENV, served.url)
        yield served


def fast_models() -> dict[str, Any]:
    """The models the specs name, with a short client timeout."""
    return {
        "summarizer": summarizer_from("openai:chat", timeout=TIMEOUT),
        "extractor": extractor_from("openai:chat", timeout=TIMEOUT),
    }


def facts_of(index: Any) -> dict[str, str]:
    return {f.attribute: f.value for f in index.facts("ana").current()}


def test_with_the_models_answering_everything_is_the_models(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    db = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    index = RecallIndex(db, embedder="openai:emb")
    memory = ConversationMemory(
        budget=300,
        store=db.session("s1", user_id="ana"),
        summarizer="openai:chat",
        extractor="openai:chat",
        recall=GuardedRecall(index, deadline=10.0),
    )
    for role, content in TURNS:
        memory.add(role, content)
    memory.flush()
    st = memory.stats()
    assert st.compactions >= 1 and not st.degraded
    assert memory.summary.current().text.count("MODEL SUMMARY") >= 1  # type: ignore[union-attr]
    assert st.facts is not None and not st.facts["degraded"]
    assert facts_of(index)["codeword"] == "falcon"  # only the model reads codewords
    memory.context(query="which depot held parcel 4471?")
    recall = memory.stats().recall
    assert recall is not None and recall["status"] == "ok" and recall["hits"]
    assert fake.count("chat") > 0 and fake.count("embeddings") > 0
    index.close()
    db.close()


@pytest.mark.parametrize("mode", MODES)
def test_with_every_model_failing_nothing_is_lost_and_each_falls_back(
    fake: FakeOpenAI, tmp_path: Path, mode: str
) -> None:
    db = open_store(f"sqlite:///{tmp_path / 'f.db'}")
    embedder = embedder_named("openai:emb", timeout=TIMEOUT)
    index = RecallIndex(db, embedder=embedder)
    fake.retry_after = "0"
    fake.fail("all", mode)
    memory = ConversationMemory(
        budget=300,
        store=db.session("s1", user_id="ana"),
        recall=GuardedRecall(index, deadline=10.0),
        **fast_models(),
    )
    added = [memory.add(role, content) for role, content in TURNS]
    assert [m.id for m in memory.messages()] == [m.id for m in added]  # every one stored
    st = memory.stats()
    assert st.compactions >= 1 and st.compaction_failures == 0
    current = memory.summary.current()
    assert current is not None and current.degraded and "MODEL SUMMARY" not in current.text
    assert st.facts is not None and st.facts["degraded"]
    context = memory.context(query="which depot held parcel 4471?")
    assert context and memory.stats().recall["status"] == "failed"  # type: ignore[index]
    with pytest.raises((TransientError, EmbeddingError)):
        memory.flush()  # the library reports the failed background indexing here
    memory.flush()  # reported once: the facts save that follows it runs now
    facts = facts_of(index)
    assert facts["name"] == "Ana" and "codeword" not in facts  # the offline extractor's
    index.close()
    db.close()


async def test_the_async_twin_falls_back_the_same_way(fake: FakeOpenAI, tmp_path: Path) -> None:
    db = await aopen_store(f"sqlite:///{tmp_path / 'a.db'}")
    index = AsyncRecallIndex(db, embedder=embedder_named("openai:emb", timeout=TIMEOUT))
    memory = ConversationMemory(
        budget=300,
        store=db.session("s1", user_id="ana"),
        recall=AsyncGuardedRecall(index, deadline=10.0),
        **fast_models(),
    )
    fake.retry_after = "0"
    fake.fail("all", "500")
    added = [await memory.aadd(role, content) for role, content in TURNS]
    assert [m.id for m in await memory.amessages()] == [m.id for m in added]
    assert memory.stats().degraded and memory.stats().facts["degraded"]  # type: ignore[index]
    await memory.acontext(query="parcel 4471")
    assert memory.stats().recall["status"] == "failed"  # type: ignore[index]
    await db.aclose()

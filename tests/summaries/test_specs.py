"""Model specs of the summarizer and the fact extractor: parsing, the endpoint and the key
from arguments or the environment, and the configured models against a local fake
OpenAI-compatible server (``_fake_openai``), through every fault it makes: timeouts,
429 with Retry-After, 500, malformed bodies and answers without content."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from _fake_openai import FakeOpenAI, start
from convomem.errors import ConfigError, ExtractionError, SummarizerError, TransientError
from convomem.model import Message
from convomem.retry import RetryPolicy
from convomem.summaries import RunningSummary
from convomem.summaries.extractor import OfflineExtractor
from convomem.summaries.llm import LLMSummarizer
from convomem.summaries.llm_extractor import LLMExtractor
from convomem.summaries.specs import (
    LLM_API_KEY_ENV,
    LLM_BASE_URL_ENV,
    extractor_from,
    summarizer_from,
)

# The client's timeout (the models' retries also stop once that many seconds have gone
# by): generous (a hang guard) where the fake answers at once, so a loaded machine changes
# no outcome; short under the "timeout" fault, where the fake holds its answer until
# teardown (the same models' healthy calls, answered at once by the local fake, fit it
# many times over).
STUCK = 0.5
TIMEOUT = 60.0


def timeout_for(mode: str) -> float:
    return STUCK if mode == "timeout" else TIMEOUT


MESSAGES = [
    Message(role="user", content="Hi, my name is Ana. codeword: falcon"),
    Message(role="assistant", content="Hello Ana, noted."),
]
# the error each fault gives the summarizer (the extractor's is ExtractionError)
FAULTS: dict[str, type[Exception]] = {
    "timeout": TransientError,
    "429": TransientError,
    "500": TransientError,
    "malformed": SummarizerError,
    "garbage": SummarizerError,
}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    yield from start(FakeOpenAI())


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (LLM_BASE_URL_ENV, LLM_API_KEY_ENV, "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def codewords(facts: list[Any]) -> list[str]:
    return [f.value for f in facts if f.attribute == "codeword"]


def test_offline_specs_name_the_defaults() -> None:
    assert summarizer_from("extractive") is None  # sized by the RunningSummary using it
    assert isinstance(extractor_from("offline"), OfflineExtractor)


@pytest.mark.parametrize(
    "spec", ["", "gpt-4o-mini", "openai:", "openai: m", "anthropic:claude", "Offline", None, 3]
)
def test_a_bad_spec_names_the_option_and_the_value(spec: Any) -> None:
    with pytest.raises(ConfigError) as error:
        summarizer_from(spec)
    assert str(error.value).startswith(f"summarizer={spec!r}: must be one of")
    assert "'openai:MODEL'" in str(error.value)
    with pytest.raises(ConfigError, match=r"^--extractor="):
        extractor_from(spec, option="--extractor")


def test_a_model_name_keeps_its_colons(fake: FakeOpenAI) -> None:
    llm = summarizer_from("openai:llama3:8b", base_url=fake.url)
    assert isinstance(llm, LLMSummarizer) and llm.model == "llama3:8b"
    llm(MESSAGES)
    assert fake.requests[-1][1]["model"] == "llama3:8b"


def test_endpoint_and_key_come_from_arguments_else_the_environment(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LLM_BASE_URL_ENV, fake.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    summarizer = summarizer_from("openai:m")
    assert summarizer is not None
    summarizer(MESSAGES)
    assert fake.authorizations[-1] == "Bearer sk-openai"
    monkeypatch.setenv(LLM_API_KEY_ENV, "sk-convomem")  # convomem's own name wins
    extractor_from("openai:m").extract(MESSAGES)
    assert fake.authorizations[-1] == "Bearer sk-convomem"
    extractor_from("openai:m", api_key="sk-given").extract(MESSAGES)  # an argument wins
    assert fake.authorizations[-1] == "Bearer sk-given"
    monkeypatch.setenv(LLM_BASE_URL_ENV, "http://127.0.0.1:9/v1")  # nothing listens
    given = extractor_from("openai:m", base_url=fake.url)
    assert codewords(given.extract(MESSAGES)) == ["falcon"] and not given.degraded
    monkeypatch.setenv(LLM_BASE_URL_ENV, "localhost:11434")
    with pytest.raises(ConfigError, match=f"^{LLM_BASE_URL_ENV}='localhost:11434'"):
        summarizer_from("openai:m")
    with pytest.raises(ConfigError, match=r"^base_url='ftp://x'"):
        summarizer_from("openai:m", base_url="ftp://x")


def test_without_a_key_or_a_local_server_it_says_what_to_set() -> None:
    with pytest.raises(ConfigError) as error:
        summarizer_from("openai:gpt-4o-mini")
    text = str(error.value)
    assert text.startswith("summarizer='openai:gpt-4o-mini': needs an API key")
    assert LLM_API_KEY_ENV in text and "OPENAI_API_KEY" in text and LLM_BASE_URL_ENV in text
    with pytest.raises(ConfigError, match=r"^extractor='openai:m': needs an API key"):
        extractor_from("openai:m")


def test_the_key_is_sent_and_never_shown(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-SECRET-never-shown-4711"
    caplog.set_level(logging.DEBUG)
    shown = []
    for mode in FAULTS:  # new models each time: their breakers never open here
        options: dict[str, Any] = {"base_url": fake.url, "api_key": secret}
        options["timeout"] = timeout_for(mode)
        summarizer = summarizer_from("openai:m", **options)
        extractor = extractor_from("openai:m", **options)
        shown += [repr(summarizer), repr(extractor)]
        fake.fail("chat", mode)
        with pytest.raises(FAULTS[mode]) as error:
            assert summarizer is not None
            summarizer(MESSAGES)
        shown += [str(error.value), repr(error.value), str(error.value.__cause__)]
        extractor.extract(MESSAGES)
        assert isinstance(extractor, LLMExtractor) and extractor.degraded
        shown.append(str(extractor.last_error))
    shown.append(caplog.text)
    assert f"Bearer {secret}" in fake.authorizations
    assert all(secret not in text for text in shown)


@pytest.mark.parametrize("mode", FAULTS)
def test_the_summarizer_answers_then_fails_typed(fake: FakeOpenAI, mode: str) -> None:
    llm = summarizer_from("openai:m", base_url=fake.url, timeout=timeout_for(mode))
    assert llm is not None
    assert llm(MESSAGES).startswith("MODEL SUMMARY: [")
    fake.retry_after = "7"
    fake.fail("chat", mode)
    with pytest.raises(FAULTS[mode]) as error:
        llm(MESSAGES)
    assert getattr(error.value, "retry_after", None) == (7.0 if mode == "429" else None)


@pytest.mark.parametrize("mode", FAULTS)
def test_a_failing_model_gives_the_extractive_summary_marked_degraded(
    fake: FakeOpenAI, mode: str
) -> None:
    rs = RunningSummary(summarizer_from("openai:m", base_url=fake.url, timeout=timeout_for(mode)))
    fake.retry_after = "0"
    fake.fail("chat", mode)
    rs.fold(MESSAGES)
    current = rs.current()
    assert current is not None and current.degraded
    assert "MODEL SUMMARY" not in current.text and "Ana" in current.text
    # the model's own policy: quick transient faults are retried (3 calls), a timed-out
    # call and the rest are not
    assert fake.count("chat") == (3 if mode in ("429", "500") else 1)
    assert rs.stats.fallbacks == 1


def test_a_retry_policy_given_to_the_running_summary_wins(fake: FakeOpenAI) -> None:
    fake.fail("chat", "500")
    for options in ({"retry": RetryPolicy.no_retry()}, {"retries": 0}):
        llm = summarizer_from("openai:m", base_url=fake.url, timeout=TIMEOUT)
        before = fake.count("chat")
        RunningSummary(llm, **options).fold(MESSAGES)
        assert fake.count("chat") - before == 1


def test_a_retry_after_is_honoured_and_a_short_outage_costs_nothing(fake: FakeOpenAI) -> None:
    rs = RunningSummary(summarizer_from("openai:m", base_url=fake.url, timeout=TIMEOUT))
    fake.retry_after = "0.01"
    fake.fail("chat", "429", times=2)
    rs.fold(MESSAGES)
    current = rs.current()
    assert current is not None and not current.degraded
    assert current.text.count("MODEL SUMMARY") == 1 and fake.count("chat") == 3


def test_a_long_retry_after_is_not_waited_for(fake: FakeOpenAI) -> None:
    rs = RunningSummary(summarizer_from("openai:m", base_url=fake.url, timeout=TIMEOUT))
    fake.retry_after = "120"
    fake.fail("chat", "429")
    rs.fold(MESSAGES)
    assert rs.current() is not None and rs.current().degraded  # type: ignore[union-attr]
    assert fake.count("chat") == 1


def test_the_breaker_stops_calling_a_model_that_keeps_failing(fake: FakeOpenAI) -> None:
    llm = summarizer_from("openai:m", base_url=fake.url, timeout=TIMEOUT)
    assert isinstance(llm, LLMSummarizer) and llm.breaker is not None
    rs = RunningSummary(llm)
    fake.retry_after = "0"
    fake.fail("chat", "500")
    sent = []
    for i in range(3):
        rs.fold([Message(role="user", content=f"turn {i} about the order 118{i}")])
        sent.append(fake.count("chat"))
    assert sent == [3, 5, 5]  # 5 failures in a row open it: no call while it is open
    assert llm.breaker.state == "open"
    assert all(s.degraded for s in rs.segments)


@pytest.mark.parametrize("mode", FAULTS)
def test_the_extractor_falls_back_offline_and_recovers(fake: FakeOpenAI, mode: str) -> None:
    extractor = extractor_from("openai:m", base_url=fake.url, timeout=timeout_for(mode))
    assert isinstance(extractor, LLMExtractor)
    assert codewords(extractor.extract(MESSAGES)) == ["falcon"] and not extractor.degraded
    fake.retry_after = "0"
    fake.fail("chat", mode)
    facts = extractor.extract(MESSAGES)
    assert codewords(facts) == []  # the model's rule is not the offline extractor's
    assert ("name", "Ana") in [(f.attribute, f.value) for f in facts]
    expected = TransientError if FAULTS[mode] is TransientError else ExtractionError
    assert extractor.degraded and isinstance(extractor.last_error, expected)
    fake.heal()
    assert codewords(extractor.extract(MESSAGES)) == ["falcon"] and not extractor.degraded


async def test_the_async_extractor_falls_back_and_recovers_too(fake: FakeOpenAI) -> None:
    extractor = extractor_from("openai:m", base_url=fake.url, timeout=TIMEOUT)
    fake.fail("chat", "malformed")
    facts = await extractor.aextract(MESSAGES)  # type: ignore[attr-defined]
    assert codewords(facts) == [] and extractor.degraded  # type: ignore[attr-defined]
    fake.heal()
    assert codewords(await extractor.aextract(MESSAGES)) == ["falcon"]  # type: ignore[attr-defined]

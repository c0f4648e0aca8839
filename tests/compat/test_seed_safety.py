"""The article's ContextDriftDetector and SummaryValidator by their published names."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest

from convomem.compat import ContextDriftDetector, SummaryValidator
from convomem.errors import ConfigError
from convomem.recall import HashingEmbedder

AXES = {"python": 0, "code": 0, "bug": 0, "pasta": 1, "recipe": 1, "tomato": 1}


class FakeEmbeddings:
    """A LangChain-style Embeddings: one fixed axis per known topic word."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        v = [0.0, 0.0, 0.01]
        for word in text.lower().split():
            axis = AXES.get(word.strip(".,?!"))
            if axis is not None:
                v[axis] += 1.0
        return v


def test_drift_detector_uses_embed_query_and_answers_the_article_keys() -> None:
    emb = FakeEmbeddings()
    detector = ContextDriftDetector(emb, drift_threshold=0.3)
    assert detector.initial_topic_embedding is None
    first = detector.check_drift("a python bug in my code")
    assert first["drifted"] is False and first["similarity"] == pytest.approx(1.0)
    assert detector.initial_topic_embedding is not None
    assert math.isclose(sum(x * x for x in detector.initial_topic_embedding), 1.0)
    same = detector.check_drift("the python code again")
    assert same["drifted"] is False and same["suggestion"] is None
    off = detector.check_drift("a tomato pasta recipe")
    assert off["drifted"] is True and off["similarity"] < 0.3
    assert isinstance(off["suggestion"], str)
    assert emb.queries == ["a python bug in my code", "the python code again",
                           "a tomato pasta recipe"]  # fmt: skip


def test_drift_detector_set_initial_topic_and_offline_default() -> None:
    detector = ContextDriftDetector()
    detector.set_initial_topic("python code")
    assert detector.initial_topic_embedding is not None
    assert detector.drift_threshold == 0.3
    assert ContextDriftDetector(HashingEmbedder()).check_drift("hello")["drifted"] is False


def test_drift_detector_rejects_what_cannot_embed() -> None:
    with pytest.raises(ConfigError, match="embeddings=3"):
        ContextDriftDetector(3)
    with pytest.raises(ConfigError, match="threshold"):
        ContextDriftDetector(None, drift_threshold=2.0)


SOURCE = [
    {"role": "user", "content": "My name is Ada and I am allergic to peanuts."},
    {"role": "assistant", "content": "Noted, Ada."},
]


def test_validator_offline_reports_dropped_facts_and_a_score() -> None:
    validator = SummaryValidator()
    kept = asyncio.run(validator.validate_summary(SOURCE, "Ada is allergic to peanuts."))
    dropped = asyncio.run(validator.validate_summary(SOURCE, "The user said hello."))
    assert kept["score"] == 100
    assert dropped["score"] < kept["score"]
    assert dropped["dropped"] and dropped["reasons"] and dropped["judge"] == "offline"


class FakeLLM:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.prompts: list[str] = []

    async def ainvoke(self, prompt: str) -> Any:
        self.prompts.append(prompt)

        class Reply:
            content = self.answer

        return Reply()


def test_validator_with_a_chat_model_sends_the_article_prompt_and_parses_json() -> None:
    verdict = {"preservation_rate": 90, "distorted": [], "missing": ["peanuts"]}
    llm = FakeLLM(json.dumps(verdict))
    result = asyncio.run(SummaryValidator(llm).validate_summary(SOURCE, "Ada."))
    assert result == verdict
    (prompt,) = llm.prompts
    assert "user: My name is Ada and I am allergic to peanuts." in prompt
    assert "Summary:\nAda." in prompt and "Respond in JSON format." in prompt


def test_validator_answers_an_error_dict_when_the_model_is_not_json() -> None:
    result = asyncio.run(SummaryValidator(FakeLLM("not json")).validate_summary(SOURCE, "x"))
    assert result == {"error": "Validation result parsing failed"}


def test_validator_rejects_a_model_without_invoke() -> None:
    with pytest.raises(ConfigError, match="invoke"):
        SummaryValidator(object())

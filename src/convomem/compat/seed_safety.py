"""The memory-patterns article's safety nets by their published names.

- ``ContextDriftDetector(embeddings, drift_threshold=0.3)``: ``set_initial_topic`` and
  ``check_drift(message) -> dict`` as in the article, measured by convomem's
  ``DriftDetector`` (the opening topic *and* a running centroid, so a conversation that
  moves on gradually is not flagged at every turn). ``embeddings`` is anything with an
  ``embed_query(text)`` method (a LangChain ``Embeddings``), a convomem embedder, or
  ``None`` for the offline ``HashingEmbedder``.
- ``SummaryValidator(llm)``: ``await validate_summary(original_messages, summary) ->
  dict``. With a chat model (``invoke`` / ``ainvoke``) it sends the article's prompt and
  returns the model's JSON (``{"error": ...}`` when the answer is not JSON, as the
  article does); with ``llm=None`` it validates offline (``convomem.summaries.
  validate_summary``: the facts dropped or contradicted and a 0-100 score), so the
  validator works with nothing configured.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..formats.openai import from_openai
from ..recall import DriftDetector
from ..recall.embedders import EmbedderLike
from ..summaries import validate_summary
from ._llm import ChatModel

__all__ = ["ContextDriftDetector", "SummaryValidator"]

VALIDATION_PROMPT = """Compare the original conversation with its summary and evaluate:
1. Key information preservation rate (0-100)
2. Presence of distorted information
3. Missing important information

Original conversation:
{original}

Summary:
{summary}

Respond in JSON format."""


def _embedder(embeddings: object) -> EmbedderLike | None:
    if embeddings is None:
        return None
    embed_query = getattr(embeddings, "embed_query", None)
    if callable(embed_query):
        return embed_query  # type: ignore[no-any-return]
    if callable(embeddings) or any(
        callable(getattr(embeddings, n, None))
        for n in ("embed", "embed_batch", "aembed", "aembed_batch")
    ):
        return embeddings  # type: ignore[return-value]
    raise ConfigError(
        f"embeddings={embeddings!r}: needs an embed_query method, or a convomem embedder"
    )


class ContextDriftDetector(DriftDetector):
    """The article's drift detector (see the module docstring)."""

    def __init__(self, embeddings: object = None, drift_threshold: float = 0.3) -> None:
        super().__init__(_embedder(embeddings), threshold=drift_threshold)
        self.embeddings = embeddings
        self.drift_threshold = self.threshold

    @property
    def initial_topic_embedding(self) -> list[float] | None:
        """The article's attribute: the unit embedding of the opening topic."""
        topic = self.topic
        return None if topic is None else list(topic)


class SummaryValidator:
    """The article's summary validator (see the module docstring)."""

    def __init__(self, llm: object = None) -> None:
        self.llm = llm
        self._model = None if llm is None else ChatModel(llm)

    async def validate_summary(
        self, original_messages: Sequence[Mapping[str, Any]], summary: str
    ) -> dict[str, Any]:
        """Verify ``summary`` against the Chat Completions dicts it summarizes."""
        messages = from_openai(original_messages)
        if self._model is None:
            return validate_summary(messages, summary).as_dict()
        original = "\n".join(f"{m.role}: {m.text()}" for m in messages)
        answer = await self._model.aask(
            VALIDATION_PROMPT.format(original=original, summary=summary)
        )
        try:
            result = json.loads(answer)
        except json.JSONDecodeError:
            return {"error": "Validation result parsing failed"}
        return result if isinstance(result, dict) else {"result": result}

    def __repr__(self) -> str:
        return f"SummaryValidator({self.llm!r})"

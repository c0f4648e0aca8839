"""Opaque blocks: provider content convomem keeps exactly but does not interpret."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import InvalidMessage
from .values import freeze, require_str

OPAQUE_FLAT: Final = frozenset(
    {
        ("openai", "input_audio"),
        ("openai", "file"),
        ("openai", "image_url"),  # an image part with keys of its own (cache_control)
        ("openai", "audio"),  # an assistant message's audio reference
        ("anthropic", "redacted_thinking"),
        ("anthropic", "image"),  # an image whose source convomem cannot read
        ("anthropic", "document"),  # unless its source is text (see OpaqueBlock)
        ("openai_responses", "input_file"),  # a PDF as base64, a file_id or a URL
        ("openai_responses", "input_audio"),
        ("openai_responses", "input_image"),  # an image by file_id (a URL is an ImageBlock)
        ("openai_responses", "image_generation_call"),  # its result is a base64 image
        ("openai_responses", "reasoning"),  # only encrypted_content (see OpaqueBlock)
    }
)
"""``(provider, type)`` of opaque blocks with no text: each costs a flat estimate."""

_DIALECTS: Final = {"langchain": ("openai", "anthropic")}
"""Providers whose blocks follow other providers' shapes (LangChain content holds both)."""


def _speaks(provider: str, dialect: str) -> bool:
    return provider == dialect or dialect in _DIALECTS.get(provider, ())


def _listed(table: frozenset[tuple[str, str]], provider: str, kind: str | None) -> bool:
    return any((p, kind) in table for p in (provider, *_DIALECTS.get(provider, ())))


@dataclass(frozen=True, slots=True, eq=False)
class OpaqueBlock:
    """A provider block convomem does not interpret, kept exactly as the provider sent it.

    ``data`` is the provider's dict (frozen), ``provider`` the format it came from
    (``"openai"``, ``"anthropic"``, ``"langchain"`` for LangChain content items, which
    follow either shape). It goes back unchanged to its own provider; the other provider
    gets an equivalent where one is faithful, else nothing (see each format).
    An OpenAI block without ``type`` holds a message-level field (``{"refusal": ...}``,
    ``{"audio": {"id": ...}}``) and is written back into the message itself.

    What a tokenizer counts (``countable_text``): the refusal text (OpenAI ``refusal``),
    the thinking text (Anthropic ``thinking``), a text ``document``'s title, context and
    text, a ``search_result``'s source, title and text. Blocks with no text (OpenAI
    ``input_audio``, ``file``, ``audio``; Anthropic ``redacted_thinking``, an unreadable
    ``image``, a binary ``document``) have ``flat_cost`` True: a tokenizer charges each a
    flat estimate, as it does an image. Responses API parts (provider
    ``"openai_responses"``): a ``refusal`` counts its text, a ``reasoning`` item its summary
    and reasoning text (its ``encrypted_content`` is opaque bytes: an item with nothing
    else is a flat cost), and ``input_file``, ``input_audio``, an ``input_image`` by
    ``file_id`` and an ``image_generation_call`` are flat costs (a base64 PDF must not be
    counted as text). A type convomem does not know is counted by its JSON text, an
    over-estimate rather than a budget overflow.
    """

    provider: str
    data: Mapping[str, Any]
    _key: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        require_str("OpaqueBlock.provider", self.provider, allow_empty=False)
        if not isinstance(self.data, Mapping):
            raise InvalidMessage("OpaqueBlock.data", self.data, "must be a JSON object")
        frozen, key = freeze(self.data, "OpaqueBlock.data")
        object.__setattr__(self, "data", frozen)
        object.__setattr__(self, "_key", key)

    @property
    def kind(self) -> str | None:
        """The provider's block type; for a message-level OpenAI field, its key."""
        kind = self.data.get("type")
        if isinstance(kind, str):
            return kind
        if self.provider == "openai" and len(self.data) == 1:
            return next(iter(self.data))
        return None

    def text(self) -> str:
        """The readable text the block carries, or ``""`` when it has none."""
        return _opaque_text(self.provider, self.kind, self.data)

    @property
    def flat_cost(self) -> bool:
        """True when the block has no text and costs a flat estimate."""
        if not _listed(OPAQUE_FLAT, self.provider, self.kind):
            return False
        if self.kind in ("document", "reasoning"):
            return not self.text()
        return True

    def countable_text(self) -> str:
        """What a tokenizer counts for this block (``""`` when it is a flat cost)."""
        text = self.text()
        if text or self.flat_cost:
            return text
        if _listed(_TEXT_KINDS, self.provider, self.kind):
            return ""  # a known text kind whose text is empty
        return json.dumps(self.data, ensure_ascii=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpaqueBlock):
            return NotImplemented
        return self.provider == other.provider and self._key == other._key

    def __hash__(self) -> int:
        return hash((self.provider, self._key))


_TEXT_KINDS: Final = frozenset(
    {
        ("openai", "refusal"),
        ("anthropic", "thinking"),
        ("anthropic", "search_result"),
        ("openai_responses", "refusal"),
        ("openai_responses", "reasoning"),
    }
)


def _texts(content: Any) -> list[str]:
    """The text of a string or of a list of text blocks."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [b["text"] for b in content if isinstance(b, Mapping) and _is_text_block(b)]
    return []


def _is_text_block(block: Mapping[str, Any]) -> bool:
    return block.get("type") == "text" and isinstance(block.get("text"), str)


def _opaque_text(provider: str, kind: str | None, data: Mapping[str, Any]) -> str:
    lines: list[str] = []
    if (_speaks(provider, "openai") or provider == "openai_responses") and kind == "refusal":
        lines = _texts(data.get("refusal"))
    elif provider == "openai_responses" and kind == "reasoning":
        # The summary and any plain reasoning text; encrypted_content is opaque bytes.
        for key, part in (("summary", "summary_text"), ("content", "reasoning_text")):
            items = data.get(key)
            if isinstance(items, list | tuple):
                lines += [
                    b["text"]
                    for b in items
                    if isinstance(b, Mapping)
                    and b.get("type") == part
                    and "text" in b
                    and isinstance(b["text"], str)
                ]
    elif _speaks(provider, "anthropic") and kind == "thinking":
        lines = _texts(data.get("thinking"))
    elif _speaks(provider, "anthropic") and kind in ("document", "search_result"):
        source = data.get("source")
        if kind == "search_result" and isinstance(source, str):
            lines.append(source)
        for key in ("title", "context"):
            if isinstance(data.get(key), str):
                lines.append(data[key])
        if kind == "search_result":
            lines += _texts(data.get("content"))
        elif isinstance(source, Mapping) and source.get("type") == "text":
            lines += _texts(source.get("data"))
        elif isinstance(source, Mapping) and source.get("type") == "content":
            lines += _texts(source.get("content"))
        else:
            return ""  # a binary document: its title alone is not its text
    return "\n".join(lines)

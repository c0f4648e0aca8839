"""Adapters that run each peer library on the common workload with the same token counter.

Peers (extra ``bench``): convopack 0.3.2 (``Packer`` + ``Recency`` / ``SummaryEvict`` /
``SemanticDedup``), langchain-core ``trim_messages`` and llama-index-core
``ChatMemoryBuffer``. Every peer gets the *same* counter: a convomem tokenizer's
text-level ``count(text)`` (uncached, as a peer would call its own tokenizer) plus
convomem's per-message overhead, applied to the same text convomem counts
(``Message.countable_text()``: name, text, tool name and JSON arguments, tool result).
Each wrapper records how many texts it tokenized (``calls``) and their characters
(``chars``), a deterministic measure of the work a peer does per pack.

LlamaIndex's API only hands its ``tokenizer_fn`` one joined string of message contents,
so it counts neither tool-call arguments nor per-message overhead; its packs are
re-measured with the common counter so the token columns stay comparable.

For each peer: ``to_<peer>(dicts)`` converts OpenAI dicts once, ``<peer>_pack(history,
counter, budget)`` is the call the benchmarks time, ``<peer>_measure(packed, counter)``
gives ``(kept message count, tokens)``, and ``<peer>_turn`` does both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from convomem.tokens import PER_MESSAGE_TOKENS, Tokenizer

Dicts = Sequence[dict[str, Any]]


class CountingText:
    """A convomem tokenizer's ``count(text)`` with work counters (texts, characters)."""

    def __init__(self, tokenizer: Tokenizer, *, per_message: int = PER_MESSAGE_TOKENS) -> None:
        self.tokenizer = tokenizer
        self.name = tokenizer.name
        self.per_message = per_message
        self.calls = 0
        self.chars = 0

    def count(self, text: str) -> int:
        self.calls += 1
        self.chars += len(text)
        return self.tokenizer.count(text)

    def reset(self) -> None:
        self.calls = 0
        self.chars = 0


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# --------------------------------------------------------------------------- convopack


def convopack_text(message: Any) -> str:
    """What convomem's ``countable_text`` would be for a convopack message."""
    from convopack import TextBlock, ToolResultBlock, ToolUseBlock

    parts = [] if message.name is None else [message.name]
    for b in message.content:
        if isinstance(b, TextBlock):
            parts.append(b.text)
        elif isinstance(b, ToolUseBlock):
            parts.append(b.name)
            parts.append(_json(b.input))
        elif isinstance(b, ToolResultBlock):
            if isinstance(b.content, str):
                parts.append(b.content)
            else:
                parts.append("\n".join(p.text for p in b.content if isinstance(p, TextBlock)))
    return "\n".join(parts)


class ConvopackTokenizer:
    """A convomem tokenizer as a convopack ``Tokenizer`` (``name``, ``count``, ...)."""

    def __init__(self, counter: CountingText) -> None:
        self.counter = counter
        self.name = f"convomem:{counter.name}"

    def count(self, text: str) -> int:
        return self.counter.count(text)

    def count_message(self, message: Any) -> int:
        return self.counter.count(convopack_text(message)) + self.counter.per_message

    def count_messages(self, messages: Iterable[Any]) -> int:
        return sum(self.count_message(m) for m in messages)


def to_convopack(dicts: Dicts) -> list[Any]:
    """OpenAI dicts -> convopack messages (convopack's own converter)."""
    from convopack.providers.openai import from_openai

    return from_openai(dicts)


def convopack_pack(
    history: list[Any], counter: CountingText, budget: int, strategy: Any = None
) -> Any:
    """``Packer(budget=..., tokenizer=<wrapped>, strategy=Recency()).pack(history)``."""
    from convopack import Packer, Recency

    packer = Packer(
        budget=budget, tokenizer=ConvopackTokenizer(counter), strategy=strategy or Recency()
    )
    return packer.pack(history)


def convopack_measure(result: Any, counter: CountingText) -> tuple[int, int]:
    return len(result.kept), int(result.token_count)


def convopack_turn(history: list[Any], counter: CountingText, budget: int) -> tuple[int, int]:
    """One agent-loop pack with convopack ``Recency``: ``(kept count, tokens)``."""
    return convopack_measure(convopack_pack(history, counter, budget), counter)


# --------------------------------------------------------------------------- langchain


def langchain_text(message: Any) -> str:
    """What convomem's ``countable_text`` would be for a LangChain ``BaseMessage``."""
    parts = [] if message.name is None else [message.name]
    content = message.content
    if isinstance(content, str):
        if content:
            parts.append(content)
    else:
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and p.get("type") == "text":
                parts.append(p["text"])
    for call in getattr(message, "tool_calls", None) or ():
        parts.append(call["name"])
        parts.append(_json(call["args"]))
    return "\n".join(parts)


def langchain_counter(counter: CountingText) -> Callable[[list[Any]], int]:
    """A list counter for ``trim_messages(token_counter=...)``.

    A list counter, not a per-message one: ``trim_messages`` detects a per-message
    counter by ``inspect`` finding the annotation ``BaseMessage`` as a class, which a
    module using ``from __future__ import annotations`` (a string annotation) never
    satisfies. Both forms do the same work: the list form is summed per message anyway.
    """
    per = counter.per_message

    def count_list(messages: list[Any]) -> int:
        return sum(counter.count(langchain_text(m)) + per for m in messages)

    return count_list


def to_langchain(dicts: Dicts) -> list[Any]:
    """OpenAI dicts -> LangChain messages (``convert_to_messages``)."""
    from langchain_core.messages import convert_to_messages

    return list(convert_to_messages(list(dicts)))


def langchain_pack(history: list[Any], counter: CountingText, budget: int) -> list[Any]:
    """``trim_messages(strategy="last", start_on="human", include_system=True)``."""
    from langchain_core.messages import trim_messages

    return list(
        trim_messages(
            history,
            max_tokens=budget,
            token_counter=langchain_counter(counter),
            strategy="last",
            start_on="human",
            include_system=True,
        )
    )


def langchain_measure(packed: list[Any], counter: CountingText) -> tuple[int, int]:
    per = counter.per_message
    return len(packed), sum(counter.tokenizer.count(langchain_text(m)) + per for m in packed)


def langchain_turn(history: list[Any], counter: CountingText, budget: int) -> tuple[int, int]:
    """One agent-loop pack with LangChain ``trim_messages``: ``(kept count, tokens)``."""
    return langchain_measure(langchain_pack(history, counter, budget), counter)


# --------------------------------------------------------------------------- llama-index


def llamaindex_text(message: Any) -> str:
    """What convomem's ``countable_text`` would be for a LlamaIndex ``ChatMessage``."""
    parts = []
    content = message.content
    if content:
        parts.append(content)
    for call in message.additional_kwargs.get("tool_calls") or ():
        fn = call.get("function", {})
        parts.append(fn.get("name", ""))
        parts.append(fn.get("arguments", ""))
    return "\n".join(parts)


def llamaindex_tokenizer_fn(counter: CountingText) -> Callable[[str], Any]:
    """A ``tokenizer_fn`` for ``ChatMemoryBuffer``: it only takes ``len()`` of the result,
    so a ``range`` stands in for the token list (cheaper than the list tiktoken builds)."""

    def tokenize(text: str) -> Any:
        return range(counter.count(text))

    return tokenize


def to_llamaindex(dicts: Dicts) -> list[Any]:
    """OpenAI dicts -> LlamaIndex ``ChatMessage``s (tool fields in ``additional_kwargs``,
    as llama-index-llms-openai stores them)."""
    from llama_index.core.base.llms.types import ChatMessage

    out = []
    for d in dicts:
        extra = {k: d[k] for k in ("tool_calls", "tool_call_id", "name") if d.get(k)}
        out.append(ChatMessage(role=d["role"], content=d.get("content"), additional_kwargs=extra))
    return out


def llamaindex_pack(history: list[Any], counter: CountingText, budget: int) -> list[Any]:
    """``ChatMemoryBuffer.from_defaults(chat_history=..., token_limit=budget,
    tokenizer_fn=...).get()``; building the buffer only stores the list (O(1))."""
    from llama_index.core.memory import ChatMemoryBuffer

    memory = ChatMemoryBuffer.from_defaults(
        chat_history=history, token_limit=budget, tokenizer_fn=llamaindex_tokenizer_fn(counter)
    )
    return list(memory.get())


def llamaindex_measure(packed: list[Any], counter: CountingText) -> tuple[int, int]:
    per = counter.per_message
    return len(packed), sum(counter.tokenizer.count(llamaindex_text(m)) + per for m in packed)


def llamaindex_turn(history: list[Any], counter: CountingText, budget: int) -> tuple[int, int]:
    """One agent-loop ``get()`` of LlamaIndex ``ChatMemoryBuffer``: ``(kept count, tokens)``."""
    return llamaindex_measure(llamaindex_pack(history, counter, budget), counter)


# --------------------------------------------------------------------------- registry


class Peer:
    """One peer: how to convert the workload, pack it, and measure a pack."""

    def __init__(
        self,
        name: str,
        convert: Callable[[Dicts], list[Any]],
        pack: Callable[[list[Any], CountingText, int], Any],
        measure: Callable[[Any, CountingText], tuple[int, int]],
        version: Callable[[], str],
    ) -> None:
        self.name = name
        self.convert = convert
        self.pack = pack
        self.measure = measure
        self.version = version


def _version(dist: str) -> Callable[[], str]:
    def get() -> str:
        from importlib.metadata import version

        return version(dist)

    return get


PEERS: dict[str, Peer] = {
    "convopack": Peer(
        "convopack", to_convopack, convopack_pack, convopack_measure, _version("convopack")
    ),
    "langchain": Peer(
        "langchain", to_langchain, langchain_pack, langchain_measure, _version("langchain-core")
    ),
    "llamaindex": Peer(
        "llamaindex",
        to_llamaindex,
        llamaindex_pack,
        llamaindex_measure,
        _version("llama-index-core"),
    ),
}


def available_peers(names: Iterable[str] = PEERS) -> dict[str, Peer]:
    """The peers among ``names`` whose library imports (others are reported missing)."""
    import importlib

    modules = {
        "convopack": "convopack",
        "langchain": "langchain_core",
        "llamaindex": "llama_index.core",
    }
    out = {}
    for name in names:
        try:
            importlib.import_module(modules[name])
        except ImportError:
            print(f"note: peer {name!r} is not installed (pip install -e '.[bench]'); skipped")
            continue
        out[name] = PEERS[name]
    return out


# --------------------------------------------------------------------------- SummaryEvict


def convopack_summary_cost(
    dicts: Dicts,
    counter: CountingText,
    budget: int,
    summarizer: Callable[[list[Any]], str] | None = None,
) -> dict[str, float]:
    """Replay a session through convopack ``SummaryEvict``, packing before every model
    call (before each assistant message), as an agent does.

    Returns summarizer calls, the tokens of the messages handed to the summarizer in
    total, the conversation's tokens, their ratio, and how many packs came out over
    budget. The default summarizer returns the first 200 characters of the dropped
    text (like convomem's ``TruncatingSummarizer``).
    """
    from convopack import Packer, SummaryEvict

    tok = ConvopackTokenizer(counter)
    stats = {"calls": 0.0, "input_tokens": 0.0}

    def summarize(messages: list[Any]) -> str:
        stats["calls"] += 1
        stats["input_tokens"] += sum(
            counter.tokenizer.count(convopack_text(m)) + counter.per_message for m in messages
        )
        if summarizer is not None:
            return summarizer(messages)
        return " ".join(convopack_text(m) for m in messages)[:200] + " [...]"

    history = to_convopack(dicts)
    packer = Packer(budget=budget, tokenizer=tok, strategy=SummaryEvict(summarize))
    packs = over = 0
    for i, d in enumerate(dicts):
        if d["role"] == "assistant" and i > 0:
            result = packer.pack(history[:i])
            packs += 1
            over += result.token_count > budget
    total = sum(counter.tokenizer.count(convopack_text(m)) + counter.per_message for m in history)
    return {
        "packs": float(packs),
        "calls": stats["calls"],
        "input_tokens": stats["input_tokens"],
        "conversation_tokens": float(total),
        "ratio": stats["input_tokens"] / total if total else 0.0,
        "over_budget_packs": float(over),
    }

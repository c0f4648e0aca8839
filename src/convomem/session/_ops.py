"""What a session renders: priority-1 compression into a stand-in message, and a view
as provider dicts (converted once per message and cached between turns)."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

from ..formats.anthropic import to_anthropic
from ..formats.openai import order_tool_results, to_openai
from ..model import COMPRESSED_KEY, Message, TextBlock, ToolResultBlock
from ..summaries import Summary, message_label, render_summary
from ..summaries.facts import render_facts
from ..tokens import Tokenizer
from .view import STAND_IN, opens_turn

Format: TypeAlias = Literal["openai", "anthropic", "messages"]
_FORMAT_META: Final = ("openai", "anthropic", "langchain")


def compressed_message(m: Message, s: Summary, tokenizer: Tokenizer) -> Message:
    """The stand-in for a compressed priority-1 message: same id, role and result ids.

    It carries the message's key facts verbatim and is marked with ``COMPRESSED_KEY``
    (the log keeps the original). A message the compressor could not shorten (or that
    calls tools, whose calls must stay intact) stays as it is, marked, and evictable.
    """
    tokens = tokenizer.count_message(m)
    info: dict[str, Any] = {"tokens": tokens, "summarizer": s.summarizer, "degraded": s.degraded}
    if not getattr(s, "kept_original", False) and not m.has_tool_use():
        label = message_label(m) + ": "
        text = "\n".join(
            line[len(label) :] if line.startswith(label) else line
            for line in s.text.strip().splitlines()
        )
        body = render_summary("", render_facts(s.facts), text)
        if body.strip():
            meta = {k: v for k, v in m.metadata.items() if k not in _FORMAT_META}
            results = [b for b in m.blocks if isinstance(b, ToolResultBlock)]
            content: str | list[ToolResultBlock] = body
            if results:
                content = [ToolResultBlock(results[0].tool_use_id, body, results[0].is_error)]
                content += [ToolResultBlock(b.tool_use_id, "-", b.is_error) for b in results[1:]]
            cm = Message(
                m.id,
                m.role,
                None,
                content=content,
                name=m.name,
                metadata={**meta, COMPRESSED_KEY: info},
                created_at=m.created_at,
                priority=0,
            )
            if tokenizer.count_message(cm) < tokens:
                return cm
    return m.replace(
        tokens=m.tokens, metadata={**m.metadata, COMPRESSED_KEY: {**info, "kept": True}}, priority=0
    )


def render_context(
    messages: list[Message],
    format: str,
    cache: dict[int, tuple[Message, list[dict[str, Any]]]],
    *,
    stand_in: bool = False,
) -> Any:
    """The view in ``format``. OpenAI dicts are converted once per message and cached
    (the view changes by a few messages a turn), in the order the API requires
    (``formats.openai.order_tool_results``); each call returns fresh dicts."""
    if format == "messages":
        return list(messages)
    if format == "anthropic":
        if stand_in:
            at = next(i for i, m in enumerate(messages) if m.role != "system")
            messages = [*messages[:at], STAND_IN, *messages[at:]]
        system, out = to_anthropic(_from_first_turn(messages))
        return {"messages": out} if system is None else {"system": system, "messages": out}
    result: list[dict[str, Any]] = []
    for m in messages:
        hit = cache.get(id(m))
        if hit is None or hit[0] is not m:
            hit = cache[id(m)] = (m, to_openai([m]))
        result.extend(hit[1])
    if len(cache) > 2 * len(messages) + 64:
        live = {id(m) for m in messages}
        for key in [k for k in cache if k not in live]:
            del cache[key]
    return [_copy(d) for d in order_tool_results(result)]


def _from_first_turn(messages: list[Message]) -> list[Message]:
    """``messages`` arranged to start (after system messages) with a user turn, as an
    Anthropic request must. A view cut between turns may start with the tail of the
    previous turn: when that tail is plain and unpinned it is left out of this request
    (it stays in the log, and in the summary once evicted); otherwise the view already
    gets a stand-in user turn (``view.STAND_IN``, budgeted by the view)."""
    lead = [m for m in messages if m.role != "system"]
    first = next((i for i, m in enumerate(lead) if opens_turn(m)), None)
    if not first:
        return messages
    skipped = set(map(id, lead[:first]))
    return [m for m in messages if id(m) not in skipped]


def _copy(value: Any) -> Any:
    """A copy of plain JSON data (strings and numbers are immutable, so shared)."""
    if type(value) is dict:
        return {k: _copy(v) if type(v) is dict or type(v) is list else v for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) if type(v) is dict or type(v) is list else v for v in value]
    return value


def into_user_turns(messages: list[Message]) -> list[Message]:
    """An Anthropic request's messages with each system message placed among the turns (a
    tiers update) moved into the user turn after it, as a leading text block: the
    ``system`` field then stays what the prefix holds (Anthropic sends it first)."""
    out: list[Message] = []
    pending: list[str] = []
    started = False
    for m in messages:
        if m.role == "system" and started:
            pending.append(m.text())
            continue
        if m.role != "system":
            started = True
        if pending and m.role == "user":
            blocks = [TextBlock(t) for t in pending]
            rest = [TextBlock(m.content)] if isinstance(m.content, str) else list(m.blocks)
            m = m.replace(content=[*blocks, *rest], tokens=None)
            pending = []
        out.append(m)
    return out

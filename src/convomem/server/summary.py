"""The accounting of a context: what was kept, summarized, left out or recalled, and why.

Built from ``ConversationMemory.stats()`` and the messages of ``context("messages")``,
so it costs O(view), like the context itself.
"""

from __future__ import annotations

from typing import Any

from ..formats import to_anthropic, to_openai
from ..model import Message
from ..packing import Packer
from ..session import ConversationMemory
from ..session.placement import is_tier_message
from ..views.budget import REPLY_PRIMING_TOKENS
from .models import Accounting, SummaryOut


def accounting(
    memory: ConversationMemory,
    kept: list[Message],
    *,
    budget: int | None = None,
    query: str | None = None,
    recalled: list[dict[str, Any]] | None = None,
    dropped: int = 0,
    packed: tuple[int, int] | None = None,
) -> Accounting:
    """The accounting of ``kept`` (the context's messages) under ``memory``.

    ``packed``: when ``kept`` was packed under a ``budget`` below the session's, the
    tokens it costs (its messages and the reply's priming, as the session counts) and
    the tokens of the ``dropped`` messages left out for it. Then every figure is of
    what is sent: ``tokens``, ``fits`` (``tokens <= budget``) and ``split``, whose
    ``history`` and ``total`` lose what was left out and whose ``limit`` is this
    request's.
    """
    st = memory.stats()
    summary_message = memory.summary.message()
    summary_id = None if summary_message is None else summary_message.id
    current = memory.summary.current()
    summary = (
        None
        if current is None
        else SummaryOut(
            text=current.text,
            tokens=st.summary_tokens,
            messages=st.summarized_messages,
            degraded=st.degraded,
        )
    )
    why = {
        "kept": "the newest messages that fit the history's share of the budget, and the "
        "pinned ones (the system prompt)",
        "summarized": "evicted when the history passed its trigger share; the summary "
        "stands for them (their facts kept verbatim)",
    }
    if st.omitted:
        why["omitted"] = "a compaction failed and waits for the next append; the oldest "
        "unsummarized messages are left out of this context to keep it under budget"
    if st.waiting:
        why["waiting"] = "their tool call has no result yet; they are sent with it"
    split = dict(st.budget_split or {})
    tokens: int = split.get("total", st.context_tokens)
    fits = st.fits
    if packed is not None:
        assert budget is not None
        tokens, left_out = packed
        fits = st.fits and tokens <= budget
        if split:
            split.update(
                limit=budget - REPLY_PRIMING_TOKENS,
                history=split["history"] - left_out,
                total=split["total"] - left_out,
            )
    if not fits:
        why["fits"] = (
            "the pinned messages and the current turn (the newest user message, its tool "
            "exchange and the newest reply) alone exceed the budget; they are sent anyway"
        )
    if dropped:
        why["budget"] = (
            f"budget={budget} is below the session's {memory.budget}: {dropped} more of the "
            "oldest kept messages were left out for this request only"
        )
    elif packed is not None:
        also = "the context fits it as it is" if fits else "nothing more could be left out"
        why["budget"] = f"budget={budget} is below the session's {memory.budget}: {also}"
    elif budget is not None and budget > memory.budget:
        why["budget"] = (
            f"budget={budget} is above the session's {memory.budget}, which the session's "
            "view is kept under; the context is the session's"
        )
    rec = dict(st.recall or {})
    hits = [dict(h) for h in rec.get("hits", ())] if recalled is None else recalled
    status = rec.get("status", "off")
    if status == "ok":
        why["recalled"] = (
            f"the user's past items best matching the query {rec.get('query')!r} that are "
            "not in the view (hybrid search); 'shown' ones fit the recall share"
        )
    elif status == "off":
        why["recalled"] = "recall is off (no recall index for this store)"
    else:
        why["recalled"] = f"recall answered {status} ({rec.get('error')}); sent without it"
    if st.facts is not None:
        why["facts"] = "the user's current long-term facts, from every session, best first"
        if st.facts.get("degraded"):
            why["facts"] += "; the extractor's model is failing: the offline rules read them"
    if st.degraded:
        why["summarized"] += "; the summarizer failed (its fallback's summary stands in)"
    return Accounting(
        budget=memory.budget if budget is None else min(budget, memory.budget),
        tokens=tokens,
        fits=fits,
        log_messages=st.log_messages,
        kept=[m.id for m in kept if m.id != summary_id and not is_tier_message(m)],
        summarized=st.summarized_messages,
        omitted=st.omitted,
        waiting=st.waiting,
        compactions=st.compactions,
        summary=summary,
        recalled=hits,
        recall_status=status,
        facts=dict(st.facts) if st.facts is not None else None,
        split=split,
        why=why,
    )


def trim(
    memory: ConversationMemory, kept: list[Message], budget: int, *, user_first: bool = False
) -> tuple[list[Message], int, int]:
    """``kept`` (a context's messages) packed under a ``budget`` below the session's:
    the pinned ones and the newest that fit (``user_first``: starting at a user turn,
    as Anthropic needs). The session counts a context as its messages plus the reply's
    priming (``REPLY_PRIMING_TOKENS``), so the messages get the rest of ``budget``.
    Returns the messages sent, the tokens they cost counted that way, and the tokens
    of the messages left out."""
    packed = Packer(
        budget=max(1, budget - REPLY_PRIMING_TOKENS),
        tokenizer=memory.tokenizer,
        start_on="user" if user_first else None,
    ).pack(kept)
    left_out = sum(memory.tokenizer.count_message(m) for m in packed.dropped)
    return list(packed.kept), packed.token_count + REPLY_PRIMING_TOKENS, left_out


def render(messages: list[Message], format: str) -> Any:
    """``messages`` in ``format``: OpenAI Chat dicts, or Anthropic's
    ``{system, messages}``."""
    if format == "openai":
        return to_openai(messages)
    system, out = to_anthropic(messages)
    return {"messages": out} if system is None else {"system": system, "messages": out}

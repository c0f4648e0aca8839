"""The accounting of a context: what was kept, summarized, left out or recalled, and why.

Built from ``ConversationMemory.stats()`` and the messages of ``context("messages")``,
so it costs O(view), like the context itself.
"""

from __future__ import annotations

from typing import Any

from ..model import Message
from ..session import ConversationMemory
from ..session._tier_render import TIERS_ID
from .models import Accounting, SummaryOut


def accounting(
    memory: ConversationMemory,
    kept: list[Message],
    *,
    budget: int | None = None,
    query: str | None = None,
    recalled: list[dict[str, Any]] | None = None,
    dropped: int = 0,
    packed: tuple[int, bool] | None = None,
) -> Accounting:
    """The accounting of ``kept`` (the context's messages) under ``memory``;
    ``packed``: the tokens and fit of ``kept`` when it was packed under a ``budget``
    below the session's (then ``tokens`` is what is sent, ``split`` the session's)."""
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
    if not st.fits:
        why["fits"] = "the pinned messages alone exceed the budget; they are sent anyway"
    if dropped:
        why["budget"] = (
            f"budget={budget} is below the session's {memory.budget}: {dropped} more of the "
            "oldest kept messages were left out for this request only"
        )
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
        tokens=(st.budget_split or {}).get("total", st.context_tokens)
        if packed is None
        else packed[0],
        fits=st.fits if packed is None else st.fits and packed[1],
        log_messages=st.log_messages,
        kept=[m.id for m in kept if m.id != summary_id and m.id != TIERS_ID],
        summarized=st.summarized_messages,
        omitted=st.omitted,
        waiting=st.waiting,
        compactions=st.compactions,
        summary=summary,
        recalled=hits,
        recall_status=status,
        facts=dict(st.facts) if st.facts is not None else None,
        split=dict(st.budget_split or {}),
        why=why,
    )

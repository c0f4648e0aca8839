"""Quality and cost of ConversationMemory: fact retention, summarizer cost, cache stability.

Three figures, each against a reference measured in the same run:

1. Fact retention. A generated 2,000-turn support chat with 50 planted facts (names,
   order numbers, dates, preferences; stated once each, by the user, at random turns)
   and realistic distractors: product names, step numbers and times, and about two
   incidental facts per planted one (case numbers, colleagues' names, other dates).
   The budget is 10% of the conversation's tokens. Counted: facts whose value appears
   in the final context.
   Rows: plain ``Recency`` (``convomem.packing.Packer``), ``ConversationMemory`` with
   ``ExtractiveSummarizer`` and no ledger (``facts=False``), and with the ledger.
   Target: at least 90% with the ledger.
2. Summarizer cost over a 1,000-turn agent session (``workload.py``: tool calls and
   results included) with the default ``ConversationMemory(8000)`` (the budget of the
   other agent-loop benchmarks): summarizer input tokens / the conversation's tokens.
   Target: at most 1.2. Reference: convopack's ``SummaryEvict`` on the same session and
   budget, packing the history before every model call as its docs show (skipped, with a
   note, when convopack is not installed).
3. Prompt-cache stability on the same session: the fraction of model calls (after each
   user message and after each round of tool results) whose context starts with the
   previous call's context. Target: at least 90% with the default compaction; reference:
   plain ``Recency`` at the same budget.

Figures 2 and 3 are repeated at a 4,000-token budget, a stress case: this workload
averages about 175 tokens per model call, so 4,000 tokens hold only ~20 calls. Stability
is about ``1 - tokens per call / ((trigger - target) * history share)``: a compaction
frees 30% of the history share, and the prefix breaks once per compaction.

    .venv/bin/python bench/bench_memory_quality.py            # about 1.5 minutes
    .venv/bin/python bench/bench_memory_quality.py --quick    # smaller sizes
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from typing import Any

import peers
import workload
from convomem.model import Message
from convomem.packing import Packer
from convomem.session import ConversationMemory
from convomem.strategies import Recency
from convomem.tokens import get_tokenizer

TOK = get_tokenizer("approx")

_NAMES_TEXT = (
    "Priya Tomasz Ingrid Kofi Mateo Aiko Svetlana Rashid Lucia Oskar Nneka Bjorn Yara|"
    "Raman Kowalski Lindqvist Mensah Alvarez Tanaka Petrova Haddad Moreno Berg Okafor|"
    "Novak Dubois Silva Schmidt Rossi Nakamura Jensen Kaur Walsh Costa|"
    "January February March April June July August September October November"
)
FIRST, LAST, OTHER_LAST, MONTHS = (part.split() for part in _NAMES_TEXT.split("|"))
PREFS = (
    "window seats",
    "email updates",
    "paper invoices",
    "morning deliveries",
    "vegan meals",
    "text messages",
    "recycled packaging",
    "weekend calls",
    "express shipping",
    "the blue color",
    "a quiet room",
    "Spanish support",
    "no phone calls",
    "eco mode",
    "gift wrapping",
    "signature on delivery",
)

_VOCAB_TEXT = (
    "the parcel delivery team checked warehouse status again today and the carrier said "
    "it would take a little longer we looked at options for shipping returns and labels "
    "support confirmed the account settings page shows the latest update about the case "
    "customer asked whether the refund policy covers damaged items or late arrivals"
)
_VOCAB = _VOCAB_TEXT.split()
_PRODUCTS = ("Settings", "Dashboard", "Pro Plan", "Help Center", "Atlas", "Express Lane")


def _sentence(rng: random.Random, lo: int = 8, hi: int = 18) -> str:
    words = [rng.choice(_VOCAB) for _ in range(rng.randint(lo, hi))]
    if rng.random() < 0.25:  # distractors: product names, step numbers, times
        words.insert(rng.randrange(len(words)), rng.choice(_PRODUCTS))
    if rng.random() < 0.15:
        words.append(rng.choice(("step 2", "in 3 days", "at 5 pm", "2 items", "page 4")))
    return " ".join(words).capitalize() + "."


def fact_conversation(turns: int, n_facts: int, seed: int = 7) -> tuple[list[Message], list[str]]:
    """A user/assistant chat with ``n_facts`` facts planted at random turns; their values."""
    rng = random.Random(seed)
    names = rng.sample([f"{f} {last}" for f in FIRST for last in LAST], n_facts)
    facts: list[tuple[str, str]] = []  # (sentence, value)
    for k in range(n_facts):
        kind = k % 4
        if kind == 0:
            value = names[k]
            facts.append((f"By the way, my name is {value}.", value))
        elif kind == 1:
            value = str(rng.randint(100_000, 999_999))
            facts.append((f"My order number is {value}.", value))
        elif kind == 2:
            value = f"{rng.choice(MONTHS)} {rng.randint(1, 28)}"
            facts.append((f"The delivery was promised for {value}.", value))
        else:
            value = PREFS[(k // 4) % len(PREFS)]
            facts.append((f"I prefer {value}.", value))
    at = dict(zip(rng.sample(range(1, turns - 5), n_facts), facts, strict=True))
    # Distractors: about two incidental facts per planted one (case numbers the agent
    # opens, colleagues it names, dates it mentions), each a distinct value.
    noise: dict[int, str] = {}
    for t in rng.sample(range(turns), 2 * n_facts):
        kind = rng.randrange(3)
        if kind == 0:
            noise[t] = f"I have opened case {rng.randint(10_000, 99_999)} for this."
        elif kind == 1:
            noise[t] = f"My colleague {rng.choice(FIRST)} {rng.choice(OTHER_LAST)} will follow up."
        else:
            noise[t] = f"Our next stock update is on {rng.choice(MONTHS)} {rng.randint(1, 28)}."
    out = [Message("sys", "system", content=workload.SYSTEM_PROMPT)]
    for t in range(turns):
        user = " ".join(_sentence(rng) for _ in range(rng.choice((1, 1, 2))))
        if t in at:
            user = f"{user} {at[t][0]}"
        out.append(Message(f"u{t}", "user", content=user))
        reply = " ".join(_sentence(rng) for _ in range(rng.choice((1, 2, 3))))
        if t in noise:
            reply = f"{reply} {noise[t]}"
        out.append(Message(f"a{t}", "assistant", content=reply))
    return out, [v for _, v in facts]


def retained(context: Sequence[Message], values: Sequence[str]) -> int:
    text = "\n".join(m.text() for m in context)
    return sum(v in text for v in values)


def bench_retention(turns: int, n_facts: int) -> None:
    conv, values = fact_conversation(turns, n_facts)
    total = TOK.count_messages(conv)
    budget = total // 10
    print(f"1. Fact retention: {turns} turns, {len(conv)} messages, {total} tokens")
    print(f"   budget {budget} tokens (10%), {n_facts} planted facts")
    rows: list[tuple[str, int, float]] = []
    t0 = time.perf_counter()
    packed = Packer(budget=budget, strategy=Recency()).pack(conv).kept
    rows.append(("Recency (Packer)", retained(packed, values), time.perf_counter() - t0))
    for label, facts in (("RunningSummary, no ledger", False), ("RunningSummary + ledger", True)):
        t0 = time.perf_counter()
        mem = ConversationMemory(budget, facts=facts)
        for m in conv:
            mem.add_message(m)
        ctx = mem.context("messages")
        assert TOK.count_messages(ctx) + 2 <= budget
        rows.append((label, retained(ctx, values), time.perf_counter() - t0))
    for label, kept, secs in rows:
        print(f"   {label:<28} {kept:>3}/{n_facts} = {kept / n_facts:6.1%}   ({secs:.1f} s)")
    ledger, recency = rows[2][1], max(rows[0][1], 1)
    ok = "OK" if ledger >= 0.9 * n_facts else "BELOW TARGET"
    print(f"   ledger vs Recency: {ledger / recency:.1f}x facts kept; target >= 90%: {ok}")


def session(turns: int) -> list[Message]:
    """The first ``turns`` turns of the workload agent session."""
    n = turns * 8
    while True:
        msgs = workload.messages(n)
        users = [i for i, m in enumerate(msgs) if m.role == "user"]
        if len(users) > turns:
            return msgs[: users[turns]]
        n *= 2


def model_calls(msgs: Sequence[Message]) -> list[int]:
    """Positions k where the model is called with ``msgs[:k]`` (the next one is its reply)."""
    return [k for k in range(1, len(msgs)) if msgs[k].role == "assistant"]


def bench_cost_and_cache(turns: int, budget: int, peers_on: bool) -> None:
    msgs = session(turns)
    total = TOK.count_messages(msgs)
    calls = model_calls(msgs)
    print(f"\n2./3. Agent session: {turns} turns, {len(msgs)} messages, {total} tokens,")
    print(f"   {len(calls)} model calls, budget {budget} tokens")

    mem = ConversationMemory(budget)
    prev: list[Message] | None = None
    kept_mem = 0
    pos = 0
    t0 = time.perf_counter()
    for k in calls:
        while pos < k:
            mem.add_message(msgs[pos])
            pos += 1
        ctx = mem.context("messages")
        if prev is not None and ctx[: len(prev)] == prev:
            kept_mem += 1
        prev = ctx
    mem_secs = time.perf_counter() - t0
    st = mem.stats()
    ratio = st.summarizer_input_tokens / total
    print("2. Summarizer cost (summarizer input tokens / conversation tokens)")
    print(
        f"   ConversationMemory        {ratio:7.2f}   ({st.summarizer_calls} calls, "
        f"{st.compactions} compactions, {mem_secs:.1f} s)  target <= 1.2: "
        f"{'OK' if ratio <= 1.2 else 'ABOVE TARGET'}"
    )
    if peers_on:
        peer = convopack_cost(msgs, calls, budget)
        if peer is None:
            print("   convopack SummaryEvict    skipped: convopack is not installed")
        else:
            p_ratio, p_calls, p_secs = peer
            print(
                f"   convopack SummaryEvict    {p_ratio:7.2f}   ({p_calls} calls, {p_secs:.1f} s)"
            )
            print(f"   SummaryEvict / ConversationMemory: {p_ratio / ratio:.0f}x the input")

    packer = Packer(budget=budget, strategy=Recency())
    prev_ids: list[str] | None = None
    kept_rec = 0
    for k in calls:
        ids = [m.id for m in packer.pack(msgs[:k]).kept]
        if prev_ids is not None and ids[: len(prev_ids)] == prev_ids:
            kept_rec += 1
        prev_ids = ids
    n = len(calls) - 1
    f_mem, f_rec = kept_mem / n, kept_rec / n
    print("3. Prompt-cache stability (calls whose context starts with the previous one)")
    print(
        f"   ConversationMemory        {f_mem:7.1%}   ({st.prefix_breaks} breaks)  "
        f"target >= 90%: {'OK' if f_mem >= 0.9 else 'BELOW TARGET'}"
    )
    print(f"   Recency (Packer)          {f_rec:7.1%}")


def convopack_cost(
    msgs: Sequence[Message], calls: Sequence[int], budget: int
) -> tuple[float, int, float] | None:
    """convopack ``SummaryEvict`` packing the history before each model call."""
    try:
        import convopack
    except ImportError:
        return None
    from convomem.formats.openai import to_openai

    counter = peers.CountingText(TOK)
    history = peers.to_convopack(to_openai(list(msgs)))
    assert len(history) == len(msgs)
    fed = {"tokens": 0, "calls": 0}

    def summarizer(messages: list[Any]) -> str:
        fed["calls"] += 1
        fed["tokens"] += sum(TOK.count(peers.convopack_text(m)) + 4 for m in messages)
        return "Earlier: " + " ".join(peers.convopack_text(m)[:40] for m in messages[-3:])

    strategy = convopack.SummaryEvict(summarizer)
    t0 = time.perf_counter()
    for k in calls:
        peers.convopack_pack(history[:k], counter, budget, strategy)
    secs = time.perf_counter() - t0
    return fed["tokens"] / TOK.count_messages(msgs), fed["calls"], secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="500-turn chat, 300-turn session")
    ap.add_argument("--no-peers", action="store_true", help="skip convopack")
    args = ap.parse_args()
    bench_retention(500 if args.quick else 2000, 50)
    turns = 300 if args.quick else 1000
    bench_cost_and_cache(turns, 8000, not args.no_peers)
    bench_cost_and_cache(turns, 4000, False)


if __name__ == "__main__":
    main()

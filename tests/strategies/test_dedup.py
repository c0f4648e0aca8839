"""SemanticDedup: a brute-force duplicate oracle, invariants, embedding work, async."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _packing_support import (
    PIN_SPECS,
    check_invariants,
    histories,
    kept_ids,
    oracle_recency,
    turn_pins,
)
from convomem.errors import ConfigError
from convomem.model import (
    ImageBlock,
    Message,
    PinPolicy,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    group_pairs,
)
from convomem.packing import Packer, PackResult
from convomem.recall import COSINE_TOLERANCE, EmbeddingCache, HashingEmbedder
from convomem.strategies import FirstFit, Importance, MaxTurns, Recency, SemanticDedup
from convomem.tokens import get_tokenizer

GIVEN = get_tokenizer("given")
FEW = settings(max_examples=25, deadline=None)
MANY = settings(max_examples=100, deadline=None)

VECTORS = st.lists(st.integers(-2, 2), min_size=3, max_size=3).map(lambda v: [float(x) for x in v])


class Table:
    """An embedder from a table: text ``"v<k>"`` -> ``pool[k]``. Any other text is an
    error, so a test fails if a tool message is ever embedded."""

    def __init__(self, pool: Sequence[Sequence[float]]) -> None:
        self.pool = [list(v) for v in pool]
        self.texts: list[str] = []

    def embed(self, text: str) -> list[float]:
        assert text.startswith("v"), f"embedded {text!r}"
        self.texts.append(text)
        return self.pool[int(text[1:])]


class Counting:
    """Wraps an embedder, counting ``embed`` / ``embed_batch`` calls and texts."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.embed_calls = 0
        self.batch_calls = 0
        self.texts = 0
        self.threads: set[int] = set()

    def embed(self, text: str) -> list[float]:
        self.embed_calls += 1
        self.texts += 1
        return list(self.inner.embed(text))

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.add(threading.get_ident())
        self.batch_calls += 1
        self.texts += len(texts)
        return [list(self.inner.embed(t)) for t in texts]


@st.composite
def pooled(draw: Any) -> tuple[list[Message], list[list[float]]]:
    """Random histories whose plain messages say ``v<k>``: texts drawn from a small pool
    of small integer vectors, so exact and near duplicates (and zero vectors) are common.
    """
    pool = draw(st.lists(VECTORS, min_size=1, max_size=6))
    out = []
    for m in draw(histories(max_size=24)):
        if isinstance(m.content, str):
            k = draw(st.integers(0, len(pool) - 1))
            m = m.replace(content=f"v{k}", tokens=m.tokens)
        out.append(m)
    return out, pool


def cosine(u: Sequence[float], v: Sequence[float]) -> float:
    return sum(a * b for a, b in zip(u, v, strict=True)) / math.sqrt(
        sum(a * a for a in u) * sum(b * b for b in v)
    )


def oracle_duplicates(
    messages: Sequence[Message], pins: Any, vector: Any, threshold: float
) -> set[int]:
    """Indices of near-duplicates, by brute force: single plain messages that are not
    pinned take part; each one repeats an earlier surviving one or survives itself."""
    survivors: list[Sequence[float]] = []
    dups: set[int] = set()
    held = PinPolicy(pins).resolve(messages) | turn_pins(messages, GIVEN, "drop")
    for c in group_pairs(messages, held):
        m = c.messages[0]
        if len(c.messages) != 1 or c.pinned or m.has_tool_use() or m.has_tool_result():
            continue
        v = vector(m.text())
        if not any(v):
            continue  # a zero vector never duplicates anything
        if any(cosine(v, u) >= threshold - COSINE_TOLERANCE for u in survivors):
            dups.add(c.start)
        else:
            survivors.append(v)
    return dups


def oracle_kept(
    messages: Sequence[Message], budget: int, pins: Any, tok: Any, unanswered: str, gone: set[int]
) -> set[str]:
    """Recency (min_keep=1) over the sendable chunks that are not duplicates."""
    return oracle_recency(messages, budget, pins, tok, unanswered=unanswered, gone=gone)


def fingerprint(r: PackResult) -> tuple[Any, ...]:
    return (
        [m.id for m in r.kept],
        [(d.index, d.kept, d.reason, d.tokens) for d in r.decisions],
        r.token_count,
    )


def duplicates(r: PackResult) -> set[int]:
    return {d.index for d in r.decisions if d.reason == "duplicate"}


def say(i: str, role: str, content: Any, tokens: int | None = None) -> Message:
    return Message(i, role, tokens, content=content)


# ------------------------------------------------------------------ oracle, invariants


@pytest.mark.parametrize("backend", ["python", "numpy"])
@MANY
@given(
    data=pooled(),
    budget=st.integers(1, 250),
    pins=PIN_SPECS,
    unanswered=st.sampled_from(("drop", "stub")),
    threshold=st.sampled_from((1.0, 0.99, 0.9, 0.7, 0.3, 1e-6)),
)
def test_duplicates_and_kept_match_the_oracles(
    backend: Any,
    data: tuple[list[Message], list[list[float]]],
    budget: int,
    pins: Any,
    unanswered: Any,
    threshold: float,
) -> None:
    messages, pool = data
    table = Table(pool)
    strategy = SemanticDedup(table, threshold=threshold, backend=backend)
    packer = Packer(
        budget=budget, tokenizer=GIVEN, strategy=strategy, pin=pins, unanswered=unanswered
    )
    r = packer.pack(messages)
    check_invariants(messages, r, pins=pins, tokenizer=GIVEN)
    expected = oracle_duplicates(messages, pins, lambda t: pool[int(t[1:])], threshold)
    assert duplicates(r) == expected
    assert not {m.id for m in r.kept} & {messages[i].id for i in expected}
    assert kept_ids(r) == oracle_kept(messages, budget, pins, GIVEN, unanswered, expected)
    # Each distinct text embedded once; a repeated pack embeds nothing and decides the same.
    embedded = strategy.cache.embedded
    assert embedded == len(set(table.texts)) and len(table.texts) == embedded
    assert fingerprint(packer.pack(messages)) == fingerprint(r)
    rebuilt = [Message.from_dict(m.to_dict()) for m in messages]
    assert fingerprint(packer.pack(rebuilt)) == fingerprint(r)
    assert strategy.cache.embedded == embedded


@FEW
@given(data=pooled(), budget=st.integers(1, 250), ops=st.lists(st.integers(-3, 4), max_size=8))
def test_a_reused_packer_decides_like_a_fresh_strategy(
    data: tuple[list[Message], list[list[float]]], budget: int, ops: list[int]
) -> None:
    """Growing, shrinking and rebuilt lists through one Packer (its table and finder
    reused) give what a fresh strategy gives each time."""
    messages, pool = data
    packer = Packer(budget=budget, tokenizer=GIVEN, strategy=SemanticDedup(Table(pool)))
    n = len(messages) // 2
    for op in ops:
        n = max(0, min(len(messages), n + op))
        lst = messages[:n] if op else [Message.from_dict(m.to_dict()) for m in messages[:n]]
        fresh = SemanticDedup(Table(pool)).pack(
            lst, budget=budget, tokenizer=GIVEN, pinned_indices=PinPolicy().resolve(lst)
        )
        assert fingerprint(packer.pack(lst)) == fingerprint(fresh)


@pytest.mark.parametrize(
    "fallback",
    [FirstFit(), Importance(), Recency(contiguous=True), Recency(min_keep=3)],
    ids=repr,
)
@FEW
@given(data=pooled(), budget=st.integers(1, 250), pins=PIN_SPECS)
def test_every_fallback_keeps_the_invariants(
    fallback: Any, data: tuple[list[Message], list[list[float]]], budget: int, pins: Any
) -> None:
    messages, pool = data
    strategy = SemanticDedup(Table(pool), threshold=0.9, fallback=fallback)
    r = Packer(budget=budget, tokenizer=GIVEN, strategy=strategy, pin=pins).pack(messages)
    check_invariants(messages, r, pins=pins, tokenizer=GIVEN)
    assert duplicates(r) == oracle_duplicates(messages, pins, Table(pool).embed, 0.9)
    windowed = Packer(
        budget=budget,
        tokenizer=GIVEN,
        pin=pins,
        strategy=[MaxTurns(2), SemanticDedup(Table(pool), fallback=fallback)],
    )
    check_invariants(messages, windowed.pack(messages), pins=pins, tokenizer=GIVEN)


# ---------------------------------------------------------------- what takes part


def test_the_first_occurrence_survives() -> None:
    ms = [
        say("s", "system", "You are terse."),
        say("u1", "user", "Where is my order 1182?"),
        say("a1", "assistant", "It ships on Friday."),
        say("u2", "user", "where is   my ORDER 1182?"),  # the same after case and spaces
        say("u3", "user", "Where is my order 1182?"),
        say("u4", "user", "Can I change the delivery address?"),
    ]
    r = Packer(budget=1000, strategy=SemanticDedup(HashingEmbedder())).pack(ms)
    assert [m.id for m in r.kept] == ["s", "u1", "a1", "u4"]
    assert {d.id: d.reason for d in r.decisions if not d.kept} == {
        "u2": "duplicate",
        "u3": "duplicate",
    }


def test_tool_exchanges_pinned_and_empty_messages_are_never_duplicates() -> None:
    ms = [
        say("s", "system", "same words here"),
        say("u0", "user", "same words here"),  # repeats the pinned system prompt: kept
        say("c1", "assistant", [ToolUseBlock("t1", "lookup", {"q": 1})]),
        say("r1", "tool", [ToolResultBlock("t1", "same words here")]),
        say("c2", "assistant", [ToolUseBlock("t2", "lookup", {"q": 1})]),
        say("r2", "tool", [ToolResultBlock("t2", "same words here")]),
        say("i1", "user", [ImageBlock("https://example.com/cat.png")]),
        say("i2", "user", [ImageBlock("https://example.com/cat.png")]),
        say("u1", "user", [TextBlock("same words here")]),  # repeats u0: dropped
        say("u9", "user", "and one more question"),  # the current turn
    ]
    emb = Counting(HashingEmbedder())
    r = Packer(budget=5000, strategy=SemanticDedup(emb)).pack(ms)
    assert [d.id for d in r.decisions if not d.kept] == ["u1"]
    assert duplicates(r) == {8}


def test_messages_between_a_call_and_its_late_result_are_one_chunk_and_not_deduplicated() -> None:
    ms = [
        say("u0", "user", "hello there"),
        say("c1", "assistant", [ToolUseBlock("t1", "slow", {})]),
        say("u1", "user", "hello there"),  # inside the chunk c1 .. r1
        say("r1", "tool", [ToolResultBlock("t1", "done")]),
        say("u2", "user", "hello there"),
        say("u3", "user", "thanks"),  # the current turn (never a duplicate)
    ]
    r = Packer(budget=5000, strategy=SemanticDedup(HashingEmbedder())).pack(ms)
    assert duplicates(r) == {4}


def test_bad_chunks_keep_their_reasons() -> None:
    ms = [
        say("o", "tool", [ToolResultBlock("ghost", "hi")]),
        say("u0", "user", "hi"),
        say("c", "assistant", [ToolUseBlock("t9", "f", {})]),
        say("u1", "user", "hi"),
    ]
    r = Packer(budget=5000, strategy=SemanticDedup(HashingEmbedder())).pack(ms)
    # u1 is the current turn: kept even though it repeats u0 (it waited inside the
    # exchange, which was never answered, and is sent on its own)
    assert [d.reason for d in r.decisions] == ["orphan", "recent", "unanswered", "turn"]
    r = Packer(budget=5000, strategy=SemanticDedup(HashingEmbedder())).pack(
        [*ms, say("u2", "user", "bye")]
    )
    assert [d.reason for d in r.decisions] == [
        "orphan",
        "recent",
        "unanswered",
        "duplicate",
        "turn",
    ]


# ----------------------------------------------------------------- embedding work


def history(n: int) -> list[Message]:
    out = [say("sys", "system", "Be brief.")]
    out += [
        say(f"m{i}", "user" if i % 2 else "assistant", f"message {i} " + "a" * i) for i in range(n)
    ]
    return out


def test_a_repeated_pack_embeds_nothing_again() -> None:
    """convopack: 3 packs of the same 101 messages -> 101, 202, 303 embed() calls and no
    embed_batch. Here: each distinct text once, in batches, then nothing."""
    emb = Counting(HashingEmbedder())
    strategy = SemanticDedup(emb, threshold=0.9999)
    packer = Packer(budget=100_000, strategy=strategy)
    ms = history(100)
    for _ in range(3):
        packer.pack(ms)
        assert emb.texts == 101 and emb.embed_calls == 0 and emb.batch_calls == 1
    for _ in range(2):  # rebuilt Message objects every turn
        packer.pack([Message.from_dict(m.to_dict()) for m in ms])
    assert emb.texts == 101 and strategy.cache.embedded == 101
    # A fresh Packer (fresh table) sharing the strategy: the cache still knows the texts.
    Packer(budget=100_000, strategy=strategy).pack(ms)
    assert emb.texts == 101


def test_an_agent_loop_embeds_only_the_new_message() -> None:
    emb = Counting(HashingEmbedder())
    strategy = SemanticDedup(emb)
    packer = Packer(budget=400, strategy=strategy)
    ms = history(60)
    packer.pack(ms[:20])
    assert emb.texts == 20
    for n in range(21, len(ms) + 1):
        before = emb.texts
        packer.pack(ms[:n])
        assert emb.texts - before == 1
    assert strategy.cache.embedded == len(ms)


def test_a_shared_cache_is_used() -> None:
    cache = EmbeddingCache(Counting(HashingEmbedder()))
    a, b = SemanticDedup(cache), SemanticDedup(cache, threshold=0.5)
    assert a.cache is cache and b.cache is cache
    Packer(budget=1000, strategy=a).pack(history(10))
    Packer(budget=1000, strategy=b).pack(history(10))
    assert cache.embedded == 11


# -------------------------------------------------------------------- sync / async


class AsyncOnly:
    """A native async embedder (no sync method)."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.calls = 0

    async def aembed(self, text: str) -> list[float]:
        await asyncio.sleep(0)
        self.calls += 1
        return self.inner.embed(text)


async def test_pack_async_awaits_an_async_embedder_and_matches_pack() -> None:
    ms = history(40)
    emb = AsyncOnly()
    a = await Packer(budget=300, strategy=SemanticDedup(emb)).pack_async(ms)
    b = Packer(budget=300, strategy=SemanticDedup(HashingEmbedder())).pack(ms)
    c = await SemanticDedup(HashingEmbedder()).pack_async(
        ms, budget=300, pinned_indices=[0], tokenizer="approx"
    )
    assert emb.calls == 41
    assert fingerprint(a) == fingerprint(b) == fingerprint(c)


async def test_sync_pack_with_an_async_embedder_inside_a_loop_says_use_pack_async() -> None:
    packer = Packer(budget=300, strategy=SemanticDedup(AsyncOnly()))
    with pytest.raises(RuntimeError, match="pack_async"):
        packer.pack(history(5))
    assert (await packer.pack_async(history(5))).kept


def test_sync_pack_with_an_async_embedder_outside_a_loop_runs() -> None:
    r = Packer(budget=300, strategy=SemanticDedup(AsyncOnly())).pack(history(5))
    assert len(r.kept) == 6


async def test_pack_async_runs_a_sync_embedder_off_the_loop() -> None:
    emb = Counting(HashingEmbedder())
    await Packer(budget=300, strategy=SemanticDedup(emb)).pack_async(history(5))
    assert emb.threads and threading.get_ident() not in emb.threads


# ------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("threshold", [0, -0.1, 1.5, float("nan"), "0.9", True, None])
def test_bad_threshold(threshold: Any) -> None:
    with pytest.raises(ConfigError, match="threshold="):
        SemanticDedup(HashingEmbedder(), threshold=threshold)


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match="embedder="):
        SemanticDedup(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="fallback=MaxTurns"):
        SemanticDedup(HashingEmbedder(), fallback=MaxTurns(3))
    with pytest.raises(ConfigError, match="backend="):
        SemanticDedup(HashingEmbedder(), backend="gpu")  # type: ignore[arg-type]


def test_a_bad_vector_fails_and_the_next_pack_recovers() -> None:
    class Flaky:
        def __init__(self) -> None:
            self.bad = True

        def embed(self, text: str) -> list[float]:
            return [float("nan"), 1.0] if self.bad else [math.cos(len(text)), math.sin(len(text))]

    emb = Flaky()
    packer = Packer(budget=300, strategy=SemanticDedup(emb))
    with pytest.raises(ValueError, match="non-finite"):
        packer.pack(history(5))
    emb.bad = False
    assert len(packer.pack(history(5)).kept) == 6

"""SemanticDedup with messages that have no text (issue 8 #11): never a candidate, never
embedded, and a strategy or Packer reused after them keeps deciding like a fresh one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _packing_support import check_invariants, histories
from convomem.model import ImageBlock, Message, PinPolicy, TextBlock
from convomem.packing import Packer, PackResult
from convomem.recall import EmbeddingCache, HashingEmbedder, Vector
from convomem.strategies import SemanticDedup
from convomem.tokens import get_tokenizer

GIVEN = get_tokenizer("given")
VECTORS = st.lists(st.integers(-2, 2), min_size=3, max_size=3).map(lambda v: [float(x) for x in v])


class Table:
    """Text ``"v<k>"`` -> ``pool[k]``; any other text (a blank one) fails the test."""

    def __init__(self, pool: Sequence[Sequence[float]]) -> None:
        self.pool = [list(v) for v in pool]
        self.texts: list[str] = []

    def embed(self, text: str) -> list[float]:
        assert text.startswith("v"), f"embedded {text!r}"
        self.texts.append(text)
        return self.pool[int(text[1:])]


def fingerprint(r: PackResult) -> tuple[Any, ...]:
    return (
        [m.id for m in r.kept],
        [(d.index, d.kept, d.reason, d.tokens) for d in r.decisions],
        r.token_count,
    )


def textless(kind: str, i: int) -> Any:
    return {
        "image": [ImageBlock(f"https://example.com/{i}.png")],
        "blank": "  \n ",
        "empty": "",
        "image+space": [ImageBlock(f"https://example.com/{i}.png"), TextBlock(" ")],
    }[kind]


def test_a_reused_packer_survives_a_first_pack_of_images_only() -> None:
    """The reproducer: every later pack raised EmbeddingError (256 numbers vs 0)."""
    packer = Packer(budget=500, strategy=SemanticDedup(HashingEmbedder()), pin=())
    image = Message("u0", "user", content=[ImageBlock("https://example.com/cat.png")])
    assert [m.id for m in packer.pack([image]).kept] == ["u0"]
    history = [
        image,
        Message("u1", "user", content="Where is my order 1182?"),
        Message("a1", "assistant", content="It ships on Friday."),
        Message("u2", "user", content="where is my ORDER 1182?"),
        Message("u3", "user", content=[ImageBlock("https://example.com/cat.png")]),
    ]
    for n in range(2, len(history) + 1):
        r = packer.pack(history[:n])
        assert r.fits
    assert {d.id: d.reason for d in r.decisions if not d.kept} == {"u2": "duplicate"}
    # The same strategy in a fresh Packer, and the strategy alone, agree.
    again = SemanticDedup(HashingEmbedder()).pack(history, budget=500)
    assert fingerprint(again) == fingerprint(r)


class Spy(EmbeddingCache):
    """An EmbeddingCache that records the messages it is asked about."""

    asked: list[str]

    def vectors(self, messages: Sequence[Message], eligible: Any = None) -> list[Vector]:
        self.asked.extend(m.id for m in messages)
        return super().vectors(messages, eligible)


def test_text_less_messages_are_never_embedded_or_compared() -> None:
    table = Table([[1.0, 0.0, 0.0]])
    spy = Spy(table)
    spy.asked = []
    strategy = SemanticDedup(spy, threshold=0.9)
    history = [
        Message(f"m{i}", "user", 5, content=textless(kind, i))
        for i, kind in enumerate(("image", "blank", "empty", "image+space", "image"))
    ] + [Message("v", "user", 5, content="v0"), Message("w", "user", 5, content="v0")]
    history.append(Message("t", "user", 5, content=textless("image", 9)))  # the turn
    r = Packer(budget=500, tokenizer=GIVEN, strategy=strategy, pin=()).pack(history)
    assert spy.asked == ["v", "w"]  # not even asked for the text-less ones
    assert table.texts == ["v0"] and strategy.cache.embedded == 1
    assert [d.reason for d in r.decisions if not d.kept] == ["duplicate"]
    assert [m.id for m in r.dropped] == ["w"]


@st.composite
def mixed(draw: Any, prefix: str = "m") -> tuple[list[Message], list[list[float]]]:
    """Histories whose plain messages say ``v<k>`` or have no text at all."""
    pool = draw(st.lists(VECTORS, min_size=1, max_size=5))
    out = []
    for i, m in enumerate(draw(histories(max_size=20, prefix=prefix))):
        if isinstance(m.content, str):
            kind = draw(st.sampled_from(("text", "text", "image", "blank", "empty", "image+space")))
            k = draw(st.integers(0, len(pool) - 1))
            content = f"v{k}" if kind == "text" else textless(kind, i)
            m = m.replace(content=content, tokens=m.tokens)
        out.append(m)
    return out, pool


@settings(max_examples=40, deadline=None)
@given(
    a=mixed(),
    b=mixed(),
    budget=st.integers(1, 250),
    steps=st.lists(st.tuples(st.booleans(), st.integers(0, 20)), min_size=1, max_size=10),
    backend=st.sampled_from(("python", "numpy")),
)
def test_a_reused_strategy_with_text_less_messages_decides_like_a_fresh_one(
    a: tuple[list[Message], list[list[float]]],
    b: tuple[list[Message], list[list[float]]],
    budget: int,
    steps: list[tuple[bool, int]],
    backend: Any,
) -> None:
    """Prefixes of two conversations with colliding ids, interleaved, through one
    strategy (its finder and cache reused) and one Packer each: every pack equals a
    fresh strategy's, and only texts are ever embedded."""
    (ma, pool_a), (mb, _) = a, b
    # One pool for both: "v<k>" means the same vector in either conversation.
    mb = [
        m.replace(content=f"v{int(m.content[1:]) % len(pool_a)}", tokens=m.tokens)
        if isinstance(m.content, str) and m.content.startswith("v")
        else m
        for m in mb
    ]
    shared = SemanticDedup(Table(pool_a), threshold=0.9, backend=backend)
    packers = {False: Packer(budget=budget, tokenizer=GIVEN, strategy=shared),
               True: Packer(budget=budget, tokenizer=GIVEN, strategy=shared)}  # fmt: skip
    for which, cut in steps:
        msgs = (mb if which else ma)[:cut]
        fresh = SemanticDedup(Table(pool_a), threshold=0.9, backend=backend).pack(
            msgs, budget=budget, tokenizer=GIVEN, pinned_indices=PinPolicy().resolve(msgs)
        )
        r = packers[which].pack(msgs)
        check_invariants(msgs, r, pins=("system",), tokenizer=GIVEN)
        assert fingerprint(r) == fingerprint(fresh)
        alone = shared.pack(
            msgs, budget=budget, tokenizer=GIVEN, pinned_indices=PinPolicy().resolve(msgs)
        )
        assert fingerprint(alone) == fingerprint(fresh)
        for d in r.decisions:
            if d.reason == "duplicate":
                assert msgs[d.index].text().strip()


@pytest.mark.parametrize("backend", ["python", "numpy"])
def test_hashing_embedder_after_text_less_packs(backend: Any) -> None:
    """The issue's setup with both search backends and a growing agent loop."""
    strategy = SemanticDedup(HashingEmbedder(), backend=backend)
    packer = Packer(budget=2000, strategy=strategy, pin=())
    history: list[Message] = []
    for i in range(30):
        if i % 3 == 0:
            content: Any = textless(("image", "blank", "empty")[i % 9 // 3], i)
        else:
            content = f"status update number {i % 4}, nothing new"
        history.append(Message(f"m{i}", "user" if i % 2 else "assistant", content=content))
        r = packer.pack(history)
        fresh = SemanticDedup(HashingEmbedder(), backend=backend).pack(history, budget=2000)
        assert fingerprint(r) == fingerprint(fresh)
    assert strategy.cache.embedded == 4  # the four distinct status texts

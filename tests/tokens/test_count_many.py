"""Batch counting: ``count_many`` equals mapping ``count_message`` and tokenizes less.

The oracle is brute force: a message's count is its given ``tokens``, else a formula
over its countable text; the work a tokenizer does is modelled with a FIFO cache and a
per-object memo, exactly as documented.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from convomem.errors import TokenizerError
from convomem.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from convomem.tokens import (
    FLAT_BLOCK_TOKENS,
    IMAGE_TOKENS,
    PER_MESSAGE_TOKENS,
    ApproxTokenizer,
    BaseTokenizer,
    FunctionTokenizer,
    GivenTokenizer,
    WordsTokenizer,
)


def _sensitive(text: str) -> int:
    """A count that reacts to every character, so a wrongly shared count shows up."""
    return len(text) * 3 + sum(map(ord, text)) % 97


def oracle(m: Message) -> int:
    if m.tokens is not None:
        return m.tokens
    results = len(m.tool_result_ids())
    wire = 1 if not results else results + (len(m.blocks) > results)  # OpenAI's split
    return (
        _sensitive(m.countable_text())
        + PER_MESSAGE_TOKENS * wire
        + IMAGE_TOKENS * m.image_count()
        + FLAT_BLOCK_TOKENS * m.flat_cost_blocks()
    )


class Recording(BaseTokenizer):
    """Counts with ``_sensitive``; records each text it tokenizes (``batches`` for subclasses)."""

    name = "recording"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.singles: list[str] = []
        self.batches: list[list[str]] = []

    def count(self, text: str) -> int:
        self.singles.append(text)
        return _sensitive(text)


class Batching(Recording):
    """Overrides ``count_texts`` at class level, so ``count_many`` batches through it."""

    name = "batching"

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        self.batches.append(list(texts))
        return [_sensitive(t) for t in texts]


_ids = st.text("abc", min_size=1, max_size=3)
_small_text = st.text("ab ", max_size=4)
_blocks = st.one_of(
    st.builds(TextBlock, _small_text),
    st.builds(ImageBlock, st.sampled_from(["u", "v"])),
    st.builds(ToolUseBlock, _ids, st.sampled_from(["f", "g"]), st.sampled_from([{}, {"a": 1}])),
    st.builds(ToolResultBlock, _ids, _small_text, st.booleans()),
    st.builds(
        OpaqueBlock,
        st.sampled_from(["openai", "anthropic"]),
        st.sampled_from(
            [
                {"type": "input_audio", "input_audio": {"data": "A", "format": "wav"}},
                {"type": "thinking", "thinking": "ab", "signature": "s"},
                {"type": "redacted_thinking", "data": "x"},
                {"refusal": "a b"},
            ]
        ),
    ),
)
_messages = st.builds(
    lambda role, content, name, tokens: Message(
        role=role, content=content, name=name, tokens=tokens
    ),
    st.sampled_from(["user", "assistant", "tool"]),
    _small_text | st.lists(_blocks, max_size=2),
    st.sampled_from([None, "", "a"]),
    st.none() | st.none() | st.integers(0, 50),
)


def rebuilt(m: Message) -> Message:
    return Message.from_dict(m.to_dict())


@settings(max_examples=80)
@given(st.lists(_messages, max_size=14), st.data())
def test_count_many_equals_mapping_count_message(ms: list[Message], data: st.DataObject) -> None:
    # repeat some objects, and rebuild some: memo hits, cache hits and duplicates in one batch
    batch = [data.draw(st.sampled_from([m, rebuilt(m)])) for m in ms + ms[: len(ms) // 2]]
    tok = Batching()
    warm = data.draw(st.lists(st.sampled_from(ms), max_size=3)) if ms else []
    for m in warm:
        tok.count_message(rebuilt(m))
    warm_keys = {m.content_key for m in warm if m.tokens is None}
    before = tok.tokenizations

    got = tok.count_many(batch)

    assert got == [oracle(m) for m in batch]
    mapped = Recording()
    assert got == [mapped.count_message(m) for m in batch]
    misses = {m.content_key for m in batch if m.tokens is None} - warm_keys
    assert tok.tokenizations - before == len(misses)  # each distinct content once
    if misses:
        assert len(tok.batches) == 1  # in one batch
        assert len(tok.batches[0]) == len(misses)
    else:
        assert tok.batches == []
    # counts persist with the messages: nothing is tokenized again
    after = tok.tokenizations
    assert [tok.count_message(m) for m in batch] == got
    assert tok.count_many([rebuilt(m) for m in batch]) == got
    assert tok.tokenizations == after


@settings(max_examples=60)
@given(st.lists(_messages, max_size=10))
def test_non_batching_tokenizers_agree(ms: list[Message]) -> None:
    for make in (ApproxTokenizer, WordsTokenizer, lambda: FunctionTokenizer(len)):
        a, b = make(), make()
        assert a.count_many(ms) == [b.count_message(m) for m in ms]
        assert a.tokenizations == b.tokenizations
    tok = Recording()
    tok.count_many(ms)
    assert (
        len(tok.singles)
        == tok.tokenizations
        == len({m.content_key for m in ms if m.tokens is None})
    )


def test_count_many_takes_any_iterable() -> None:
    ms = [Message(role="user", content=f"m {i % 3}") for i in range(7)]
    tok = Batching()
    assert tok.count_many(iter(ms)) == [oracle(m) for m in ms]
    assert tok.count_many(m for m in ms) == [oracle(m) for m in ms]
    assert tok.count_many([]) == []
    assert tok.tokenizations == 3


def test_given_tokens_are_never_tokenized() -> None:
    tok = Batching()
    ms = [Message(role="user", content="long text " * 50, tokens=7) for _ in range(3)]
    assert tok.count_many(ms) == [7, 7, 7]
    assert tok.tokenizations == 0 and tok.batches == [] and tok.singles == []


def test_given_tokenizer_names_the_first_message_without_tokens() -> None:
    tok = GivenTokenizer()
    ms = [Message("a", "user", 3), Message("b", "user", content="x"), Message("c", "user")]
    with pytest.raises(TokenizerError, match=r"id='b'"):
        tok.count_many(ms)
    assert tok.tokenizations == 0 and tok._cache == {}
    assert tok.count_many(ms[:1]) == [3]


def test_a_failed_batch_changes_nothing() -> None:
    def picky(text: str) -> int:
        return -1 if text == "bad" else len(text)

    tok = FunctionTokenizer(picky, name="picky")
    ok = Message("ok", "user", content="fine")
    tok.count_message(ok)
    cache_before = dict(tok._cache)
    ms = [Message("x", "user", content="new"), Message("y", "user", content="bad")]
    with pytest.raises(TokenizerError, match=r"'picky' counted -1 tokens for message id='y'"):
        tok.count_many([ok, *ms])
    assert tok._cache == cache_before and tok.tokenizations == 1


class WrongLength(BaseTokenizer):
    name = "wrong-length"

    def count(self, text: str) -> int:
        return 1

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        return [1] * (len(texts) + 1)


class BadValues(BaseTokenizer):
    name = "bad-values"

    def count(self, text: str) -> int:
        return 1

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        return [1.5] * len(texts)  # type: ignore[list-item]


def test_a_batch_that_breaks_its_contract_is_rejected() -> None:
    ms = [Message("p", "user", content="a"), Message("q", "user", content="b")]
    with pytest.raises(TokenizerError, match=r"'wrong-length': count_texts returned .* for 2"):
        WrongLength().count_many(ms)
    with pytest.raises(TokenizerError, match=r"counted 1\.5 tokens for message id='p'"):
        BadValues().count_many(ms)


class OwnCountMessage(BaseTokenizer):
    name = "own"

    def count(self, text: str) -> int:
        return 1

    def count_message(self, message: Message) -> int:
        return 42 if message.id == "special" else 1


def test_a_subclass_count_message_is_honoured() -> None:
    ms = [Message("special", "user", content="a"), Message("plain", "user", content="a")]
    assert OwnCountMessage().count_many(ms) == [42, 1]


def test_default_count_texts_maps_count() -> None:
    tok = Recording()
    assert BaseTokenizer.count_texts(tok, ["ab", "c"]) == [_sensitive("ab"), _sensitive("c")]


class CacheModel(RuleBasedStateMachine):
    """count_message / count_many against a model of the memo and the FIFO cache."""

    @initialize(size=st.integers(0, 3), batching=st.booleans())
    def setup(self, size: int, batching: bool) -> None:
        self.tok: Recording = Batching(cache_size=size) if batching else Recording(cache_size=size)
        self.size = size
        self.cache: dict[tuple[Any, ...], int] = {}  # insertion order = eviction order
        self.memo: dict[int, int] = {}  # id(message object) -> count
        self.objects: list[Message] = []  # keeps ids unique
        self.work = 0

    def _obj(self, text: str, reuse: int) -> Message:
        same = [m for m in self.objects if m.content == text]
        if same and reuse:
            return same[reuse % len(same)]
        m = Message(role="user", content=text)
        self.objects.append(m)
        return m

    def _store(self, key: tuple[Any, ...], n: int) -> None:
        if self.size:
            if len(self.cache) >= self.size:
                del self.cache[next(iter(self.cache))]
            self.cache[key] = n

    @rule(text=st.sampled_from(["a", "b", "c", "d"]), reuse=st.integers(0, 2))
    def count_one(self, text: str, reuse: int) -> None:
        m = self._obj(text, reuse)
        assert self.tok.count_message(m) == oracle(m)
        if id(m) not in self.memo:
            if m.content_key not in self.cache:
                self.work += 1
                self._store(m.content_key, oracle(m))
            self.memo[id(m)] = oracle(m)

    @rule(
        texts=st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=6),
        reuse=st.integers(0, 2),
    )
    def count_batch(self, texts: list[str], reuse: int) -> None:
        ms = [self._obj(t, reuse + i) for i, t in enumerate(texts)]
        assert self.tok.count_many(ms) == [oracle(m) for m in ms]
        fresh: dict[tuple[Any, ...], int] = {}
        for m in ms:
            if id(m) in self.memo:
                continue
            if m.content_key in self.cache:
                self.memo[id(m)] = self.cache[m.content_key]
            else:
                fresh.setdefault(m.content_key, oracle(m))
        self.work += len(fresh)
        for key, n in fresh.items():
            self._store(key, n)
        for m in ms:
            self.memo.setdefault(id(m), oracle(m))

    @invariant()
    def work_is_exact(self) -> None:
        assert self.tok.tokenizations == self.work
        assert self.tok._cache == self.cache


CacheModel.TestCase.settings = settings(max_examples=40, stateful_step_count=25)
TestCacheModel = CacheModel.TestCase

"""One validation of what a tokenizer returns; counting never raises an untyped error."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import InvalidMessage, TokenizerError
from convomem.model import Message, ToolResultBlock, ToolUseBlock
from convomem.tokens import (
    ApproxTokenizer,
    FunctionTokenizer,
    TiktokenTokenizer,
    WordsTokenizer,
    checked_count,
    checked_count_many,
    get_tokenizer,
)
from convomem.tokens.base import scrub


class Custom:
    """A tokenizer that only follows the protocol and returns whatever it is told."""

    def __init__(self, value: Any, name: str = "custom") -> None:
        self.value = value
        self.name = name
        self.calls = 0

    def count(self, text: str) -> int:
        return self.value  # type: ignore[no-any-return]

    def count_message(self, message: Message) -> int:
        self.calls += 1
        return self.value  # type: ignore[no-any-return]

    def count_messages(self, messages: Iterable[Message]) -> int:
        return sum(self.count_message(m) for m in messages)


class Index:
    """An integer type that is not an int (numpy's int64 behaves like this)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __index__(self) -> int:
        return self.n

    def __repr__(self) -> str:  # stable test ids (parallel runs collect the same names)
        return f"Index({self.n})"


class MyInt(int):
    pass


M = Message("m7", "user", content="hello")

BAD = [-50, -1, 1.5, 3.0, None, "3", True, False, [1], Index(-2)]


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_checked_count_rejects_bad_counts(bad: Any) -> None:
    with pytest.raises(TokenizerError) as info:
        checked_count(Custom(bad, "mine"), M)  # type: ignore[arg-type]
    text = str(info.value)
    assert "'mine'" in text and "id='m7'" in text and repr(bad) in text
    assert isinstance(info.value, ValueError)


def test_a_huge_bad_value_is_shortened_in_the_error() -> None:
    with pytest.raises(TokenizerError) as info:
        checked_count(Custom("x" * 10_000), M)  # type: ignore[arg-type]
    assert len(str(info.value)) < 200 and "id='m7'" in str(info.value)


@pytest.mark.parametrize("good", [0, 7, MyInt(5), Index(3)], ids=repr)
def test_checked_count_accepts_integers_as_plain_ints(good: Any) -> None:
    n = checked_count(Custom(good), M)  # type: ignore[arg-type]
    assert type(n) is int and n == int(good.__index__())


@settings(max_examples=50)
@given(st.text(max_size=40), st.sampled_from(["approx", "words"]))
def test_checked_count_equals_count_message_for_a_sound_tokenizer(text: str, spec: str) -> None:
    tok = get_tokenizer(spec)
    m = Message(role="user", content=text)
    assert checked_count(tok, m) == tok.count_message(m)


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_checked_count_many_rejects_bad_counts_too(bad: Any) -> None:
    ms = [Message("a", "user", content="x"), M]
    with pytest.raises(TokenizerError, match=r"'custom' counted .* for message id='a'"):
        checked_count_many(Custom(bad), ms)  # type: ignore[arg-type]


class CustomMany(Custom):
    def __init__(self, answer: Any) -> None:
        super().__init__(1, "many")
        self.answer = answer

    def count_many(self, messages: list[Message]) -> Any:
        return self.answer


def test_checked_count_many_dispatch() -> None:
    ms = [Message("a", "user", content="one two"), Message("b", "user", content="three")]
    assert checked_count_many(WordsTokenizer(), ms) == [6, 5]
    assert checked_count_many(WordsTokenizer(), iter(ms)) == [6, 5]
    plain = Custom(3)
    assert checked_count_many(plain, ms) == [3, 3]  # type: ignore[arg-type]
    assert plain.calls == 2
    assert checked_count_many(CustomMany([4, MyInt(5)]), ms) == [4, 5]  # type: ignore[arg-type]
    with pytest.raises(TokenizerError, match=r"'many': count_many returned list \[4\] for 2"):
        checked_count_many(CustomMany([4]), ms)  # type: ignore[arg-type]
    with pytest.raises(TokenizerError, match=r"count_many returned int 4 for 2"):
        checked_count_many(CustomMany(4), ms)  # type: ignore[arg-type]
    with pytest.raises(TokenizerError, match=r"counted -1 tokens for message id='b'"):
        checked_count_many(CustomMany([1, -1]), ms)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-3, 2.5, None])
def test_a_base_tokenizer_subclass_is_checked_as_well(bad: Any) -> None:
    class Broken(ApproxTokenizer):
        name = "broken"

        def count(self, text: str) -> int:
            return bad  # type: ignore[no-any-return]

    tok = Broken()
    for call in (lambda: tok.count_message(M), lambda: tok.count_many([M])):
        with pytest.raises(TokenizerError, match=r"'broken' counted .* for message id='m7'"):
            call()
    assert tok.tokenizations == 0 and tok._cache == {}


# -- never an untyped error -------------------------------------------------------------

_any_text = st.text(
    st.characters() | st.sampled_from(["\ud800", "\udfff", "\ud83d", "\ude80"]), max_size=30
)


def _tokenizers() -> list[Any]:
    def utf8_bytes(text: str) -> int:
        return len(text.encode("utf-8"))  # raises UnicodeEncodeError on a lone surrogate

    return [
        ApproxTokenizer(),
        WordsTokenizer(),
        FunctionTokenizer(utf8_bytes),
        TiktokenTokenizer("cl100k_base"),
    ]


def test_lone_surrogates_count(no_network: None) -> None:
    for tok in _tokenizers():
        for text in ("a \ud800 b", "\udfff\ud800", "\ud83d\ude80"):
            assert tok.count(text) == tok.count(scrub(text)) >= 1
        try:
            m = Message("s", "user", content="a \ud800 b")
        except InvalidMessage:
            continue  # the model refuses lone surrogates; bare text is what is left to count
        assert tok.count_message(m) == tok.count_many([m])[0] >= 4


@settings(max_examples=60)
@given(_any_text)
def test_any_text_counts(text: str) -> None:
    utf8 = FunctionTokenizer(lambda t: len(t.encode("utf-8")))
    assert utf8.count(text) == len(scrub(text).encode("utf-8"))
    for tok in (ApproxTokenizer(), WordsTokenizer()):
        assert tok.count(text) >= 0


@settings(max_examples=40)
@given(_any_text)
def test_tiktoken_counts_lone_surrogates_as_replaced(text: str) -> None:
    tok = get_tokenizer("tiktoken:cl100k_base")
    assert tok.count(text) == tok.count(scrub(text))


def test_scrub_keeps_valid_text_and_joins_pairs() -> None:
    assert scrub("naïve 🚀") == "naïve 🚀"
    assert scrub("\ud83d\ude80") == "🚀"
    assert scrub("a\ud800b") == "a\ufffdb"


def _deep(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    root = node
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return root


def test_deep_nesting_is_a_typed_error() -> None:
    try:
        m = Message("deep", "assistant", content=[ToolUseBlock("c", "f", _deep(5000))])
    except InvalidMessage:
        return  # the model refuses it at construction: nothing left to count
    for tok in _tokenizers():
        with pytest.raises(TokenizerError, match=r"id='deep'.*nested too deeply"):
            tok.count_message(m)
        with pytest.raises(TokenizerError, match=r"id='deep'.*nested too deeply"):
            tok.count_many([Message("ok", "user", content="fine"), m])
        assert tok.tokenizations == 0 and tok._cache == {}  # a failed batch stores nothing


class Nested:
    """A message stand-in whose text and key recurse without end (what a cycle would do)."""

    id = "loop"
    tokens = None
    _counts: ClassVar[dict[int, int]] = {}  # a memo already there (a stand-in has no slot to set)
    content = ()

    @property
    def content_key(self) -> Any:
        return self.content_key

    def countable_text(self) -> str:
        return self.countable_text()

    def image_count(self) -> int:
        return 0


def test_recursion_in_key_or_text_is_a_typed_error() -> None:
    tok = ApproxTokenizer()
    with pytest.raises(TokenizerError, match=r"id='loop': content is nested too deeply"):
        tok.count_message(Nested())  # type: ignore[arg-type]
    with pytest.raises(TokenizerError, match=r"id='loop': content is nested too deeply"):
        tok._prepare(Nested())  # type: ignore[arg-type]


def test_deep_tool_result_text_counts() -> None:
    m = Message("r", "tool", content=[ToolResultBlock("c", "x" * 10_000)])
    assert ApproxTokenizer().count_message(m) == 2500 + 4

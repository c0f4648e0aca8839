"""Token counting: the built-in specs, offline BPE, and counting each message at most once."""

from __future__ import annotations

import math
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, MissingDependency, TokenizerError
from convomem.formats.openai import from_openai
from convomem.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from convomem.tokens import (
    BUILTIN_SPECS,
    FLAT_BLOCK_TOKENS,
    IMAGE_TOKENS,
    PER_MESSAGE_TOKENS,
    ApproxTokenizer,
    BaseTokenizer,
    FunctionTokenizer,
    GivenTokenizer,
    HFTokenizer,
    Tokenizer,
    WordsTokenizer,
    get_tokenizer,
)

SAMPLES = [
    "",
    "hello",
    "Hello, world! How are you today?",
    "  spaced   out\ttext\nwith lines  ",
    "naïve café — ünïcödé 🚀 emoji",
    "def f(x):\n    return x ** 2  # code",
    "a" * 1001,
]


def msg(text: str, role: str = "user", **kw: Any) -> Message:
    return Message(role=role, content=text, **kw)


# -- the built-in formulas --------------------------------------------------------------


@pytest.mark.parametrize("text", SAMPLES)
def test_words_formula(text: str) -> None:
    tok = WordsTokenizer()
    assert tok.count(text) == len(text.split())
    assert tok.count_message(msg(text)) == len(text.split()) + 4


@pytest.mark.parametrize("text", SAMPLES)
def test_approx_formula(text: str) -> None:
    tok = ApproxTokenizer()
    assert tok.count(text) == math.ceil(len(text) / 4)
    assert tok.count_message(msg(text)) == math.ceil(len(text) / 4) + 4


def test_seed_numbers() -> None:
    assert PER_MESSAGE_TOKENS == 4
    assert get_tokenizer("words").count_message(msg("one two three")) == 7
    assert get_tokenizer("approx").count_message(msg("abcdefghi")) == 3 + 4
    assert get_tokenizer("approx").count_message(msg("")) == 4


def test_images_are_charged() -> None:
    m = Message("m", "user", content=[TextBlock("abcd"), ImageBlock("http://x/a.png")])
    assert ApproxTokenizer().count_message(m) == 1 + 4 + IMAGE_TOKENS
    in_result = Message(
        "t", "tool", content=[ToolResultBlock("c", (TextBlock("ab"), ImageBlock("u")))]
    )
    assert ApproxTokenizer().count_message(in_result) == 1 + 4 + IMAGE_TOKENS


def test_given_trusts_tokens() -> None:
    tok = get_tokenizer("given")
    assert tok.count_message(Message("u1", "user", 30, content="x " * 500)) == 30
    assert tok.count_message(Message("u0", "user", 0)) == 0
    assert tok.count_messages([Message("a", "user", 3), Message("b", "assistant", 4)]) == 7


def test_given_without_tokens_names_the_id() -> None:
    tok = GivenTokenizer()
    with pytest.raises(TokenizerError, match=r"id='u7'") as info:
        tok.count_message(Message("u7", "user", content="hello"))
    assert isinstance(info.value, ValueError)
    assert "approx" in str(info.value)  # says what to do instead
    assert tok.tokenizations == 0
    assert tok.count("abcdefgh") == 2  # bare text is estimated like approx


def test_tool_blocks_are_counted() -> None:
    words = WordsTokenizer()
    call = Message(
        "a1",
        "assistant",
        content=[ToolUseBlock("c1", "lookup_order", {"order_id": "2824", "verbose": True})],
    )
    # name + '{"order_id": "2824", "verbose": true}' -> 1 + 4 words, plus the overhead
    assert words.count_message(call) == 1 + 4 + 4
    assert words.count_message(call) > words.count_message(Message("e", "assistant"))
    result = Message("t1", "tool", content=[ToolResultBlock("c1", "shipped on monday morning")])
    assert words.count_message(result) == 4 + 4
    approx = ApproxTokenizer()
    assert approx.count_message(call) == math.ceil(len(call.countable_text()) / 4) + 4
    raw_args = Message("a2", "assistant", content=[ToolUseBlock("c2", "f", "not json at all")])
    assert words.count_message(raw_args) == 1 + 4 + 4


def test_opaque_blocks_are_counted() -> None:
    words = WordsTokenizer()
    audio = OpaqueBlock(
        "openai", {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    )
    m = Message("a", "user", content=[TextBlock("listen to this"), audio])
    assert m.flat_cost_blocks() == 1
    assert words.count_message(m) == 3 + 4 + FLAT_BLOCK_TOKENS
    thinking = OpaqueBlock(
        "anthropic", {"type": "thinking", "thinking": "let me think twice", "signature": "s"}
    )
    t = Message("b", "assistant", content=[thinking, TextBlock("done")])
    assert words.count_message(t) == 5 + 4  # the thinking text, not its signature
    in_result = Message("r", "tool", content=[ToolResultBlock("c", (TextBlock("ok"), audio))])
    assert words.count_message(in_result) == 1 + 4 + FLAT_BLOCK_TOKENS
    unknown = OpaqueBlock("openai", {"type": "brand_new", "x": "y z"})
    u = Message("u", "user", content=[unknown])
    assert words.count_message(u) == len(u.countable_text().split()) + 4 > 4
    tuned = WordsTokenizer()
    tuned.flat_block_tokens = 10
    assert tuned.count_message(m) == 3 + 4 + 10
    assert tuned.count_many([m, in_result, t]) == [3 + 4 + 10, 1 + 4 + 10, 5 + 4]
    without = Message("a2", "user", content=[TextBlock("listen to this")])
    assert ApproxTokenizer().count_message(m) > ApproxTokenizer().count_message(without)


def test_name_is_counted() -> None:
    words = WordsTokenizer()
    assert words.count_message(msg("hi", name="maya")) == 2 + 4


def test_count_messages_sums() -> None:
    tok = WordsTokenizer()
    ms = [msg("a b"), msg("c"), Message("g", "user", 10)]
    assert tok.count_messages(ms) == (2 + 4) + (1 + 4) + 10
    assert tok.count_messages(iter(ms)) == tok.count_messages(ms)
    assert tok.count_messages([]) == 0


# -- Hugging Face tokenizer.json, built by the test -------------------------------------

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a tool call and its result enter the view together",
    "hello world, hello tokens",
]


@pytest.fixture(scope="module")
def hf_tokenizer_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers.models import BPE
    from tokenizers.pre_tokenizers import Whitespace
    from tokenizers.trainers import BpeTrainer

    raw = RawTokenizer(BPE(unk_token="[UNK]"))
    raw.pre_tokenizer = Whitespace()
    raw.train_from_iterator(CORPUS, trainer=BpeTrainer(vocab_size=80, special_tokens=["[UNK]"]))
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    raw.save(str(path))
    return path


def test_hf_counts_match_the_raw_tokenizer(hf_tokenizer_path: Path, no_network: None) -> None:
    from tokenizers import Tokenizer as RawTokenizer

    raw = RawTokenizer.from_file(str(hf_tokenizer_path))
    tok = get_tokenizer(f"hf:{hf_tokenizer_path}")
    assert isinstance(tok, HFTokenizer)
    assert tok.name == f"hf:{hf_tokenizer_path}"
    for text in [*CORPUS, "zebra xylophone quick", ""]:
        n = len(raw.encode(text, add_special_tokens=False).ids)
        assert tok.count(text) == n
        assert tok.count_message(msg(text)) == n + 4
    assert tok.count("the quick brown fox") < tok.count("zebra xylophone")  # really BPE


def test_hf_batches_and_lone_surrogates(hf_tokenizer_path: Path, no_network: None) -> None:
    from tokenizers import Tokenizer as RawTokenizer

    raw = RawTokenizer.from_file(str(hf_tokenizer_path))
    tok = HFTokenizer(str(hf_tokenizer_path))
    texts = [*CORPUS, "zebra xylophone quick", "", CORPUS[0]]
    one = HFTokenizer(str(hf_tokenizer_path))
    assert tok.count_many([msg(t) for t in texts]) == [one.count_message(msg(t)) for t in texts]
    assert tok.tokenizations == len(set(texts))
    assert tok.count_texts(texts) == [
        len(raw.encode(t, add_special_tokens=False).ids) for t in texts
    ]
    assert tok.count_texts(["the fox"]) == [one.count("the fox")]
    # the Rust side refuses a lone surrogate; it is counted as U+FFFD instead
    assert tok.count("the \ud800 fox") == one.count("the \ufffd fox")
    assert tok.count_texts(["the \ud800 fox", "dog"]) == [
        one.count("the \ufffd fox"),
        one.count("dog"),
    ]


def test_hf_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(TokenizerError, match="no such file") as info:
        get_tokenizer(f"hf:{missing}")
    assert "never downloads" in str(info.value)


def test_hf_unreadable_file(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not a tokenizer")
    with pytest.raises(TokenizerError, match=r"not a readable tokenizer\.json"):
        HFTokenizer(str(bad))


def test_hf_missing_dependency(monkeypatch: pytest.MonkeyPatch, hf_tokenizer_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(MissingDependency) as info:
        HFTokenizer(str(hf_tokenizer_path))
    assert info.value.extra == "hf"


# -- spec resolution ---------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["bogus", "tiktoken", "tiktoken:", "hf:", "Words", "gpt-4", ""])
def test_unknown_spec_lists_valid_ones(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        get_tokenizer(spec)
    assert isinstance(info.value, TokenizerError)
    text = str(info.value)
    assert repr(spec) in text
    for valid in BUILTIN_SPECS:
        assert valid in text


def test_spec_resolves_to_one_shared_instance() -> None:
    assert get_tokenizer("approx") is get_tokenizer("approx")
    assert get_tokenizer() is get_tokenizer("approx")
    assert isinstance(get_tokenizer("words"), WordsTokenizer)
    assert isinstance(get_tokenizer("given"), GivenTokenizer)
    for spec in ("given", "words", "approx"):
        tok = get_tokenizer(spec)
        assert isinstance(tok, Tokenizer)
        assert tok.name == spec
        assert repr(tok) == f"<{type(tok).__name__} {spec!r}>"


def test_concurrent_resolution_gives_one_instance() -> None:
    spec = "tiktoken:cl100k_base"
    seen: list[Tokenizer] = []
    threads = [threading.Thread(target=lambda: seen.append(get_tokenizer(spec))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(t) for t in seen}) == 1


def test_instances_and_functions() -> None:
    mine = WordsTokenizer()
    assert get_tokenizer(mine) is mine

    class Custom:
        name = "custom"

        def count(self, text: str) -> int:
            return 1

        def count_message(self, message: Message) -> int:
            return 2

        def count_messages(self, messages: Any) -> int:
            return 3

    custom = Custom()
    assert get_tokenizer(custom) is custom

    def letters(text: str) -> int:
        return sum(c.isalpha() for c in text)

    wrapped = get_tokenizer(letters)
    assert isinstance(wrapped, FunctionTokenizer)
    assert wrapped.name == "letters"
    assert wrapped.count_message(msg("ab1c")) == 3 + 4
    with pytest.raises(TokenizerError, match="tokenizer=42"):
        get_tokenizer(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 1.5, "3", None, True])
def test_function_tokenizer_rejects_bad_counts(bad: Any) -> None:
    tok = FunctionTokenizer(lambda text: bad, name="broken")
    with pytest.raises(TokenizerError, match=r"'broken' counted .* for message id='m9'") as info:
        tok.count_message(Message("m9", "user", content="x"))
    assert repr(bad) in str(info.value)
    with pytest.raises(TokenizerError, match=r"'broken' counted .* for a text"):
        tok.count("x")
    assert tok.tokenizations == 0 and tok._cache == {}


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_cache_size_validated(bad: Any) -> None:
    with pytest.raises(ConfigError, match=f"cache_size={bad!r}"):
        ApproxTokenizer(cache_size=bad)


def test_base_tokenizer_count_is_abstract() -> None:
    with pytest.raises(NotImplementedError):
        BaseTokenizer().count("x")


# -- each message tokenized at most once -------------------------------------------------


class CountingTokenizer(BaseTokenizer):
    """Counts characters and records every text it was asked to tokenize."""

    name = "counting"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.calls: list[str] = []

    def count(self, text: str) -> int:
        self.calls.append(text)
        return len(text)


def test_given_tokens_never_tokenized() -> None:
    tok = CountingTokenizer()
    m = Message("u1", "user", 30, content="a long text that would cost more than 30")
    for _ in range(3):
        assert tok.count_message(m) == 30
    assert tok.tokenizations == 0
    assert tok.calls == []


def test_each_message_tokenized_once() -> None:
    tok = CountingTokenizer()
    ms = [msg(f"message number {i}") for i in range(50)]
    first = tok.count_messages(ms)
    for _ in range(5):
        assert tok.count_messages(ms) == first
    assert tok.tokenizations == 50
    assert len(tok.calls) == 50


def test_rebuilt_messages_from_the_same_dicts_are_not_retokenized() -> None:
    dicts = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Check order 2824."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"id": "2824"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "shipped"},
    ]
    tok = CountingTokenizer()
    totals = {tok.count_messages(from_openai(dicts)) for _ in range(10)}
    assert len(totals) == 1
    assert tok.tokenizations == len(dicts)
    stored = [m.to_dict() for m in from_openai(dicts)]
    for _ in range(3):
        tok.count_messages([Message.from_dict(d) for d in stored])
    assert tok.tokenizations == len(dicts)


def test_one_count_per_tokenizer() -> None:
    m = msg("the same message")
    a, b = CountingTokenizer(), WordsTokenizer()
    assert a.count_message(m) == 16 + 4
    assert b.count_message(m) == 3 + 4  # a different tokenizer has its own count
    assert a.count_message(m) == 16 + 4
    assert (a.tokenizations, b.tokenizations) == (1, 1)


def test_cache_is_bounded_and_stays_correct() -> None:
    tok = CountingTokenizer(cache_size=2)
    texts = ["aa", "bbb", "cccc"]
    for _ in range(3):
        for t in texts:
            assert tok.count_message(msg(t)) == len(t) + 4  # fresh objects each time
    assert len(tok._cache) <= 2
    assert tok.tokenizations > 3  # evictions cost recounts, never wrong counts
    no_cache = CountingTokenizer(cache_size=0)
    m = msg("memo")
    for _ in range(3):
        no_cache.count_message(m)
    assert no_cache.tokenizations == 1  # the per-message memo still holds
    no_cache.count_message(msg("memo"))
    assert no_cache.tokenizations == 2


# A count function that reacts to every character, so a shared count shows up.
def _sensitive(text: str) -> int:
    return len(text) * 3 + sum(map(ord, text)) % 97


_ids = st.text("abc", min_size=1, max_size=3)
_small_text = st.text("ab ", max_size=4)
_blocks = st.one_of(
    st.builds(TextBlock, _small_text),
    st.builds(ImageBlock, st.sampled_from(["u", "v"])),
    st.builds(ToolUseBlock, _ids, st.sampled_from(["f", "g"]), st.sampled_from([{}, {"a": 1}])),
    st.builds(ToolResultBlock, _ids, _small_text, st.booleans()),
    st.builds(
        OpaqueBlock,
        st.just("openai"),
        st.sampled_from(
            [{"type": "file", "file": {"file_id": "f"}}, {"refusal": "no"}, {"refusal": "b"}]
        ),
    ),
)
_near_duplicates = st.builds(
    lambda role, content, name: Message(role=role, content=content, name=name),
    st.sampled_from(["user", "assistant", "tool"]),
    _small_text | st.lists(_blocks, max_size=2),
    st.sampled_from([None, "", "a"]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_near_duplicates, max_size=12), st.randoms(use_true_random=False))
def test_two_different_messages_never_share_a_count(ms: list[Message], rnd: Any) -> None:
    shared = FunctionTokenizer(_sensitive)
    order = ms * 2
    rnd.shuffle(order)
    for m in order:
        # rebuild half of the time, to exercise the content cache and not only the memo
        m2 = Message.from_dict(m.to_dict()) if rnd.random() < 0.5 else m
        results = len(m.tool_result_ids())
        wire = 1 if not results else results + (len(m.blocks) > results)  # OpenAI's split
        expected = (
            _sensitive(m.countable_text())
            + 4 * wire
            + IMAGE_TOKENS * m.image_count()
            + FLAT_BLOCK_TOKENS * m.flat_cost_blocks()
        )
        assert shared.count_message(m2) == expected
    assert shared.tokenizations == len({m.content_key for m in ms})

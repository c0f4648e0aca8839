"""recall.keys: which texts a message is embedded under, and who decides."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.model import Message
from convomem.recall import HashingEmbedder, RecallIndex
from convomem.recall.keys import (
    KINDS,
    MAX_FACTS,
    MAX_SENTENCES,
    MIN_WORDS,
    exchanges,
    fact_statements,
    keys_for,
    message_keys,
    sentences,
)

words = st.lists(st.sampled_from(["peanut", "oak", "I", "am", "a", "pharmacist"]), min_size=1)
sentence = st.tuples(words.map(" ".join), st.sampled_from([".", "!", "?", ";", "\n", ""]))


@given(parts=st.lists(sentence, min_size=1, max_size=20))
def test_sentences_are_the_parts_of_enough_words_when_there_are_several(
    parts: list[tuple[str, str]],
) -> None:
    text = " ".join(p + end for p, end in parts)
    pieces, words_so_far = [], []
    for p, end in parts:  # a part without an end runs on into the next one
        words_so_far.append(p + (end if end in ".!?;" else ""))
        if end:
            pieces.append(" ".join(words_so_far))
            words_so_far = []
    if words_so_far:
        pieces.append(" ".join(words_so_far))
    want = [p for p in pieces if len(p.split()) >= MIN_WORDS][:MAX_SENTENCES]
    assert sentences(text) == (want if len(pieces) > 1 else [])


def test_message_keys_are_the_text_first_then_distinct_others() -> None:
    text = "As a pharmacist, I am on my feet a lot. Can you find me good shoes?"
    assert message_keys(text, None, ("message",)) == [text]
    assert message_keys(text, "Hi there", KINDS) == [
        text,
        "As a pharmacist, I am on my feet a lot.",
        "Can you find me good shoes?",
        f"Hi there\n{text}",
        "my job is pharmacist",  # "As a pharmacist": the offline rules read a job
    ]
    assert message_keys("Thanks! See you.", None, KINDS) == ["Thanks! See you."]
    said = "Just so you know, I eat vegan. Any soup ideas?"
    assert message_keys(said, None, KINDS) == [
        said,
        "Just so you know, I eat vegan.",
        "Any soup ideas?",
        "my diet is vegan",
    ]
    assert message_keys(said, None, KINDS, role="assistant") == [
        said,
        "Just so you know, I eat vegan.",
        "Any soup ideas?",
    ]
    assert message_keys(said, None, ("message", "sentences", "exchange")) == [
        said,
        "Just so you know, I eat vegan.",
        "Any soup ideas?",
    ]


@pytest.mark.parametrize(
    ("text", "statements"),
    [
        ("I eat pescatarian, so no steak.", ["my diet is pescatarian"]),
        ("I left Initech and started at Vandelay Imports.", ["my employer is Vandelay Imports"]),
        ("I hate cilantro and I'm allergic to shellfish.",
         ["I am allergic to shellfish", "I dislike cilantro"]),
        ("I love jazz.", ["I like jazz"]),
        ("My gym locker is 214.", ["my gym locker is 214"]),
        ("Can you suggest a soup?", []),
    ],
)  # fmt: skip
def test_facts_are_said_plainly(text: str, statements: list[str]) -> None:
    assert sorted(fact_statements(text, None)) == sorted(statements)


def test_a_message_has_at_most_max_facts_fact_keys() -> None:
    text = " ".join(f"I love dish{i}." for i in range(MAX_FACTS + 3))
    assert fact_statements(text, None) == [f"I like dish{i}" for i in range(MAX_FACTS)]


def test_a_reply_pairs_with_the_latest_user_text_before_it() -> None:
    turns = [("assistant", "hello"), ("user", "q1"), ("assistant", "a1"), ("tool", "r1")]
    turns += [("user", "  "), ("assistant", "a2"), ("user", "q2")]
    assert exchanges(turns) == [None, None, "q1", "q1", None, "q1", None]


def test_the_embedder_declares_the_default_and_keys_overrides_it() -> None:
    assert keys_for(HashingEmbedder(), None) == ("message",)
    from convomem.recall.minilm import MiniLMEmbedder
    from convomem.recall.openai_embeddings import OpenAIEmbedder

    assert MiniLMEmbedder.recall_keys == OpenAIEmbedder.recall_keys == KINDS  # trained models
    assert keys_for(lambda text: [1.0], None) == KINDS
    assert keys_for(HashingEmbedder(), ["exchange", "message"]) == ("message", "exchange")
    for bad in ("message", ["sentences"], ["message", "words"], 3):
        with pytest.raises(ConfigError, match="keys="):
            keys_for(HashingEmbedder(), bad)
    with pytest.raises(ConfigError, match="keys="):
        RecallIndex("sqlite://", keys=["paragraphs"])


def test_a_fact_said_in_passing_is_found_by_its_sentence_key() -> None:
    """The whole text's vector is dominated by the request; the aside's own key is not."""
    aside = "I work as a pharmacist"
    text = (
        f"Can you suggest a weekend itinerary for the coast with hiking and seafood and a "
        f"museum and maybe a boat trip? {aside}. Also what should I pack for rain and wind?"
    )
    scores = {}
    for keys in (["message"], ["message", "sentences"]):
        with RecallIndex("sqlite://", keys=keys, vector_weight=1.0) as idx:
            idx.add([Message("m1", "user", content=text)], user_id="u", session_id="s")
            (hit,) = idx.search("work as a pharmacist", user_id="u", k=1)
            scores[len(keys)] = hit.similarity
    assert scores[2] is not None and scores[1] is not None and scores[2] > scores[1] + 0.2


def test_a_fact_the_message_implies_is_found_by_its_statement() -> None:
    """ "I eat vegan" never says "diet"; its fact key does, for the user's message only."""
    text = "Quick dinner question. Just so you know, I eat vegan. What takes under thirty minutes?"
    scores = {}
    for keys, role in (
        (["message", "sentences"], "user"),
        (list(KINDS), "assistant"),
        (list(KINDS), "user"),
    ):
        with RecallIndex("sqlite://", keys=keys, vector_weight=1.0) as idx:
            idx.add([Message("m1", role, content=text)], user_id="u", session_id="s")
            (hit,) = idx.search("what is my diet", user_id="u", k=1)
            scores[len(keys), role] = hit.similarity
    assert scores[2, "user"] == pytest.approx(scores[4, "assistant"])  # no fact key for a reply
    assert scores[4, "user"] > scores[2, "user"] + 0.2


def test_a_tool_call_without_text_is_recallable_by_its_arguments() -> None:
    """Nothing evicted is unrecallable: a bare tool call is indexed as its calls, and its
    exchange key pairs it with the request it serves."""
    from convomem.model import ToolUseBlock

    call = Message(
        "a1",
        "assistant",
        content=[ToolUseBlock("c1", "book_hotel", {"city": "Valparaiso", "nights": 3})],
    )
    ask = Message("u1", "user", content="Find me somewhere to stay on the coast.")
    with RecallIndex("sqlite://", keys=list(KINDS)) as idx:
        assert idx.add([ask, call], user_id="u", session_id="s") == 2
        (hit,) = idx.search("Valparaiso hotel booking", user_id="u", k=1)
        assert hit.message_id == "a1" and hit.kind == "assistant"
        assert hit.text == 'calls book_hotel({"city": "Valparaiso", "nights": 3})'
        assert idx.add([call], user_id="u", session_id="s") == 0  # the same text: known

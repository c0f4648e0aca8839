"""Where the tiers go: the profile in every context, each turn's update before its user
message, and a context that only grows between compactions (a provider's prompt cache).

- Between two contexts with no compaction in between, the previous context (OpenAI
  dicts) is an exact prefix of the new one, with the profile and recall on and a query
  per turn; the Anthropic request's ``system`` field is the same and its messages grow.
- The profile (the user's facts) is in every context, with or without a query.
- No snippet text twice in a context; an update leaves the view with its turn.
- A resumed memory sends the same log messages and the same profile (saved with the
  state of the last compaction); the updates made since that compaction are not kept
  across a resume (the newest turn's is made again).
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convomem import ConversationMemory, open_store
from convomem.recall import GuardedRecall, RecallIndex
from convomem.session.placement import PROFILE_ID, UPDATE_PREFIX, is_tier_message
from convomem.summaries.extractor import OfflineExtractor

FACTS = [
    "My name is Dana Okafor.",
    "I live in Accra.",
    "I am allergic to peanuts.",
    "Please never call me, email me instead.",
    "I moved from Accra to Kumasi.",
    "My dog Biscuit is a beagle.",
]
TOPICS = ["parcel", "refund", "warranty", "invoice", "delivery", "exchange", "coupon"]


def unhurried(index: RecallIndex) -> GuardedRecall:
    """The index with no search deadline: a busy test machine must not time recall out."""
    return GuardedRecall(index, deadline=None)


def turn_text(k: int, topic: str) -> str:
    return f"Question {k}: what about my {topic} number {1000 + k}, and the {topic} status?"


def run(
    budget: int, plan: list[tuple[int, int]], db: Any, session: str = "s"
) -> tuple[ConversationMemory, list[tuple[list[dict[str, Any]], dict[str, Any], int]]]:
    """A conversation of user turns (a fact or a topic, each answered), a context with a
    query after each user message; returns the memory and (openai, anthropic,
    compactions) per turn."""
    mem = ConversationMemory(
        budget,
        store=db.session(session, user_id="dana"),
        recall=unhurried(RecallIndex(db)),
        extractor=OfflineExtractor(),
    )
    mem.add("system", "You are a support agent for a shop.")
    out = []
    for k, (fact, topic) in enumerate(plan):
        said = FACTS[fact] if fact < len(FACTS) else turn_text(k, TOPICS[topic])
        mem.add("user", said)
        mem.flush()
        ctx = mem.context(query=said)
        anthropic = mem.context("anthropic", query=said)
        out.append((ctx, anthropic, mem.stats().compactions))
        mem.add("assistant", f"Noted, about {TOPICS[topic]} {1000 + k}: it is on its way.")
    return mem, out


plans = st.lists(
    st.tuples(st.integers(0, len(FACTS) + 4), st.integers(0, len(TOPICS) - 1)),
    min_size=5,
    max_size=45,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, budget=st.sampled_from([700, 1200, 2500]))
def test_a_context_only_grows_between_compactions(plan: list[tuple[int, int]], budget: int) -> None:
    with open_store("sqlite://") as db:
        _, turns = run(budget, plan, db)
    for (prev, prev_a, cp0), (new, new_a, cp1) in itertools.pairwise(turns):
        if cp1 != cp0:
            continue  # a compaction rewrites the prefix: the cache misses once
        assert new[: len(prev)] == prev
        assert new_a.get("system") == prev_a.get("system")
        assert new_a["messages"][: len(prev_a["messages"]) - 1] == prev_a["messages"][:-1]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, budget=st.sampled_from([700, 1200, 2500]))
def test_the_profile_is_in_every_context_and_no_snippet_twice(
    plan: list[tuple[int, int]], budget: int
) -> None:
    plan = [(0, 0), *plan]  # the name first: the profile has something to say
    with open_store("sqlite://") as db:
        mem, turns = run(budget, plan, db)
        for ctx, _, _ in turns:
            profile = [m for m in ctx if m["content"].startswith("What the user has told")]
            assert len(profile) == 1 and "Dana Okafor" in profile[0]["content"]
            lines = [
                line
                for m in ctx
                if m["role"] == "system"
                for line in m["content"].splitlines()
                if line.startswith("- [")
            ]
            assert len(lines) == len(set(lines))  # no snippet twice
        plain = mem.context("messages")  # no query: the profile all the same
        assert any(m.id == PROFILE_ID for m in plain)
        for i, m in enumerate(plain):
            if m.id.startswith(UPDATE_PREFIX):  # an update sits before its anchor
                anchor = m.id[len(UPDATE_PREFIX) :]
                assert anchor == "" or plain[i + 1].id == anchor


def test_an_update_is_made_once_per_turn_and_leaves_with_it() -> None:
    with open_store("sqlite://") as db:
        idx = unhurried(RecallIndex(db))
        old = ConversationMemory(600, store=db.session("old", user_id="dana"), recall=idx)
        for k in range(30):
            old.add("user", turn_text(k, "parcel"))
            old.add("assistant", f"Parcel {1000 + k} left the depot.")
        old.flush()
        mem = ConversationMemory(600, store=db.session("new", user_id="dana"), recall=idx)
        mem.add("user", "what about my parcel number 1003?")
        first = mem.context()
        searches = mem.stats().recall
        assert mem.context() == first  # the same turn: no new search, the same update
        assert mem.stats().recall == searches
        update = [m for m in mem.context("messages") if m.id.startswith(UPDATE_PREFIX)]
        assert len(update) == 1 and "1003" in update[0].text()
        for k in range(40):  # the turn leaves the view, and its update with it
            mem.add("assistant", f"Reply {k} about the weather in the harbour.")
            mem.add("user", f"And what about the harbour, day {k}?")
        assert all(m.id != update[0].id for m in mem.context("messages"))


def test_a_resumed_memory_sends_the_same_context(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    plan = [(0, 0), (1, 1), (9, 2), (2, 3), (9, 4), (4, 5)] + [(9, k % 7) for k in range(30)]
    with open_store(url) as db:
        mem, turns = run(900, plan, db)
        assert turns[-1][2] >= 1
        mem.flush()
        live = mem.context("messages")
    with open_store(url) as db:
        again = ConversationMemory(
            900,
            store=db.session("s", user_id="dana"),
            recall=unhurried(RecallIndex(db)),
            extractor=OfflineExtractor(),
        )
        resumed = again.context("messages")
    assert [m.id for m in resumed if not is_tier_message(m)] == [
        m.id for m in live if not is_tier_message(m)
    ]
    profile = [m.text() for m in live if m.id == PROFILE_ID]
    assert profile and [m.text() for m in resumed if m.id == PROFILE_ID] == profile

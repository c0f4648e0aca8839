"""HierarchicalMemory: the article's tiers, prompts and context; nothing lost on failure."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.compat import HierarchicalMemory, MemoryTier
from convomem.errors import ConfigError, InvalidMessage, SummarizerError
from convomem.model import Message
from convomem.summaries import Summary


class Reply:
    def __init__(self, content: str) -> None:
        self.content = content


class FakeChatModel:
    """Answers the article's two prompts: summaries, and the JSON profile."""

    def __init__(self, profile: object = None) -> None:
        self.prompts: list[str] = []
        self.profile = profile

    async def ainvoke(self, prompt: str) -> Reply:
        self.prompts.append(prompt)
        if prompt.startswith("Extract key information"):
            p = self.profile
            return Reply(p if isinstance(p, str) else json.dumps(p))
        return Reply(f"summary {len(self.prompts)}")


def say(i: int) -> tuple[str, str]:
    return f"question {i}", f"answer {i}"


async def feed(mem: HierarchicalMemory, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        await mem.add_exchange(*say(i))


def test_memory_tiers() -> None:
    assert [t.value for t in MemoryTier] == ["short_term", "mid_term", "long_term"]


def test_the_articles_flow_with_default_limits() -> None:
    profile = {
        "user_name": "Ada",
        "user_preferences": ["email updates"],
        "key_facts": ["order 1182", "plan: Pro"],
        "unresolved_issues": ["refund pending"],
    }
    llm = FakeChatModel(profile)
    mem = HierarchicalMemory(llm)  # short_term_limit=10, mid_term_limit=5
    asyncio.run(feed(mem, 10))
    assert llm.prompts == [] and len(mem.short_term) == 20
    asyncio.run(feed(mem, 1, start=10))  # 22 messages > 20: promote all but the last 6
    assert llm.prompts == [
        "Summarize the following conversation in 3-4 sentences:\n\n"
        + "\n".join(f"user: question {i}\nassistant: answer {i}" for i in range(8))
    ]
    assert mem.mid_term == ["summary 1"]
    assert [m["content"] for m in mem.short_term] == [t for i in (8, 9, 10) for t in say(i)]
    # Each promotion takes 8 exchanges; the 6th summary passes mid_term_limit=5.
    asyncio.run(feed(mem, 40, start=11))
    assert mem.calls == len(llm.prompts)
    assert llm.prompts[-1].startswith(
        "Extract key information from the following conversation summaries as JSON:\n"
    )
    assert mem.extractions == 1 and len(mem.mid_term) == 2
    assert mem.long_term == {
        "user_name": "Ada",
        "preferences": ["email updates"],
        "key_facts": ["order 1182", "plan: Pro"],
        "unresolved_issues": ["refund pending"],
    }
    context = mem.build_context()
    assert context.startswith(
        "[User Profile]\nName: Ada\nPreferences: email updates\nKey Facts:\n- order 1182\n"
        "- plan: Pro\nUnresolved Issues:\n- refund pending\n\n"
        "[Previous Conversation Summary]\n"
    )
    summaries, recent = context.split("\n\n[Recent Conversation]\n")
    assert summaries.endswith("\n---\n".join(mem.mid_term))
    assert recent == "\n".join(f"{m['role']}: {m['content']}" for m in mem.short_term)


def test_an_empty_memory_has_an_empty_context() -> None:
    assert HierarchicalMemory(None).build_context() == ""


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        assert previous is None  # a mid-term summary stands alone
        self.calls.append([m.text() for m in messages])
        return f"S{len(self.calls)}"


@settings(max_examples=60)
@given(short=st.integers(1, 6), mid=st.integers(0, 4), turns=st.integers(0, 40))
def test_every_message_is_verbatim_or_summarized_once(short: int, mid: int, turns: int) -> None:
    rec = Recorder()
    mem = HierarchicalMemory(rec, short_term_limit=short, mid_term_limit=mid)
    for i in range(turns):
        mem.add_exchange_sync(*say(i))
        assert len(mem.short_term) <= 2 * short
        assert len(mem.mid_term) <= mid
    everything = [t for i in range(turns) for t in say(i)]
    summarized = [t for call in rec.calls for t in call]
    verbatim = [m["content"] for m in mem.short_term]
    assert summarized + verbatim == everything
    assert all(call for call in rec.calls)  # never an empty summary
    # Mid-term holds the newest summaries; older ones were retired into the profile.
    made = [f"S{k}" for k in range(1, len(rec.calls) + 1)]
    assert mem.mid_term == made[len(made) - len(mem.mid_term) :]


def test_offline_profile_from_the_users_own_words() -> None:
    mem = HierarchicalMemory(None, short_term_limit=1, mid_term_limit=0)
    mem.add_exchange_sync("Hi, my name is Ada Lovelace. My order 1182 is late.", "Checking.")
    mem.add_exchange_sync("I prefer email updates, please.", "Noted.")
    mem.add_exchange_sync("Also ticket TCK-778 is still open.", "On it.")
    lt = mem.long_term
    assert lt["user_name"] == "Ada Lovelace"
    assert any("prefer email" in p for p in lt["preferences"])
    assert not any("my name" in p.lower() for p in lt["preferences"])
    assert "order 1182" in lt["key_facts"]
    assert lt["unresolved_issues"] == []  # unknown without a model: never invented
    assert mem.build_context().startswith("[User Profile]\nName: Ada Lovelace\n")


def test_a_non_json_answer_uses_the_extracted_facts_and_loses_nothing() -> None:
    llm = FakeChatModel("Sure! The user likes email.")
    mem = HierarchicalMemory(llm, short_term_limit=1, mid_term_limit=0)
    mem.add_exchange_sync("My order 1182 is late.", "Sorry.")
    mem.add_exchange_sync("ok", "ok")
    assert mem.degraded_extractions == 1 and isinstance(mem.last_error, SummarizerError)
    assert mem.mid_term == [] and "order 1182" in mem.long_term["key_facts"]


def test_json_in_a_code_fence_and_odd_values() -> None:
    fenced = (
        "```json\n"
        + json.dumps(
            {"user_preferences": "dark mode", "key_facts": [{"plan": "Pro"}, 3], "user_name": ""}
        )
        + "\n```"
    )
    llm = FakeChatModel(fenced)
    mem = HierarchicalMemory(llm, short_term_limit=1, mid_term_limit=0)
    mem.add_exchange_sync("a", "b")
    mem.add_exchange_sync("c", "d")
    lt = mem.long_term
    assert lt["preferences"] == ["dark mode"]
    assert lt["key_facts"] == ['{"plan": "Pro"}', "3"]
    assert lt["user_name"] is None and mem.degraded_extractions == 0


def test_repeated_facts_are_kept_once_newest_last() -> None:
    answers = iter(
        [
            {"key_facts": ["order 1182", "plan Pro"], "unresolved_issues": ["refund"]},
            {"key_facts": ["Order  1182"], "unresolved_issues": []},
        ]
    )

    class Model:
        def invoke(self, prompt: str) -> str:
            if prompt.startswith("Extract"):
                return json.dumps(next(answers))
            return "a summary"

    mem = HierarchicalMemory(Model(), short_term_limit=1, mid_term_limit=0)
    for i in range(3):
        mem.add_exchange_sync(*say(i))
    lt = mem.long_term
    assert lt["key_facts"] == ["plan Pro", "Order  1182"]
    assert lt["unresolved_issues"] == []  # replaced by the newest list, as in the article


def test_long_term_is_a_copy() -> None:
    mem = HierarchicalMemory(None, short_term_limit=1, mid_term_limit=0)
    mem.add_exchange_sync("My order 1182 is late.", "Sorry.")
    mem.add_exchange_sync("ok", "ok")
    mem.long_term["key_facts"].clear()
    mem.short_term.clear()
    assert mem.long_term["key_facts"] and mem.short_term


def test_a_failing_summarizer_keeps_short_term_and_retries() -> None:
    state = {"fail": True}

    def summarize(messages: Sequence[Message]) -> str:
        if state["fail"]:
            raise TimeoutError("down")
        return "late summary"

    mem = HierarchicalMemory(summarize, short_term_limit=1, mid_term_limit=5, fallback=False)
    mem.add_exchange_sync(*say(0))
    mem.add_exchange_sync(*say(1))
    assert mem.mid_term == [] and len(mem.short_term) == 4 and mem.failures == 1
    state["fail"] = False
    mem.add_exchange_sync(*say(2))
    assert mem.mid_term == ["late summary"]
    assert [m["content"] for m in mem.short_term] == list(say(2))


def test_the_default_fallback_marks_degraded_but_keeps_going() -> None:
    class Down:
        async def ainvoke(self, prompt: str) -> Reply:
            raise ConnectionError("no route")

    mem = HierarchicalMemory(Down(), short_term_limit=1, mid_term_limit=3)
    asyncio.run(feed(mem, 3))
    assert mem.fallbacks == 2 and len(mem.mid_term) == 2
    assert isinstance(mem.last_error, ConnectionError)


def test_bad_input_changes_nothing() -> None:
    mem = HierarchicalMemory(None)
    with pytest.raises(InvalidMessage, match="user_msg=5"):
        mem.add_exchange_sync(5, "x")  # type: ignore[arg-type]
    assert mem.short_term == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"short_term_limit": 0}, "short_term_limit=0"),
        ({"mid_term_limit": -1}, "mid_term_limit=-1"),
        ({"llm": object()}, "llm=<object"),
        ({"fallback": 3}, "fallback=3"),
    ],
)
def test_bad_options(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        HierarchicalMemory(**kwargs)

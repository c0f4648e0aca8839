import tracemalloc

import pytest

from convomem.compat import ConversationMemoryManager
from convomem.errors import ConfigError, InvalidMessage


def words(text: str) -> int:
    return len(text.split()) + 4


class TestConversationMemoryManager:
    def test_first_system_then_summary_then_recent_in_order(self) -> None:
        m = ConversationMemoryManager(max_tokens=40)
        m.add_message("system", "You are helpful.")  # 7
        m.add_message("user", "one two three four five six")  # 10
        m.add_message("assistant", "a b c d e f")  # 10
        m.add_message("system", "a later system note")  # not user/assistant: skipped
        m.add_message("user", "x y")  # 6
        m.set_summary("earlier talk")  # "Summary of previous conversation: earlier talk" = 10
        ctx = m.get_context_messages()
        assert ctx == [
            {"role": "system", "content": "You are helpful."},
            {"role": "system", "content": "Summary of previous conversation: earlier talk"},
            {"role": "assistant", "content": "a b c d e f"},
            {"role": "user", "content": "x y"},
        ]
        assert sum(words(d["content"]) for d in ctx) == 7 + 10 + 10 + 6 <= 40

    def test_stops_at_first_message_that_does_not_fit(self) -> None:
        m = ConversationMemoryManager(max_tokens=20)
        m.add_message("user", "tiny")  # 5: would fit, but the walk already stopped
        m.add_message("user", " ".join(["w"] * 12))  # 16: does not fit after the newest
        m.add_message("assistant", "a b c d")  # 8
        assert m.get_context_messages() == [{"role": "assistant", "content": "a b c d"}]

    def test_total_equal_to_max_fits(self) -> None:
        m = ConversationMemoryManager(max_tokens=10)
        m.add_message("user", "a b c d e f")  # 10
        assert len(m.get_context_messages()) == 1

    def test_system_is_kept_even_when_alone_over_budget(self) -> None:
        m = ConversationMemoryManager(max_tokens=5)
        m.add_message("system", "a b c d e f g")
        m.add_message("user", "hi")
        assert m.get_context_messages() == [{"role": "system", "content": "a b c d e f g"}]

    def test_no_system_no_summary(self) -> None:
        m = ConversationMemoryManager()
        assert m.get_context_messages() == []
        m.add_message("user", "hello")
        assert m.get_context_messages() == [{"role": "user", "content": "hello"}]

    def test_summary_replaced_by_a_later_call(self) -> None:
        m = ConversationMemoryManager()
        m.set_summary("first")
        m.set_summary("second")
        assert m.get_context_messages() == [
            {"role": "system", "content": "Summary of previous conversation: second"}
        ]

    def test_bad_input(self) -> None:
        with pytest.raises(ConfigError, match="max_tokens=0"):
            ConversationMemoryManager(0)
        m = ConversationMemoryManager()
        with pytest.raises(InvalidMessage, match="role='robot'"):
            m.add_message("robot", "x")
        with pytest.raises(InvalidMessage, match="content=None"):
            m.add_message("user", None)  # type: ignore[arg-type]
        with pytest.raises(InvalidMessage, match="summary_text=3"):
            m.set_summary(3)  # type: ignore[arg-type]
        assert m.get_context_messages() == []

    def test_oracle_on_random_histories(self) -> None:
        import random

        rng = random.Random(7)
        for _ in range(200):
            m = ConversationMemoryManager(max_tokens=rng.randint(1, 80))
            msgs = []
            for _ in range(rng.randint(0, 25)):
                role = rng.choice(["system", "user", "assistant", "tool"])
                content = " ".join("w" for _ in range(rng.randint(0, 12)))
                m.add_message(role, content)
                msgs.append((role, content))
            if rng.random() < 0.5:
                m.set_summary("s " * rng.randint(0, 5))
            # brute force: the longest suffix of user/assistant messages that fits
            head = [d for d in m.get_context_messages() if d["role"] == "system"]
            first_sys = next(((r, c) for r, c in msgs if r == "system"), None)
            expect_head = 1 if first_sys else 0
            ua = [(r, c) for r, c in msgs if r in ("user", "assistant")]
            used = sum(words(d["content"]) for d in head)
            best: list[tuple[str, str]] = []
            for k in range(len(ua) + 1):
                tail = ua[len(ua) - k :]
                if used + sum(words(c) for _, c in tail) <= m.max_tokens:
                    best = tail
                else:
                    break
            ctx = m.get_context_messages()
            assert len(head) >= expect_head
            assert [(d["role"], d["content"]) for d in ctx[len(head) :]] == best

    def test_handles_100k_messages_within_memory(self) -> None:
        def fill(n: int) -> ConversationMemoryManager:
            m = ConversationMemoryManager(max_tokens=4000)
            m.add_message("system", "You are a support agent for an online shop.")
            for i in range(n):
                role = "user" if i % 2 == 0 else "assistant"
                m.add_message(role, f"message number {i} about order {i}")
            return m

        ctx = fill(100_000).get_context_messages()
        assert ctx[0]["role"] == "system"
        assert ctx[-1]["content"] == "message number 99999 about order 99999"
        # Memory is linear in the messages: a tenth, traced, bounds the whole (tracing
        # 100,000 messages would take most of the test's time).
        tracemalloc.start()
        try:
            kept = fill(10_000)
            kept.get_context_messages()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak * 10 < 256 * 2**20

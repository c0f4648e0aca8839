"""to_openai never writes a message with nothing to send (the API rejects empty content).

A message made only of another provider's opaque blocks (Anthropic thinking, Responses
reasoning or hosted tool items) has no Chat Completions equivalent: it is left out, as
``to_anthropic`` leaves out what it cannot send; what else a message holds still goes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from convomem import ConversationMemory, Packer, to_anthropic, to_openai
from convomem.formats.anthropic import from_anthropic
from convomem.formats.openai_responses import from_responses
from convomem.model import Message, OpaqueBlock, TextBlock, ToolResultBlock, ToolUseBlock

THINKING = OpaqueBlock("anthropic", {"type": "thinking", "thinking": "hm", "signature": "s"})
REDACTED = OpaqueBlock("anthropic", {"type": "redacted_thinking", "data": "EmwK"})
REASONING = OpaqueBlock(
    "openai_responses",
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "x"}]},
)
SEARCH = OpaqueBlock(
    "openai_responses", {"type": "web_search_call", "id": "ws_1", "status": "completed"}
)
FOREIGN = (THINKING, REDACTED, REASONING, SEARCH)


def _empty(d: dict[str, Any]) -> bool:
    return d.get("content") in ([], "", None) and not d.get("tool_calls")


def test_a_message_of_foreign_opaque_blocks_is_left_out() -> None:
    msgs = [
        Message("u", "user", content="hi"),
        Message("r", "assistant", content=(REASONING,)),
        Message("s", "assistant", content=(SEARCH,)),
        Message("t", "assistant", content=(THINKING, REDACTED)),
        Message("a", "assistant", content=(THINKING, TextBlock("ok"))),
    ]
    assert to_openai(msgs) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    ]
    # consistent with the Anthropic side, which leaves out the Responses-only messages
    _, anthropic = to_anthropic(msgs)
    assert all(d["content"] for d in anthropic)


def test_from_responses_and_from_anthropic_round_to_sendable_chat() -> None:
    items = [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gA=="},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "k"}]},
    ]
    assert to_openai(from_responses(items)) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "k"}]},
    ]
    turns = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "a", "signature": "s"}]},
    ]
    assert to_openai(from_anthropic(turns)) == [{"role": "user", "content": "hi"}]


def test_tool_results_beside_foreign_blocks_still_go() -> None:
    call = Message("c", "assistant", content=(THINKING, ToolUseBlock("t1", "f", {})))
    result = Message("r", "user", content=(ToolResultBlock("t1", "42"), REASONING))
    out = to_openai([Message("u", "user", content="go"), call, result])
    assert out[1]["tool_calls"][0]["id"] == "t1" and "content" in out[1]
    assert out[2] == {"role": "tool", "tool_call_id": "t1", "content": "42"}
    assert len(out) == 3


_block = st.sampled_from([*FOREIGN, TextBlock("a"), TextBlock("b c")])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_block, min_size=1, max_size=4), min_size=1, max_size=8))
def test_no_empty_message_is_ever_written(contents: list[list[Any]]) -> None:
    msgs = [
        Message(f"m{i}", "assistant" if i % 2 else "user", content=tuple(c))
        for i, c in enumerate(contents)
    ]
    out = to_openai(msgs)
    assert not any(map(_empty, out))
    sendable = [c for c in contents if any(isinstance(b, TextBlock) for b in c)]
    assert len(out) == len(sendable)


def _conversation() -> list[Message]:
    msgs: list[Message] = [Message("sys", "system", content="Be brief.")]
    for i in range(30):
        msgs.append(Message(f"u{i}", "user", content=f"question {i} " + "word " * 20))
        msgs.append(Message(f"r{i}", "assistant", content=(FOREIGN[i % 4],)))
        msgs.append(Message(f"a{i}", "assistant", content=f"answer {i} " + "word " * 20))
    return msgs


def test_conversation_memory_context_openai_has_no_empty_message() -> None:
    mem = ConversationMemory(budget=600)
    for m in _conversation():
        mem.add_message(m)
        out = mem.context("openai")
        assert not any(map(_empty, out)), out


def test_packer_output_has_no_empty_message() -> None:
    msgs = _conversation()
    for budget in (200, 500, 5000):
        res = Packer(budget=budget).pack(msgs)
        out = to_openai(res.kept)
        assert not any(map(_empty, out))
        assert len(out) == sum(1 for m in res.kept if not all(b in FOREIGN for b in m.blocks))


def test_what_is_sent_never_costs_more_than_what_was_counted() -> None:
    from convomem.formats.openai import from_openai
    from convomem.tokens import get_tokenizer

    tok = get_tokenizer("approx")
    msgs = _conversation()
    for budget in (300, 900, 5000):
        res = Packer(budget=budget).pack(msgs)
        sent = to_openai(res.kept)
        left_out = [m for m in res.kept if all(b in FOREIGN for b in m.blocks)]
        cost = tok.count_messages(from_openai(sent))
        # the left-out messages are still charged: an over-estimate by exactly their cost
        assert cost == res.token_count - tok.count_messages(left_out)
        assert res.token_count <= budget

"""OpaqueBlock: provider blocks kept exactly, counted by their text or a flat estimate."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from convomem.errors import InvalidMessage
from convomem.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from convomem.model.values import thaw

THINKING = {"type": "thinking", "thinking": "Check the order first.", "signature": "sig=="}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
SEARCH = {
    "type": "search_result",
    "source": "https://kb.test/returns",
    "title": "Returns",
    "content": [{"type": "text", "text": "30 days."}, {"type": "text", "text": "Keep the box."}],
    "citations": {"enabled": True},
}
TEXT_DOC = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": "The grass is green."},
    "title": "Facts",
    "context": "From the wiki",
}
CONTENT_DOC = {
    "type": "document",
    "source": {"type": "content", "content": [{"type": "text", "text": "Part one."}]},
}
PDF_DOC = {
    "type": "document",
    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
    "title": "Invoice",
}
REFUSAL = {"type": "refusal", "refusal": "I can't help with that."}
AUDIO_IN = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
FILE = {"type": "file", "file": {"file_id": "file-abc"}}
SERVER_USE = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}


@pytest.mark.parametrize(
    ("provider", "data", "text", "flat"),
    [
        ("openai", REFUSAL, "I can't help with that.", False),
        ("openai", {"refusal": "No."}, "No.", False),  # the message-level field
        ("openai", AUDIO_IN, "", True),
        ("openai", FILE, "", True),
        ("openai", {"audio": {"id": "audio_1"}}, "", True),
        ("openai", {"type": "text", "text": "hi", "cache_control": {}}, "", False),
        ("anthropic", THINKING, "Check the order first.", False),
        ("anthropic", REDACTED, "", True),
        ("anthropic", SEARCH, "https://kb.test/returns\nReturns\n30 days.\nKeep the box.", False),
        ("anthropic", TEXT_DOC, "Facts\nFrom the wiki\nThe grass is green.", False),
        ("anthropic", CONTENT_DOC, "Part one.", False),
        ("anthropic", PDF_DOC, "", True),
        ("anthropic", {"type": "image", "source": {"type": "s3"}}, "", True),
        ("anthropic", SERVER_USE, "", False),
        # LangChain content items follow either provider's shapes.
        ("langchain", THINKING, "Check the order first.", False),
        ("langchain", REFUSAL, "I can't help with that.", False),
        ("langchain", REDACTED, "", True),
        ("langchain", AUDIO_IN, "", True),
        ("langchain", {"type": "reasoning", "reasoning": "hm"}, "", False),
        ("langchain", {"refusal": "No."}, "", False),  # not a field outside OpenAI
    ],
)
def test_text_and_flat_cost_by_kind(
    provider: str, data: dict[str, Any], text: str, flat: bool
) -> None:
    block = OpaqueBlock(provider, data)
    assert block.text() == text
    assert block.flat_cost is flat
    if flat:
        assert block.countable_text() == ""
    elif text:
        assert block.countable_text() == text
    else:  # a kind convomem does not read: counted by its JSON text, never as nothing
        assert block.countable_text() == json.dumps(data, ensure_ascii=False)


def test_unknown_kind_counts_its_json() -> None:
    block = OpaqueBlock("anthropic", SERVER_USE)
    assert block.kind == "server_tool_use"
    assert "web_search" in block.countable_text()
    assert OpaqueBlock("acme", {"type": "hologram", "x": 1}).countable_text() == (
        '{"type": "hologram", "x": 1}'
    )


def test_kind() -> None:
    assert OpaqueBlock("openai", REFUSAL).kind == "refusal"
    assert OpaqueBlock("openai", {"audio": {"id": "a"}}).kind == "audio"
    assert OpaqueBlock("anthropic", {"no_type": 1}).kind is None


def test_data_is_frozen_and_copied() -> None:
    data = json.loads(json.dumps(SEARCH))
    block = OpaqueBlock("anthropic", data)
    data["content"].append({"type": "text", "text": "later"})
    data["title"] = "changed"
    assert thaw(block.data) == SEARCH
    with pytest.raises(TypeError):
        block.data["title"] = "x"  # type: ignore[index]
    with pytest.raises(AttributeError):
        block.provider = "openai"  # type: ignore[misc]


def test_equality_and_hash_follow_the_json() -> None:
    a = OpaqueBlock("acme", {"type": "x", "v": 1})
    assert a == OpaqueBlock("acme", {"type": "x", "v": 1})
    assert hash(a) == hash(OpaqueBlock("acme", {"type": "x", "v": 1}))
    assert a != OpaqueBlock("acme", {"type": "x", "v": True})
    assert a != OpaqueBlock("acme", {"type": "x", "v": 1.0})
    assert a != OpaqueBlock("other", {"type": "x", "v": 1})
    assert a != TextBlock("x")


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: OpaqueBlock("", {}), "OpaqueBlock.provider"),
        (lambda: OpaqueBlock(3, {}), "OpaqueBlock.provider"),  # type: ignore[arg-type]
        (lambda: OpaqueBlock("x", [1]), "OpaqueBlock.data"),  # type: ignore[arg-type]
        (lambda: OpaqueBlock("x", {"s": {1}}), "OpaqueBlock.data['s']"),
        (lambda: OpaqueBlock("x", {"t": "\ud800"}), "OpaqueBlock.data['t']"),
    ],
)
def test_invalid_opaque_blocks(make: Any, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        make()
    assert info.value.field == field


def _message() -> Message:
    return Message(
        "a1",
        "assistant",
        content=[
            OpaqueBlock("anthropic", THINKING),
            OpaqueBlock("anthropic", REDACTED),
            TextBlock("Here it is."),
            ToolUseBlock("c1", "lookup", {"id": 1}),
        ],
    )


def test_message_counts_opaque_text_and_flat_blocks() -> None:
    m = _message()
    assert m.text() == "Check the order first.\nHere it is."
    assert m.countable_text() == 'Check the order first.\nHere it is.\nlookup\n{"id": 1}'
    assert m.flat_cost_blocks() == 1
    assert m.image_count() == 0
    results = Message(
        "t1",
        "tool",
        content=[
            ToolResultBlock(
                "c1",
                (
                    TextBlock("found"),
                    OpaqueBlock("anthropic", SEARCH),
                    OpaqueBlock("anthropic", PDF_DOC),
                    ImageBlock("https://x/y.png"),
                ),
            )
        ],
    )
    assert results.flat_cost_blocks() == 1 and results.image_count() == 1
    assert "Keep the box." in results.countable_text() and "Keep the box." in results.text()
    assert Message("u", "user", content="hi").flat_cost_blocks() == 0
    assert Message("u", "user", content=[TextBlock("hi")]).flat_cost_blocks() == 0


def test_content_key_and_equality_see_opaque_blocks() -> None:
    m = _message()
    other = m.replace(content=[OpaqueBlock("anthropic", {**THINKING, "thinking": "Else."})])
    assert m.content_key != other.content_key and m != other
    assert m == _message() and m.content_key == _message().content_key


def test_to_dict_from_dict_pickle_round_trip() -> None:
    m = _message()
    d = m.to_dict()
    assert d["content"][0] == {"type": "opaque", "provider": "anthropic", "data": THINKING}
    assert type(d["content"][0]["data"]) is dict
    assert Message.from_dict(json.loads(json.dumps(d))) == m
    assert pickle.loads(pickle.dumps(m)) == m
    with pytest.raises(InvalidMessage) as info:
        Message.from_dict({**d, "content": [{"type": "opaque", "data": {}}]})
    assert info.value.field == "content[0].provider"
    with pytest.raises(InvalidMessage) as info:
        Message.from_dict({**d, "content": [{"type": "opaque", "provider": "p", "data": 5}]})
    assert info.value.field == "content[0].data"


# -- Responses API parts (provider "openai_responses") ----------------------------------

PDF_B64 = "data:application/pdf;base64," + "JVBERi0xLjQK" * 2000
R_REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Look up the order."}],
    "content": [{"type": "reasoning_text", "text": "Then refund."}],
    "encrypted_content": "gAAAAA" * 1000,
}
R_ENCRYPTED = {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gA" * 3000}


@pytest.mark.parametrize(
    ("data", "text", "flat"),
    [
        ({"type": "refusal", "refusal": "Not that."}, "Not that.", False),
        ({"type": "input_file", "file_data": PDF_B64, "filename": "a.pdf"}, "", True),
        ({"type": "input_file", "file_id": "file-abc"}, "", True),
        ({"type": "input_file", "file_url": "https://x.test/a.pdf"}, "", True),
        ({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}, "", True),
        ({"type": "input_image", "file_id": "file-img", "detail": "auto"}, "", True),
        ({"type": "image_generation_call", "id": "ig_1", "result": "iVBOR" * 500}, "", True),
        (R_REASONING, "Look up the order.\nThen refund.", False),
        (R_ENCRYPTED, "", True),
    ],
)
def test_responses_parts_count_their_text_or_a_flat_cost(
    data: dict[str, Any], text: str, flat: bool
) -> None:
    block = OpaqueBlock("openai_responses", data)
    assert block.text() == text
    assert block.flat_cost is flat
    assert block.countable_text() == text  # never the JSON (a base64 PDF, encrypted bytes)


def test_a_base64_pdf_costs_what_an_image_costs() -> None:
    from convomem.tokens import FLAT_BLOCK_TOKENS, PER_MESSAGE_TOKENS, get_tokenizer

    tok = get_tokenizer("approx")
    pdf = OpaqueBlock("openai_responses", {"type": "input_file", "file_data": PDF_B64})
    message = Message("m", "user", content=(TextBlock("Read this."), pdf))
    alone = Message("n", "user", content=(TextBlock("Read this."),))
    assert tok.count_message(message) - tok.count_message(alone) == FLAT_BLOCK_TOKENS
    assert tok.count_message(alone) == tok.count("Read this.") + PER_MESSAGE_TOKENS


def test_an_unknown_responses_item_still_counts_its_json() -> None:
    data = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    assert OpaqueBlock("openai_responses", data).countable_text() == json.dumps(data)

"""Oversized tool results, reduced: head and tail kept, JSON cut on element boundaries,
under the limit, the original untouched (``model.reduce_results``)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.model import (
    REDUCED_KEY,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    reduce_results,
    result_limit,
)
from convomem.tokens import get_tokenizer

APPROX = get_tokenizer("approx")
MARKER = re.compile(r"\[… ([\d,]+) (?:of ([\d,]+) )?(items|lines|characters|more items)")


def tool(text: Any, mid: str = "t1", **kw: Any) -> Message:
    return Message(mid, "tool", content=[ToolResultBlock("c1", text)], **kw)


def rows(n: int) -> list[dict[str, Any]]:
    return [{"sku": f"SKU-{i:05d}", "name": f"widget {i}", "qty": i * 7 % 300} for i in range(n)]


def result_text(m: Message) -> str:
    (block,) = [b for b in m.blocks if isinstance(b, ToolResultBlock)]
    return block.text()


def test_a_json_list_keeps_its_first_and_last_items_and_says_how_many_went() -> None:
    items = rows(215)
    m = tool(json.dumps(items))
    r = reduce_results(m, 1000, APPROX.count)
    got = json.loads(result_text(r))  # still JSON
    marker = [x for x in got if isinstance(x, str)]
    assert len(marker) == 1 and "the full result is message 't1'" in marker[0]
    at = got.index(marker[0])
    head, tail = got[:at], got[at + 1 :]
    assert head == items[: len(head)] and tail == items[len(items) - len(tail) :]
    assert head and tail  # both ends, whole items
    n = MARKER.search(marker[0])
    assert n is not None and int(n[1].replace(",", "")) == 215 - len(head) - len(tail)
    assert n[2] == "215" and n[3] == "items"
    assert APPROX.count(result_text(r)) <= 1000
    assert (r.id, r.role, r.tool_result_ids()) == ("t1", "tool", ["c1"])
    info = r.metadata[REDUCED_KEY]
    assert info == {"tokens": APPROX.count(m.countable_text()), "limit": 1000}
    assert m.content[0].content == json.dumps(items)  # the original is untouched


def test_an_object_keeps_its_keys_and_cuts_its_large_values() -> None:
    value = {"total": 500, "items": rows(500), "note": "x " * 3000, "page": 1}
    m = tool(json.dumps(value, indent=2))
    r = reduce_results(m, 800, APPROX.count)
    text = result_text(r)
    got = json.loads(text)
    assert list(got) == ["total", "items", "note", "page"]
    assert got["total"] == 500 and got["page"] == 1
    assert got["items"][0] == value["items"][0] and got["items"][-1] == value["items"][-1]
    assert "characters left out" in got["note"] and got["note"].startswith("x x")
    assert "\n  " in text  # indented as it was
    assert APPROX.count(text) <= 800


def test_text_keeps_whole_lines_from_both_ends() -> None:
    lines = [f"line {i}: " + "word " * 10 for i in range(600)]
    r = reduce_results(tool("\n".join(lines)), 500, APPROX.count)
    out = result_text(r).split("\n")
    (k,) = [i for i, line in enumerate(out) if line.startswith("[…")]
    assert out[:k] == lines[:k] and out[k + 1 :] == lines[len(lines) - len(out) + k + 1 :]
    assert f"{600 - len(out) + 1:,} lines left out" in out[k]
    assert APPROX.count(result_text(r)) <= 500


def test_one_long_line_is_cut_between_words() -> None:
    words = [f"w{i}" for i in range(5000)]
    r = reduce_results(tool(" ".join(words)), 300, APPROX.count)
    text = result_text(r)
    head, _, rest = text.partition(" [… ")
    tail = rest.partition(" …] ")[2]
    assert head.split() == words[: len(head.split())]
    assert tail.split() == words[len(words) - len(tail.split()) :]
    assert APPROX.count(text) <= 300


def test_what_is_not_reduced_is_the_same_object() -> None:
    big = tool("x " * 5000)
    assert reduce_results(big, 10_000, APPROX.count) is big  # fits
    vip = tool("x " * 5000, priority=2)
    assert reduce_results(vip, 100, APPROX.count) is vip  # priority 2 is exempt
    short = tool("ok", tokens=5000)  # a large given count, a text that cannot shrink
    assert reduce_results(short, 100, APPROX.count) is short
    plain = Message("u", "user", content="y " * 5000)
    assert reduce_results(plain, 100, APPROX.count) is plain  # not a tool result
    r = reduce_results(big, 100, APPROX.count)
    assert reduce_results(r, 100, APPROX.count) is r  # a reduced copy fits already


def test_a_given_count_is_scaled_with_the_text() -> None:
    m = tool(json.dumps(rows(300)), tokens=9000)
    r = reduce_results(m, 2000, APPROX.count)
    assert r.tokens is not None and r.tokens < 9000
    share = len(result_text(r)) / len(result_text(m))
    assert abs(r.tokens - 9000 * share) <= 9000 * 0.01 + 10
    assert r.metadata[REDUCED_KEY]["tokens"] == 9000


def test_each_result_of_a_message_is_measured_on_its_own() -> None:
    blocks = [ToolResultBlock("a", "small"), ToolResultBlock("b", "z " * 4000)]
    m = Message("r", "user", content=[*blocks, TextBlock("Here is what I found.")])
    r = reduce_results(m, 500, APPROX.count)
    assert r.blocks[0] == blocks[0] and r.blocks[2] == TextBlock("Here is what I found.")
    assert APPROX.count(r.blocks[1].text()) <= 500 < APPROX.count(blocks[1].text())
    parts = ToolResultBlock("c", (TextBlock("q " * 4000), ImageBlock("https://x/y.png")))
    r = reduce_results(Message("p", "tool", content=[parts]), 500, APPROX.count)
    (block,) = r.blocks
    assert isinstance(block, ToolResultBlock) and block.content[1] == ImageBlock("https://x/y.png")
    assert APPROX.count(block.text()) <= 500


@st.composite
def results(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["list", "object", "lines", "words", "nested"]))
    n = draw(st.integers(1, 400))
    if kind == "list":
        return json.dumps(rows(n), indent=draw(st.sampled_from([None, 2])))
    if kind == "object":
        return json.dumps({"count": n, "rows": rows(n), "text": "t " * draw(st.integers(0, 900))})
    if kind == "nested":
        return json.dumps(
            [{"id": i, "tags": [f"t{k}" for k in range(n)]} for i in range(n // 4 + 1)]
        )
    if kind == "lines":
        return "\n".join(f"{i}: " + "entry " * draw(st.integers(0, 12)) for i in range(n * 3))
    return " ".join(f"w{i}" for i in range(n * 20))


@settings(max_examples=150, deadline=None)
@given(text=results(), limit=st.integers(40, 3000))
def test_a_reduced_result_fits_the_limit_and_keeps_its_form(text: str, limit: int) -> None:
    m = tool(text)
    r = reduce_results(m, limit, APPROX.count)
    full = APPROX.count(text)
    if r is m:
        assert full <= limit or len(text) < 24
        return
    out = result_text(r)
    assert APPROX.count(out) <= limit < full
    assert (r.id, r.role, r.tool_result_ids()) == (m.id, m.role, m.tool_result_ids())
    assert "[…" in out or "…" in json.loads(out)  # it says something was left out
    if text.lstrip()[:1] in "[{":
        json.loads(out)  # still JSON


@pytest.mark.parametrize(
    ("value", "want"),
    [(0.5, 500), (1.0, 1000), (0.0001, 1), (250, 250), (None, None)],
)
def test_result_limit_is_a_share_or_tokens(value: Any, want: int | None) -> None:
    assert result_limit(value, 1000) == want


@pytest.mark.parametrize("value", [0.0, 1.5, -3, 0, True, "half", float("nan")])
def test_a_bad_result_limit_names_the_option(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^result_limit="):
        result_limit(value, 1000)

"""pack_openai / pack_anthropic: the remembered dicts never change an answer, only its cost;
every Anthropic request emitted is valid."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, InvalidMessage
from convomem.formats.anthropic import from_anthropic
from convomem.formats.openai import from_openai, order_tool_results, to_openai
from convomem.model import Message, ToolResultBlock, ToolUseBlock
from convomem.packing import Packer, PackResult
from convomem.strategies import FirstFit, Importance, Recency
from convomem.tokens import ApproxTokenizer

TEXTS = ("hi", "thanks!", "ok", "please check order 42 again", "done " * 30)


def fingerprint(r: PackResult) -> tuple[Any, ...]:
    return (
        [m.id for m in r.kept],
        [(d.index, d.id, d.kept, d.reason, d.tokens) for d in r.decisions],
        r.token_count,
        r.fits,
    )


# ------------------------------------------------------------------------ conversations


@st.composite
def openai_dicts(draw: Any, max_size: int = 16) -> list[dict[str, Any]]:
    """Chat Completions histories: repeated texts (ids by occurrence), parallel calls,
    results in any order, orphans, unanswered calls, extra keys holding numbers."""
    out: list[dict[str, Any]] = []
    open_calls: list[str] = []
    calls = 0
    if draw(st.booleans()):
        out.append({"role": "system", "content": "be brief"})
    for _ in range(draw(st.integers(0, max_size))):
        kind = draw(st.sampled_from(("user", "user", "assistant", "call", "result", "ghost")))
        if kind == "call":
            ids = [f"c{calls + k}" for k in range(draw(st.integers(1, 2)))]
            calls += len(ids)
            open_calls += ids
            tc = [
                {
                    "id": c,
                    "type": "function",
                    "function": {"name": "f", "arguments": f'{{"q": {len(c)}}}'},
                }
                for c in ids
            ]
            out.append({"role": "assistant", "content": None, "tool_calls": tc})  # fmt: skip
        elif kind == "result" and open_calls:
            c = open_calls.pop(draw(st.integers(0, len(open_calls) - 1)))
            out.append({"role": "tool", "tool_call_id": c, "content": draw(st.sampled_from(TEXTS))})
        elif kind == "ghost":
            out.append({"role": "tool", "tool_call_id": "nobody", "content": "?"})
        else:
            role = "assistant" if kind == "assistant" else "user"
            d: dict[str, Any] = {"role": role, "content": draw(st.sampled_from(TEXTS))}
            if draw(st.integers(0, 4)) == 0:
                d["x_meta"] = draw(st.sampled_from((1, 1.0, True, [1, {"k": 0}])))
            out.append(d)
    return out


@st.composite
def anthropic_dicts(draw: Any, max_size: int = 16) -> list[dict[str, Any]]:
    """Messages API histories that the API accepts as input (each call answered in the
    next user message, or not at all), plus ghosts, repeats and numbers in tool input."""
    out: list[dict[str, Any]] = []
    calls = 0
    for _ in range(draw(st.integers(0, max_size))):
        kind = draw(st.sampled_from(("user", "user", "assistant", "call", "ghost")))
        if kind == "call":
            ids = [f"t{calls + k}" for k in range(draw(st.integers(1, 3)))]
            calls += len(ids)
            blocks: list[dict[str, Any]] = [{"type": "text", "text": "let me look"}]
            blocks = blocks[: draw(st.integers(0, 1))]
            for c in ids:
                value = draw(st.sampled_from((1, True, 1.0, "1", [1])))
                blocks.append({"type": "tool_use", "id": c, "name": "f", "input": {"v": value}})
            out.append({"role": "assistant", "content": blocks})
            answered = draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids)))
            if answered:
                results: list[dict[str, Any]] = [
                    {
                        "type": "tool_result",
                        "tool_use_id": c,
                        "content": draw(st.sampled_from(TEXTS)),
                    }
                    for c in answered
                ]
                if draw(st.booleans()):
                    results.append({"type": "text", "text": "and also this"})
                out.append({"role": "user", "content": results})
        elif kind == "ghost":
            out.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "nobody", "content": "?"}]})  # fmt: skip
        else:
            role = "assistant" if kind == "assistant" else "user"
            text = draw(st.sampled_from(TEXTS))
            content: Any = text if draw(st.booleans()) else [{"type": "text", "text": text}]
            out.append({"role": role, "content": content})
    return out


def mutate(draw: Any, items: list[dict[str, Any]], in_place: bool = True) -> str:
    """Change the list the way callers do, editing old dicts in place (or, with
    ``in_place=False``, editing new copies of them); returns what was done."""
    ops = ["append", "append", "same", "truncate", "rebuild", "edit", "nested", "retype"]
    op = draw(st.sampled_from(ops))
    if not in_place and op in ("edit", "nested", "retype"):
        items[:] = copy.deepcopy(items)
    if op == "truncate" and items:
        del items[draw(st.integers(0, len(items) - 1)) :]
    elif op == "rebuild":
        items[:] = copy.deepcopy(items)  # equal dicts, new objects
    elif op == "edit" and items:
        d = items[draw(st.integers(0, len(items) - 1))]
        if isinstance(d.get("content"), str):
            d["content"] += " (edited)"  # the same dict object, new content
        else:
            d["x_meta"] = "edited"
    elif op in ("nested", "retype") and items:
        d = items[draw(st.integers(0, len(items) - 1))]
        for part in (d.get("tool_calls") or []) + [
            b for b in (d.get("content") if isinstance(d.get("content"), list) else [])
        ]:
            if op == "nested" and "function" in part:
                part["function"]["arguments"] = '{"q": "changed"}'
            elif "input" in part:
                v = part["input"].get("v")
                part["input"]["v"] = True if v == 1 and v is not True else 1  # 1 <-> True
            elif op == "retype" and part.get("type") == "text":
                part["text"] += "!"
        if "x_meta" in d and op == "retype":
            v = d["x_meta"]
            d["x_meta"] = 1.0 if v is True else True if v == 1 else 1
    return op


STRATEGIES: tuple[Callable[[], Any], ...] = (
    lambda: Recency(),
    lambda: Recency(contiguous=True, min_keep=0),
    lambda: FirstFit(),
    lambda: Importance(),
)


# ------------------------------------------------------------- the memory is invisible


@settings(max_examples=60, deadline=None)
@given(data=st.data(), base=openai_dicts(), budget=st.integers(5, 300),
       which=st.integers(0, len(STRATEGIES) - 1), trust=st.booleans())  # fmt: skip
def test_pack_openai_with_memory_equals_a_cold_pack(
    data: Any, base: list[dict[str, Any]], budget: int, which: int, trust: bool
) -> None:
    """With ``assume_unchanged`` the caller keeps its promise: edits make new dicts."""
    make = STRATEGIES[which]
    packer = Packer(budget=budget, strategy=make(), pin=("last_user",), assume_unchanged=trust)
    pool = list(base) + data.draw(openai_dicts(max_size=6))
    items: list[dict[str, Any]] = []
    for _ in range(data.draw(st.integers(1, 8))):
        if mutate(data.draw, items, in_place=not trust) == "append":
            items.extend(pool[len(items) : len(items) + data.draw(st.integers(1, 3))])
        expected = Packer(budget=budget, strategy=make(), pin=("last_user",)).pack(
            from_openai(copy.deepcopy(items))
        )
        out, got = packer.pack_openai(items, result=True)
        assert fingerprint(got) == fingerprint(expected)
        assert list(got.messages) == from_openai(items)  # ids and content as a cold conversion
        assert [m.id for m in got.messages] == [m.id for m in from_openai(items)]
        # What is sent is what converting the cold result gives (each tool result right
        # after its own call, as the API requires), and for each message kept as it is,
        # the caller's own dict (no copy).
        assert out == order_tool_results(to_openai(expected.kept))
        own = {id(items[i]) for i in got.kept_indices if i not in got.repairs}
        assert sum(1 for d in out if id(d) in own) == len(own)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), base=anthropic_dicts(), budget=st.integers(5, 300),
       which=st.integers(0, len(STRATEGIES) - 1), trust=st.booleans(),
       system=st.sampled_from((None, "be brief", [{"type": "text", "text": "brief"}])))  # fmt: skip
def test_pack_anthropic_with_memory_equals_a_cold_pack(
    data: Any, base: list[dict[str, Any]], budget: int, which: int, trust: bool, system: Any
) -> None:
    make = STRATEGIES[which]
    packer = Packer(budget=budget, strategy=make(), assume_unchanged=trust)
    items: list[dict[str, Any]] = []
    for _ in range(data.draw(st.integers(1, 8))):
        if mutate(data.draw, items, in_place=not trust) == "append":
            items.extend(base[len(items) : len(items) + data.draw(st.integers(1, 3))])
        if data.draw(st.integers(0, 5)) == 0:
            system = "a new system prompt"
        cold = from_anthropic(copy.deepcopy(items), system=copy.deepcopy(system))
        expected = Packer(budget=budget, strategy=make(), start_on="user").pack(cold)
        got_system, out, got = packer.pack_anthropic(items, system=system, result=True)
        assert fingerprint(got) == fingerprint(expected)
        assert list(got.messages) == cold and [m.id for m in got.messages] == [m.id for m in cold]
        from convomem.formats.anthropic import to_anthropic

        assert (got_system, out) == to_anthropic(expected.kept)


def test_only_new_dicts_are_converted_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    import convomem.formats.openai as fmt

    converted: list[int] = []
    real = fmt.from_openai

    def spy(messages: Any) -> list[Message]:
        batch = list(messages)
        converted.append(len(batch))
        return real(batch)

    monkeypatch.setattr(fmt, "from_openai", spy)
    tok = ApproxTokenizer()
    packer = Packer(budget=200, tokenizer=tok)
    history = [{"role": "system", "content": "be brief"}]
    history += [{"role": "user" if k % 2 else "assistant", "content": f"turn {k % 7}"}
                for k in range(1, 300)]  # fmt: skip
    packer.pack_openai(history)
    assert converted == [300]
    for _ in range(300, 340):
        history.append({"role": "user", "content": "thanks!"})  # a repeat: a new id each time
        before = tok.tokenizations
        out = packer.pack_openai(history)
        assert converted[-1] == 1 and tok.tokenizations - before <= 1
        assert out[-1] is history[-1]
    ids = [m.id for m in packer.pack_openai(history, result=True).result.messages]
    assert ids == [m.id for m in real(history)] and len(set(ids)) == len(ids)
    history[5]["content"] = "edited in place"  # the prefix changed: converted from there
    r = packer.pack_openai(history, result=True).result
    assert converted[-1] == len(history) - 5 and r.messages[5].content == "edited in place"


def test_assume_unchanged_trusts_identity_and_never_counts_stale() -> None:
    tok = ApproxTokenizer()
    packer = Packer(budget=1_000, tokenizer=tok, assume_unchanged=True)
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    packer.pack_openai(history)
    history[1]["content"] = "hello " * 100  # the promise is broken: not seen...
    out, r = packer.pack_openai(history, result=True)
    assert r.messages[1].content == "hello"
    assert r.token_count == tok.count_messages(r.kept) < 30  # ...and counted as sent
    history[1] = dict(history[1])  # an equal dict, a new object: converted again
    out, r = packer.pack_openai(history, result=True)
    assert r.messages[1].content == "hello " * 100 and out[1] is history[1]
    assert Packer(budget=1, assume_unchanged=True).assume_unchanged
    with pytest.raises(ConfigError, match="assume_unchanged="):
        Packer(budget=1, assume_unchanged=1)  # type: ignore[arg-type]


def test_a_bad_dict_names_its_position_and_changes_nothing() -> None:
    packer = Packer(budget=100)
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    first = packer.pack_openai(history, result=True).result
    with pytest.raises(InvalidMessage, match=r"messages\[2\]\.role"):
        packer.pack_openai([*history, {"role": "robot", "content": "x"}])
    with pytest.raises(InvalidMessage, match="messages"):
        packer.pack_openai({"role": "user", "content": "x"})  # type: ignore[arg-type]
    again = packer.pack_openai(history, result=True).result
    assert fingerprint(again) == fingerprint(first)
    assert list(again.messages) == list(first.messages)


def test_objects_that_are_not_dicts_are_converted_every_time() -> None:
    class Block:
        def __init__(self, text: str) -> None:
            self.text = text

        def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
            return {"type": "text", "text": self.text}

    packer = Packer(budget=1_000)
    block = Block("from the SDK")
    items = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [block]}]
    for _ in range(2):
        _, out = packer.pack_anthropic(items)
        assert out[1]["content"] == [{"type": "text", "text": "from the SDK"}]
    block.text = "changed in place"  # compared through model_dump(): seen
    assert packer.pack_anthropic(items)[1][1]["content"][0]["text"] == "changed in place"
    items.append({"role": "user", "content": "more"})
    assert len(packer.pack_anthropic(items)[1]) == 3


def test_a_busy_packer_converts_afresh() -> None:
    packer = Packer(budget=100)
    history = [{"role": "user", "content": f"m{k}"} for k in range(5)]
    packer.pack_openai(history[:3])
    with packer._lock:  # another call is running
        busy = packer.pack_openai(history, result=True).result
    assert fingerprint(busy) == fingerprint(Packer(budget=100).pack(from_openai(history)))
    assert fingerprint(packer.pack_openai(history, result=True).result) == fingerprint(busy)


def test_numbers_of_another_json_type_are_a_change() -> None:
    """1, 1.0 and True are equal in Python; in JSON (and in token counts) they are not."""
    call = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": {"v": 1, "w": [1.0]}}]}  # fmt: skip
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}
    items = [{"role": "user", "content": "go"}, call, answer]
    packer = Packer(budget=1_000)
    packer.pack_anthropic(items, start_on=None)
    for v, w in ((True, [1.0]), (1, [1]), (1, [True]), (1.0, [1.0]), (-0.0, [0.0])):
        call["content"][0]["input"] = {"v": v, "w": w}
        _, out, res = packer.pack_anthropic(items, start_on=None, result=True)
        assert out[1]["content"][0]["input"] == {"v": v, "w": w}
        assert repr(out[1]["content"][0]["input"]["v"]) == repr(v)
        fresh = Packer(budget=1_000).pack(from_anthropic(copy.deepcopy(items)))
        assert res.token_count == fresh.token_count


def test_a_rebuilt_message_with_another_json_type_is_counted_again() -> None:
    """Issue 8 #6: Message equality must tell {"v": 1} from {"v": True}."""
    tok = ApproxTokenizer()
    packer = Packer(budget=1_000, tokenizer=tok)
    answer = Message("r", "tool", content=[ToolResultBlock("t", "ok")])
    one = Message("c", "assistant", content=[ToolUseBlock("t", "f", {"v": 1})])
    packer.pack([Message("u", "user", content="go"), one, answer])
    true = Message("c", "assistant", content=[ToolUseBlock("t", "f", {"v": True})])
    r = packer.pack([Message("u", "user", content="go"), true, answer])
    assert r.kept[1] is true and r.token_count == ApproxTokenizer().count_messages(r.kept)


# ------------------------------------------------------------- valid Anthropic requests


def check_anthropic_request(system: Any, messages: list[dict[str, Any]]) -> None:
    """What the Messages API requires of a request (consecutive same-role messages are
    combined by the API, so they are combined here first)."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for m in messages:
        content = m["content"]
        assert content, f"empty content: {m}"
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for b in blocks:
            assert b.get("type") != "text" or b["text"], f"empty text block: {m}"
        if turns and turns[-1][0] == m["role"]:
            turns[-1][1].extend(blocks)
        else:
            turns.append((m["role"], list(blocks)))
    assert system is None or (isinstance(system, str) and system) or system
    if not turns:
        return
    assert turns[0][0] == "user", "the first turn is the user's"
    for k, (role, blocks) in enumerate(turns):
        results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if role == "user":
            kinds = [b.get("type") == "tool_result" for b in blocks]
            assert kinds == sorted(kinds, reverse=True), "tool results come first"
            prev = turns[k - 1][1] if k else []
            calls = [b["id"] for b in prev if b.get("type") == "tool_use"]
            assert sorted(results) == sorted(calls), "results answer the previous turn's calls"
        else:
            assert not results
            calls = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            nxt = turns[k + 1][1] if k + 1 < len(turns) else None
            if calls:
                assert nxt is not None, "a call must be answered in the next turn"


@settings(max_examples=150, deadline=None)
@given(items=anthropic_dicts(max_size=20), budget=st.integers(1, 400),
       which=st.integers(0, len(STRATEGIES) - 1), unanswered=st.sampled_from(("drop", "stub")),
       pin=st.sampled_from(((), ("system",), ("tool_results",), ("last_user",), (0,), (-1,))),
       system=st.sampled_from((None, "be brief")))  # fmt: skip
def test_every_anthropic_request_is_valid(
    items: list[dict[str, Any]], budget: int, which: int, unanswered: Any, pin: Any, system: Any
) -> None:
    packer = Packer(budget=budget, strategy=STRATEGIES[which](), unanswered=unanswered, pin=pin)
    got_system, messages, result = packer.pack_anthropic(items, system=system, result=True)
    check_anthropic_request(got_system, messages)
    if result.fits:  # a request that fits has messages, unless there were none
        assert messages or not items
        # ... and is within the budget, as sent (system and turns counted as messages)
        sent = from_anthropic(messages, system=got_system) if messages else []
        assert ApproxTokenizer().count_messages(sent) <= budget
    if not messages and items:
        assert result.unstartable and "no user turn to start on" in result.explain()


# ------------------------------------------------------------------- snapshot semantics

LEAVES = (
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from((0.0, -0.0, 1.0, 2.5))
    | st.floats(allow_nan=True, allow_infinity=False, width=16) | st.text("ab", max_size=2)
)  # fmt: skip
JSON = st.recursive(
    LEAVES,
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.tuples(kids)
        | st.dictionaries(st.text("ab", max_size=2), kids, max_size=3)
    ),
    max_leaves=8,
)


def same(a: Any, b: Any) -> bool:
    """Brute force: equal as JSON values, each number keeping its type (1, 1.0 and True
    differ; -0.0 and 0.0 differ; NaN equals NaN); object keys in any order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(a=JSON, b=JSON, data=st.data())
def test_a_snapshot_equals_exactly_the_same_json(a: Any, b: Any, data: Any) -> None:
    from convomem.packing.provider import snapshot

    snap = snapshot(a)
    assert (a == snap) is True and (a != snap) is False  # itself, NaN included
    assert (b == snap) == same(a, b) and (b != snap) == (not same(a, b))
    near = copy.deepcopy(a)  # a copy with one leaf changed in type or value
    assert (near == snap) is True
    if isinstance(near, dict) and near:
        k = data.draw(st.sampled_from(sorted(near)))
        near[k] = data.draw(LEAVES)
        assert (near == snap) == same(a, near)


def test_an_earlier_result_does_not_change_with_later_calls() -> None:
    packer = Packer(budget=1_000)
    history = [{"role": "user", "content": "hi"}]
    first = packer.pack_openai(history, result=True).result
    for k in range(3):
        history.append({"role": "assistant", "content": f"a{k}"})
        packer.pack_openai(history)
    assert len(first.messages) == 1 and len(first.decisions) == 1 and first.dropped == []

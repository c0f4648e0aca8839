"""One Packer shared by many conversations (issue 8): after every step its answer is a fresh
Packer's, valid, and made of that conversation's messages only."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from _packing_support import PIN_SPECS, check_invariants, histories, originals
from convomem.formats.anthropic import to_anthropic
from convomem.formats.openai import to_openai
from convomem.model import Message, ToolResultBlock, starts_turn
from convomem.packing import Packer, PackResult
from convomem.strategies import FirstFit, Importance, MaxTurns, Recency, SummaryEvict
from convomem.tokens import ApproxTokenizer

NAMES = ("a", "b", "c")


def summarize(messages: list[Message]) -> str:
    return " | ".join(m.text() for m in messages)


STRATEGIES: tuple[Callable[[], Any], ...] = (
    lambda: Recency(),
    lambda: Recency(contiguous=True, min_keep=0),
    lambda: FirstFit(),
    lambda: Importance(),
    lambda: [MaxTurns(2), Recency()],
    lambda: SummaryEvict(summarize, reserve=1),
)


def tagged(name: str, history: list[Message]) -> list[Message]:
    """The same ids in every conversation; texts (and tool results) that say which
    conversation they are in."""
    out = []
    for m in history:
        if isinstance(m.content, str):
            content: Any = f"{name}: {m.content}"
        else:
            content = [
                ToolResultBlock(b.tool_use_id, f"{name}: {b.content}", b.is_error)
                if isinstance(b, ToolResultBlock) and isinstance(b.content, str)
                else b
                for b in m.content
            ]
        out.append(m.replace(content=content, tokens=m.tokens))
    return out


def fingerprint(r: PackResult) -> tuple[Any, ...]:
    return (
        [m.id for m in r.kept],
        [(d.index, d.id, d.kept, d.reason, d.tokens) for d in r.decisions],
        r.token_count,
        r.fits,
        r.summary.text() if r.summary is not None else None,
    )


class SharedPacker(RuleBasedStateMachine):
    """Conversations ``a``, ``b``, ``c`` with colliding ids, as Message lists and as
    OpenAI and Anthropic dicts, grown, rebuilt, truncated and edited, all packed by one
    Packer (and one strategy instance) in any order."""

    def __init__(self) -> None:
        super().__init__()
        self.full: dict[str, list[Message]] = {}
        self.msgs: dict[str, list[Message]] = {}
        self.dicts: dict[str, list[dict[str, Any]]] = {}
        self.packs = 0

    @initialize(
        which=st.integers(0, len(STRATEGIES) - 1),
        pins=PIN_SPECS,
        budget=st.integers(2, 250),
        unanswered=st.sampled_from(("drop", "stub")),
        start_on=st.sampled_from((None, "user")),
    )
    def setup(self, which: int, pins: Any, budget: int, unanswered: Any, start_on: Any) -> None:
        self.config = dict(pin=pins, budget=budget, unanswered=unanswered, start_on=start_on)
        self.make_strategy = STRATEGIES[which]
        self.packer = self.fresh()

    def fresh(self) -> Packer:
        return Packer(tokenizer=ApproxTokenizer(), strategy=self.make_strategy(), **self.config)

    # ----------------------------------------------------------------- conversations

    @rule(name=st.sampled_from(NAMES), history=histories(max_size=24), n=st.integers(0, 24))
    def start(self, name: str, history: list[Message], n: int) -> None:
        self.full[name] = tagged(name, history)
        self.msgs[name] = self.full[name][:n]
        self.dicts[name] = to_openai(self.msgs[name])

    @precondition(lambda self: self.msgs)
    @rule(data=st.data(), k=st.integers(1, 3))
    def grow(self, data: Any, k: int) -> None:
        name = data.draw(st.sampled_from(sorted(self.msgs)))
        have = self.msgs[name]
        new = self.full[name][len(have) : len(have) + k]
        have.extend(new)  # the same list object, appended to
        self.dicts[name].extend(to_openai(new))

    @precondition(lambda self: self.msgs)
    @rule(data=st.data())
    def rebuild(self, data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(self.msgs)))
        self.msgs[name] = [Message.from_dict(m.to_dict()) for m in self.msgs[name]]
        self.dicts[name] = copy.deepcopy(self.dicts[name])

    @precondition(lambda self: self.msgs)
    @rule(data=st.data(), k=st.integers(0, 24))
    def truncate(self, data: Any, k: int) -> None:
        name = data.draw(st.sampled_from(sorted(self.msgs)))
        del self.msgs[name][k:]
        del self.dicts[name][k:]

    @precondition(lambda self: any(self.msgs.values()))
    @rule(data=st.data())
    def edit(self, data: Any) -> None:
        """A message replaced (same id, new text); a dict edited in place."""
        name = data.draw(st.sampled_from(sorted(n for n, ms in self.msgs.items() if ms)))
        ms = self.msgs[name]
        i = data.draw(st.integers(0, len(ms) - 1))
        tokens = data.draw(st.integers(0, 40))
        if isinstance(ms[i].content, str):
            ms[i] = ms[i].replace(content=f"{name}: edited {i}", tokens=tokens)
        else:  # a tool exchange keeps its blocks; its count changes
            ms[i] = ms[i].replace(tokens=tokens)
        if self.dicts[name]:
            d = self.dicts[name][min(i, len(self.dicts[name]) - 1)]
            if isinstance(d.get("content"), str):
                d["content"] = f"{name}: edited in place {i}"

    # ----------------------------------------------------------------------- packing

    def no_leak(self, name: str, r: PackResult) -> None:
        """Every text says which conversation it is from: none may name another."""
        texts = [m.text() for m in r.kept]
        if r.summary is not None:
            texts.append(r.summary.text())
        for text in texts:
            for other in NAMES:
                assert other == name or f"{other}: " not in text, (name, text)

    @precondition(lambda self: self.msgs)
    @rule(data=st.data())
    def pack(self, data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(self.msgs)))
        ms = self.msgs[name]
        r = self.packer.pack(ms)
        assert fingerprint(r) == fingerprint(self.fresh().pack(ms))
        check_invariants(ms, r, pins=self.config["pin"], tokenizer=ApproxTokenizer())
        mine = {id(m) for m in ms}
        assert all(id(m) in mine for m in originals(r))  # the caller's own objects
        if self.config["start_on"]:
            rest = [m for m in r.kept if m.role != "system"]
            assert not rest or starts_turn(rest[0])
        self.no_leak(name, r)
        self.packs += 1

    @precondition(lambda self: self.dicts)
    @rule(data=st.data())
    def pack_openai(self, data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(self.dicts)))
        items = self.dicts[name]
        out, r = self.packer.pack_openai(items, result=True)
        cold_out, cold = self.fresh().pack_openai(copy.deepcopy(items), result=True)
        assert fingerprint(r) == fingerprint(cold) and out == cold_out
        check_invariants(r.messages, r, pins=self.config["pin"], tokenizer=ApproxTokenizer())
        own = {id(d) for d in items}
        for d in out:  # the caller's dicts, or dicts convomem wrote for this conversation
            assert id(d) in own or d.get("role") in ("tool", "system") or d in items
        self.no_leak(name, r)
        self.packs += 1

    @precondition(lambda self: self.msgs)
    @rule(data=st.data())
    def pack_anthropic(self, data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(self.msgs)))
        system, items = to_anthropic(self.msgs[name])
        got = self.packer.pack_anthropic(items, system=system, result=True)
        cold = self.fresh().pack_anthropic(copy.deepcopy(items), system=system, result=True)
        assert fingerprint(got.result) == fingerprint(cold.result)
        assert (got.system, got.messages) == (cold.system, cold.messages)
        rest = [m for m in got.result.kept if m.role != "system"]
        assert not rest or starts_turn(rest[0])
        self.no_leak(name, got.result)
        self.packs += 1

    @invariant()
    def lists_are_untouched(self) -> None:
        for name, ms in self.msgs.items():  # the Packer never edits what it is given
            assert all(isinstance(m, Message) for m in ms) and len(ms) <= len(self.full[name]) + 24


SharedPacker.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestSharedPacker = SharedPacker.TestCase

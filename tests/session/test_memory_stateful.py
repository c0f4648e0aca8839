"""ConversationMemory as a state machine: any interleaving of adds, clears, pops, faults.

A hypothesis ``RuleBasedStateMachine`` drives one memory with messages of every kind and
priority (system, user, assistant; tool calls with parallel, interleaved, repeated and
missing results, results for calls never made; OpenAI dicts converted one at a time,
equal texts included; scored messages), ``clear`` with and without the system prompt,
pops through the store, restarts on the same store, sync and async calls interleaved
(and async calls run concurrently), while stores (``get_items``, ``add_items``,
``pop_item``, ``clear_session``, ``truncate``) and summarizers (primary, fallback, both)
fail on demand. A model holds every accepted message in order; after every step:

- the log (``messages()`` and the store) is exactly the model; a failed operation
  changed nothing (log, ``context()``, summary and stats as before), but for the one
  documented exception: a ``clear`` on a store without ``truncate`` whose put-back
  failed raises ``ClearIncomplete``, which tells exactly what the store still holds;
- ``context()`` holds logged messages (or their compressed or reduced copies) in log
  order, and is valid for OpenAI (the dicts are ``to_openai`` of the messages, each
  result right after its call: every assistant message calling tools followed at once by
  a result for each call, no call id twice) and for
  Anthropic (``context("anthropic")``: a user turn first after the system, no empty
  content, every result after its call, every call answered);
- every pinned message (system, priority 2) is in the context and in the Anthropic
  request, or ``stats().fits`` is False (a message with tool blocks may wait for a
  result, and a result goes with its call);
- ``stats().fits`` is exactly ``context_tokens <= budget - response_reserve``; the view
  costs at most ``context_tokens``, and whenever ``fits`` every request (the messages,
  the OpenAI dicts, the Anthropic request) is within the budget;
- no message is summarized twice (successful summarizer calls per message id, folds and
  compressions apart; merges of summary segments are not messages).

The budget is bounded in the suite; ``CONVOMEM_SOAK_EXAMPLES`` and
``CONVOMEM_SOAK_STEPS`` raise it, and ``bench/soak_memory.py`` (``make soak``) runs the
same machine for about 10^5 steps.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from convomem.errors import (
    ClearIncomplete,
    ConfigError,
    ConvomemError,
    InvalidMessage,
    TransientError,
)
from convomem.formats.anthropic import from_anthropic
from convomem.formats.openai import from_openai, order_tool_results, to_openai
from convomem.model import (
    REDUCED_KEY,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    current_turn,
    group_pairs,
    is_derived_id,
)
from convomem.session import ConversationMemory
from convomem.session.view import answers_first
from convomem.stores import InMemoryStore
from convomem.summaries import SUMMARY_HEADER
from convomem.tokens import get_tokenizer
from convomem.views.budget import REPLY_PRIMING_TOKENS
from session._faults import (
    DOWN_TEXT,
    STORE_METHODS,
    AsyncFaultyStore,
    CountingSummary,
    FaultyStore,
    FaultyTruncatingStore,
    FlakyExtractive,
    FlakySummarizer,
    SlowSummarizer,
    StoreFaults,
    Tally,
)

EXAMPLES = int(os.environ.get("CONVOMEM_SOAK_EXAMPLES", "40"))
STEPS = int(os.environ.get("CONVOMEM_SOAK_STEPS", "30"))

TOK = get_tokenizer("approx")
_SENTENCE = (
    "the parcel was delayed again and we talked about shipping options while support "
    "checked the queue and everyone agreed to wait a little longer for news about it"
)
WORDS = tuple(_SENTENCE.split(" "))
FACTS = ("order 1182", "dana.kowalski@example.com", "ticket TK-5521", "$249.99")
# Equal texts on purpose: converted one at a time they get the same derived id.
POOL = ("Hello!", "Thanks.", "Any update on my order?", "Let me check that for you.")
PIN_MARK, KEEP_MARK = "[[pin]]", "[[keep]]"


def text_of(seed: int, n: int, fact: int | None = None) -> str:
    out = " ".join(WORDS[(seed * 7 + k * 3) % len(WORDS)] for k in range(n))
    if fact is not None:
        out += f" For the record: {FACTS[fact % len(FACTS)]}."
    return out


def score(m: Message) -> int:
    """The scorer of scored configurations: marks in the text decide the priority."""
    text = m.text()
    return 2 if PIN_MARK in text else 1 if KEEP_MARK in text else 0


# -- configurations -----------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    budget: int
    reply: int  # response_reserve
    max_turns: int | None
    pin: tuple[Any, ...]
    store: str  # "sync", "truncating" or "async"
    primary: str  # "flaky", "slow" or "extractive"
    fallback: str  # "flaky", "extractive" or "none"
    retries: int
    facts: bool
    summary: bool
    scored: bool


configs = st.builds(
    Config,
    budget=st.sampled_from([200, 300, 450, 700, 1200]),
    reply=st.sampled_from([0, 0, 40]),
    max_turns=st.one_of(st.none(), st.integers(1, 5)),
    pin=st.sampled_from([("system",), ("system",), ("system", "last_user"), ("system", -2)]),
    store=st.sampled_from(["sync", "truncating", "async"]),
    primary=st.sampled_from(["flaky", "slow", "extractive"]),
    fallback=st.sampled_from(["flaky", "extractive", "none"]),
    retries=st.integers(0, 1),
    facts=st.booleans(),
    summary=st.sampled_from([True, True, False]),
    scored=st.booleans(),
)

VIA = st.sampled_from(["sync", "async"])
PRIORITY = st.sampled_from([0, 0, 0, 1, 2])


def changes(before: tuple[Any, ...], after: tuple[Any, ...]) -> list[str]:
    """What differs between two snapshots (log, context, summary, stats)."""
    names = ("log", "context", "summary")
    out = [names[i] for i in range(3) if before[i] != after[i]]
    out += [f"stats.{k}: {v} -> {after[3][k]}" for k, v in before[3].items() if after[3][k] != v]
    return out


class Failed(Exception):
    """An operation failed as it may (a store fault, a sync call on an async store)."""


# -- brute-force checks of a context ------------------------------------------------


def openai_problems(dicts: Sequence[dict[str, Any]]) -> list[str]:
    """Why Chat Completions would refuse ``dicts``: an assistant message with tool calls
    not followed right away by a tool message for each of its calls (a result without
    its call just before, another message between, two assistant messages calling in a
    row), a call id made twice."""
    problems: list[str] = []
    made: set[str] = set()
    open_: set[str] = set()  # the calls of the last assistant message, not answered yet
    for i, d in enumerate(dicts):
        if d["role"] == "tool":
            cid = d.get("tool_call_id")
            if cid not in open_:
                problems.append(f"[{i}] answers {cid!r}: not a call of the message before")
            open_.discard(cid)
            continue
        if open_:
            problems.append(f"[{i}] comes before the results of {sorted(open_)}")
            open_ = set()
        for call in d.get("tool_calls") or ():
            if call["id"] in made:
                problems.append(f"[{i}] makes call {call['id']!r} twice")
            made.add(call["id"])
            open_.add(call["id"])
    problems += [f"call {c!r} has no result" for c in sorted(open_)]
    return problems


def _empty(content: Any) -> bool:
    if isinstance(content, str):
        return not content
    if not content:
        return True
    return any(b.get("type") == "text" and not b.get("text") for b in content)


def anthropic_problems(ctx: dict[str, Any]) -> list[str]:
    """Why the Messages API would refuse ``ctx``: not a user turn first, empty content, a
    result without its call before it, a call without its result."""
    problems: list[str] = []
    messages = ctx["messages"]
    if messages and messages[0]["role"] != "user":
        problems.append(f"first turn is {messages[0]['role']!r}, not 'user'")
    problems += [f"[{i}] has empty content" for i, d in enumerate(messages) if _empty(d["content"])]
    if "system" in ctx and _empty(ctx["system"]):
        problems.append("empty system")
    open_: set[str] = set()
    for i, d in enumerate(messages):
        blocks = [] if isinstance(d["content"], str) else d["content"]
        for b in blocks:
            if b.get("type") == "tool_result":
                if b["tool_use_id"] not in open_ or d["role"] != "user":
                    problems.append(f"[{i}] answers {b['tool_use_id']!r}: no open call before it")
                open_.discard(b["tool_use_id"])
            elif b.get("type") == "tool_use":
                open_.add(b["id"])
    problems += [f"call {c!r} has no result" for c in sorted(open_)]
    return problems


def anthropic_text(ctx: dict[str, Any]) -> str:
    """Every text an Anthropic request carries (system, text blocks, tool results)."""
    out = [] if "system" not in ctx else [json.dumps(ctx["system"], ensure_ascii=False)]
    out += [json.dumps(d["content"], ensure_ascii=False) for d in ctx["messages"]]
    return "\n".join(out)


def request_tokens(
    ctx: list[Message], oa: list[dict[str, Any]], an: dict[str, Any]
) -> dict[str, int]:
    """What each request costs, counted as the memory counts (per message, plus the reply
    priming): the messages of the view, the OpenAI dicts, the Anthropic request (the
    view's system messages its system field carries, then its turns)."""
    field = an.get("system") or ""
    sent = field if isinstance(field, str) else "\n".join(b.get("text", "") for b in field)
    system = [m for m in ctx if m.role == "system" and m.text() and m.text() in sent]
    turns = from_anthropic(an["messages"]) if an["messages"] else []
    return {
        "messages": TOK.count_messages(ctx) + REPLY_PRIMING_TOKENS,
        "openai": TOK.count_messages(from_openai(oa)) + REPLY_PRIMING_TOKENS,
        "anthropic": TOK.count_messages([*system, *turns]) + REPLY_PRIMING_TOKENS,
    }


def waiting_positions(log: Sequence[Message]) -> tuple[set[int], dict[str, int]]:
    """Positions of the messages that wait for a tool result, and where each call was
    first answered. An exchange runs from a call to its first answer; overlapping
    exchanges are one (a result arriving after other messages takes them along); it
    waits while any call in it is unanswered."""
    made: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, m in enumerate(log):
        for r in m.tool_result_ids():
            if r in made and r not in first:
                first[r] = i
        for c in m.tool_use_ids():
            made.setdefault(c, i)
    spans = sorted((at, first.get(c, at), c not in first) for c, at in made.items())
    waiting: set[int] = set()
    merged: list[list[Any]] = []
    for start, end, open_ in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            merged[-1][2] = merged[-1][2] or open_
        else:
            merged.append([start, end, open_])
    for start, end, open_ in merged:
        if open_:
            waiting.update(range(start, end + 1))
    return waiting, first


# -- the machine --------------------------------------------------------------------


class MemoryMachine(RuleBasedStateMachine):
    """ConversationMemory against a model of its log (see the module docstring)."""

    UNCOMPARED: ClassVar[tuple[str, ...]] = ("prefix_kept", "prefix_breaks")
    """Stats a context() call changes (the snapshots call it): not compared."""
    fired: ClassVar[Counter[str]] = Counter()  # rules and outcomes, across every run (for the soak)

    def __init__(self) -> None:
        super().__init__()
        self.fired["examples"] += 1

    # -- setup ----------------------------------------------------------------------

    @initialize(cfg=configs)
    def setup(self, cfg: Config) -> None:
        self.cfg = cfg
        self.faults = StoreFaults()
        inner = InMemoryStore()
        kind = {"sync": FaultyStore, "truncating": FaultyTruncatingStore}
        self.store: Any = kind.get(cfg.store, AsyncFaultyStore)(inner, self.faults)
        self.is_async = cfg.store == "async"
        self.tally = Tally()
        self.primary = self._summarizer(cfg.primary, "primary")
        self.fallback = None if cfg.fallback == "none" else self._summarizer(cfg.fallback, "fb")
        self.model: list[Message] = []  # the log: every accepted message, in order
        self.calls: list[str] = []  # every tool call id made (answered or not)
        self.serial = 0
        self.mem = self._memory()

    def _summarizer(self, kind: str, name: str) -> Any:
        if kind == "slow":
            return SlowSummarizer(self.tally, name)
        if kind == "extractive":
            return FlakyExtractive(self.tally, 48, name)
        return FlakySummarizer(self.tally, name)

    def _memory(self) -> ConversationMemory:
        cfg = self.cfg
        limit = cfg.budget - cfg.reply - REPLY_PRIMING_TOKENS
        floor = TOK.count(SUMMARY_HEADER) + 4 + 32
        rs = CountingSummary(
            self.tally,
            self.primary,
            reserve=max(floor, limit // 5),
            fallback=False if self.fallback is None else self.fallback,
            retries=cfg.retries,
            backoff=0,
            facts=cfg.facts,
            max_segments=4,
        )
        return ConversationMemory(
            cfg.budget,
            store=self.store,
            summarizer=rs,
            summary=cfg.summary,
            pin=cfg.pin,
            max_turns=cfg.max_turns,
            response_reserve=cfg.reply,
            scorer=score if cfg.scored else None,
        )

    # -- calling the memory -----------------------------------------------------------

    def _call(self, via: str, name: str, *args: Any) -> Any:
        if via == "sync":
            return getattr(self.mem, name)(*args)
        return asyncio.run(getattr(self.mem, "a" + name)(*args))

    def _read(self, name: str, *args: Any) -> Any:
        """A read past every store fault, with the calls the store allows."""
        with self.faults.suspended():
            return self._call("async" if self.is_async else "sync", name, *args)

    def _snapshot(self) -> tuple[Any, ...]:
        ctx = self._read("context", "messages")
        s = self.mem.stats()
        stats = {k: v for k, v in asdict(s).items() if k not in self.UNCOMPARED}
        return (self.store.items(), ctx, self.mem.summary.message(), stats)

    def _attempt(self, via: str, name: str, *args: Any, invalid: bool = False) -> Any:
        """Run one operation; if it fails as it may, check that it changed nothing."""
        self.fired[f"{via} calls"] += 1
        before = self._snapshot()
        fired = self.faults.fired
        try:
            result = self._call(via, name, *args)
        except ClearIncomplete as exc:
            # Documented: a store without truncate lost its newest messages (pops done,
            # put-back failed); the error says what it holds, the memory follows it.
            assert name == "clear" and not hasattr(self.store, "truncate"), repr(exc)
            log = before[0]
            assert self.store.items() == log[: exc.remaining], "the store is not as told"
            assert exc.removed == log[exc.remaining :], "removed is not what the store lost"
            assert self._read("messages") == log[: exc.remaining]
            self.fired[f"failed {name}: {type(exc).__name__}"] += 1
            raise Failed from exc
        except ConvomemError as exc:
            if isinstance(exc, TransientError):
                assert self.faults.fired > fired, f"{exc!r} without a store fault"
            elif isinstance(exc, ConfigError) and not isinstance(exc, InvalidMessage):
                assert self.is_async and via == "sync", f"unexpected {exc!r}"
            else:
                assert invalid and isinstance(exc, InvalidMessage), f"unexpected {exc!r}"
            after = self._snapshot()
            assert after == before, (
                f"{name} failed ({exc!r}) and changed the memory: {changes(before, after)}"
            )
            self.fired[f"failed {name}: {type(exc).__name__}"] += 1
            raise Failed from exc
        assert not invalid, f"{name}{args!r} should have been refused"
        return result

    def _add(self, via: str, message: Message) -> Message | None:
        """Add through the memory; on success the model logs what the memory returned."""
        try:
            got = self._attempt(via, "add_message", message)
        except Failed:
            return None
        self._accepted(message, got)
        return got

    def _accepted(self, message: Message, got: Any) -> None:
        assert isinstance(got, Message)
        ids = {m.id for m in self.model}
        assert got.id not in ids, f"{got.id!r} logged twice"
        if got.id != message.id:
            assert is_derived_id(message.id) and message.id in ids
        assert got.role == message.role and got.content == message.content
        assert got.priority == (score(message) if self.cfg.scored else message.priority)
        self.model.append(got)

    def _next_id(self, kind: str = "m") -> str:
        self.serial += 1
        return f"{kind}{self.serial}"

    # -- rules: messages ------------------------------------------------------------

    @rule(
        role=st.sampled_from(["user", "user", "assistant", "assistant", "system"]),
        size=st.one_of(st.integers(0, 60), st.integers(100, 200)),
        priority=PRIORITY,
        fact=st.one_of(st.none(), st.integers(0, 3)),
        mark=st.sampled_from(["", "", "", PIN_MARK, KEEP_MARK]),
        given_id=st.booleans(),
        via=VIA,
    )
    def add_text(
        self,
        role: str,
        size: int,
        priority: int,
        fact: int | None,
        mark: str,
        given_id: bool,
        via: str,
    ) -> None:
        self.fired["rule add text"] += 1
        content = (text_of(self.serial, size, fact) + " " + mark).strip()
        mid = self._next_id("t") if given_id else None
        self._add(via, Message(mid, role, content=content, priority=priority))

    @rule(
        width=st.integers(1, 3),
        priority=st.sampled_from([0, 0, 2]),
        with_text=st.booleans(),
        via=VIA,
    )
    def call_tools(self, width: int, priority: int, with_text: bool, via: str) -> None:
        self.fired["rule tool call"] += 1
        ids = [self._next_id("c") for _ in range(width)]
        blocks: list[Any] = [TextBlock("Let me look that up.")] if with_text else []
        blocks += [ToolUseBlock(c, "lookup", {"q": text_of(i, 3)}) for i, c in enumerate(ids)]
        message = Message(self._next_id("a"), "assistant", content=blocks, priority=priority)
        if self._add(via, message) is not None:
            self.calls += ids

    @rule(
        data=st.data(),
        ghost=st.booleans(),
        together=st.booleans(),
        as_user=st.booleans(),
        priority=PRIORITY,
        size=st.integers(1, 60) | st.integers(300, 1500),  # large ones are reduced
        via=VIA,
    )
    def answer_tools(
        self,
        data: st.DataObject,
        ghost: bool,
        together: bool,
        as_user: bool,
        priority: int,
        size: int,
        via: str,
    ) -> None:
        """Results of parallel calls, in any order, repeated or for calls never made."""
        self.fired["rule tool results"] += 1
        picks = data.draw(st.lists(st.sampled_from(self.calls), max_size=3)) if self.calls else []
        if ghost or not picks:
            picks.append(self._next_id("ghost"))
        results = [ToolResultBlock(c, text_of(k, size)) for k, c in enumerate(picks)]
        if together:  # one message, Anthropic style (a user turn may carry text too)
            role = "user" if as_user else "tool"
            blocks: list[Any] = list(results)
            if as_user:
                blocks.append(TextBlock("Here is what the tools found."))
            self._add(via, Message(self._next_id("r"), role, content=blocks, priority=priority))
            return
        for block in results:  # one tool message per result, OpenAI style
            self._add(via, Message(self._next_id("r"), "tool", content=[block], priority=priority))

    @rule(
        kind=st.sampled_from(["user", "assistant", "system", "calls", "result"]),
        pick=st.integers(0, len(POOL) - 1),
        via=VIA,
        data=st.data(),
    )
    def add_openai_dict(self, kind: str, pick: int, via: str, data: st.DataObject) -> None:
        """One dict converted at a time: equal texts get equal derived ids."""
        self.fired["rule openai dict"] += 1
        d: dict[str, Any]
        new_calls: list[str] = []
        if kind == "calls":
            new_calls = [self._next_id("oc") for _ in range(data.draw(st.integers(1, 2)))]
            d = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    for c in new_calls
                ],
            }
        elif kind == "result":
            call = data.draw(st.sampled_from(self.calls)) if self.calls else "never"
            d = {"role": "tool", "tool_call_id": call, "content": POOL[pick]}
        else:
            d = {"role": kind, "content": POOL[pick]}
        (message,) = from_openai([d])
        if self._add(via, message) is not None:
            self.calls += new_calls

    @precondition(lambda self: any(not is_derived_id(m.id) for m in self.model))
    @rule(data=st.data(), via=VIA)
    def add_a_taken_id(self, data: st.DataObject, via: str) -> None:
        """A given id already in the log is refused, and nothing changes."""
        self.fired["rule taken id"] += 1
        taken = data.draw(st.sampled_from([m.id for m in self.model if not is_derived_id(m.id)]))
        message = Message(taken, "user", content="a second message with the same id")
        try:
            self._attempt(via, "add_message", message, invalid=True)
        except Failed:
            return

    @rule(n=st.integers(2, 3), size=st.integers(0, 40), read=st.booleans())
    def concurrent_adds(self, n: int, size: int, read: bool) -> None:
        """Async adds (and a read) run at once on one loop: logged in the order started."""
        self.fired["rule concurrent adds"] += 1
        messages = [
            Message(
                self._next_id("k"), "user" if i % 2 == 0 else "assistant", content=text_of(i, size)
            )
            for i in range(n)
        ]

        async def run() -> list[Any]:
            tasks = [self.mem.aadd_message(m) for m in messages]
            if read:
                tasks.insert(1, self.mem.acontext("messages"))
            return await asyncio.gather(*tasks, return_exceptions=True)

        fired = self.faults.fired
        outcomes = asyncio.run(run())
        if read:
            ctx = outcomes.pop(1)
            if not isinstance(ctx, TransientError):
                assert isinstance(ctx, list), f"concurrent read failed: {ctx!r}"
        for m, got in zip(messages, outcomes, strict=True):
            if isinstance(got, TransientError):
                assert self.faults.fired > fired
                continue
            if isinstance(got, BaseException):
                raise got
            self._accepted(m, got)

    # -- rules: clear, pop, restart --------------------------------------------------

    @rule(keep_system=st.booleans(), via=VIA)
    def clear(self, keep_system: bool, via: str) -> None:
        self.fired[f"rule clear keep_system={keep_system}"] += 1
        try:
            self._attempt(via, "clear", keep_system)
        except Failed as failed:
            if isinstance(failed.__cause__, ClearIncomplete):
                self.model = self.model[: failed.__cause__.remaining]
            return
        keep: list[Message] = []
        for m in self.model if keep_system else ():
            if m.role != "system":
                break
            keep.append(m)
        self.model = keep
        self.calls = []
        self.tally.reset()

    @rule(via=VIA)
    def pop(self, via: str) -> None:
        """The newest message popped through the memory (the Agents SDK's ``pop_item``)."""
        self.fired["rule pop"] += 1
        try:
            popped = self._attempt(via, "pop")
        except Failed:
            return
        if self.model:
            assert popped == self.model.pop()
        else:
            assert popped is None

    @rule(first=st.sampled_from([None, "context", "add"]), via=VIA)
    def restart(self, first: str | None, via: str) -> None:
        """A new memory on the same store: the log is replayed on first use (which may
        meet the store's faults: then the log is as it was and the next use replays)."""
        self.fired["rule restart"] += 1
        self.mem = self._memory()
        self.tally.reset()
        if first is None:
            return
        message = Message(self._next_id("f"), "user", content="Back again.")
        fired = self.faults.fired
        try:
            if first == "add":
                self._accepted(message, self._call(via, "add_message", message))
            else:
                self._call(via, "context", "messages")
        except TransientError:
            assert self.faults.fired > fired
            assert self.store.items() == self.model
        except ConfigError:
            assert self.is_async and via == "sync"
            assert self.store.items() == self.model

    # -- rules: reads -----------------------------------------------------------------

    @rule(fmt=st.sampled_from(["openai", "anthropic", "messages"]), via=VIA)
    def read_context(self, fmt: str, via: str) -> None:
        self.fired["rule context"] += 1
        try:
            self._attempt(via, "context", fmt)
        except Failed:
            return

    @rule(limit=st.one_of(st.none(), st.integers(0, 5)), via=VIA)
    def read_messages(self, limit: int | None, via: str) -> None:
        self.fired["rule messages"] += 1
        try:
            got = self._attempt(via, "messages", limit)
        except Failed:
            return
        newest = self.model if limit is None else self.model[max(0, len(self.model) - limit) :]
        assert got == (newest if limit != 0 else [])

    # -- rules: faults ------------------------------------------------------------------

    @rule(methods=st.sets(st.sampled_from(STORE_METHODS), max_size=2))
    def store_down(self, methods: set[str]) -> None:
        self.fired["rule store down"] += 1
        self.faults.down = set(methods)

    @rule(method=st.sampled_from(STORE_METHODS), after=st.integers(0, 3))
    def store_fails_once(self, method: str, after: int) -> None:
        self.fired["rule store fails once"] += 1
        self.faults.arm(method, after)

    @rule()
    def store_heals(self) -> None:
        self.fired["rule store heals"] += 1
        self.faults.heal()

    @rule(primary=st.booleans(), fallback=st.booleans())
    def summarizers(self, primary: bool, fallback: bool) -> None:
        """Each summarizer up or down (a fallback that raises, both, or neither)."""
        self.fired[f"rule summarizers down: primary={primary} fallback={fallback}"] += 1
        self.primary.down = primary
        if self.fallback is not None:
            self.fallback.down = fallback

    # -- invariants -------------------------------------------------------------------

    @invariant()
    def log_is_everything_accepted(self) -> None:
        if not hasattr(self, "mem"):
            return
        assert self.store.items() == self.model, "the store is not the log of accepted messages"
        assert self._read("messages") == self.model, "messages() is not the log"

    @invariant()
    def context_is_valid_and_within_budget(self) -> None:
        if not hasattr(self, "mem"):
            return
        self.fired["checks"] += 1
        ctx: list[Message] = self._read("context", "messages")
        oa = self._read("context", "openai")
        an = self._read("context", "anthropic")
        s = self.mem.stats()
        # What is sent is the view, valid for each provider.
        assert oa == order_tool_results(to_openai(ctx)), "the OpenAI context is not the view"
        problems = openai_problems(oa)
        assert not problems, f"invalid OpenAI request: {problems}"
        problems = anthropic_problems(an)
        assert not problems, f"invalid Anthropic request: {problems}"
        assert not any(DOWN_TEXT in m.text() for m in ctx), "error text in the context"
        # The view holds logged messages (or their compressed copies), in log order.
        order = {m.id: i for i, m in enumerate(self.model)}
        body = [m for m in ctx if "summary" not in m.metadata]
        assert all(m.id in order for m in body), "a message not in the log is sent"
        positions = [order[m.id] for m in body]
        in_log_order = sorted(body, key=lambda m: order[m.id])
        # log order, except that a tool result comes right after its call
        assert body == answers_first(in_log_order), "the context is not in log order"
        assert len(set(positions)) == len(positions), "a message is sent twice"
        # Within budget exactly when it says it fits, and so is every request. The view
        # costs at most what it says (a copy without stray results keeps its count).
        cost = request_tokens(ctx, oa, an)
        limit = self.cfg.budget - self.cfg.reply
        assert cost["messages"] <= s.context_tokens, (cost, s.context_tokens)
        assert s.fits == (s.context_tokens <= limit), (s.fits, s.context_tokens, limit)
        if s.fits:  # (the Anthropic request's stand-in user turn included)
            assert max(cost.values()) <= limit, f"over the budget of {limit}: {cost}"
        assert cost["anthropic"] <= s.context_tokens, (cost, s.context_tokens)
        self._observe(s)
        # Pins are sent, unless they do not fit.
        if s.fits:
            missing = self._pins_missing(ctx)
            assert not missing, f"pinned messages not sent while fits: {missing}"
            lost = self._pins_lost_in(an, ctx)
            assert not lost, f"pinned messages left out of the Anthropic request: {lost}"

    def _pins_lost_in(self, an: dict[str, Any], ctx: list[Message]) -> list[str]:
        """Pinned text messages of the view that the Anthropic request leaves out."""
        text = anthropic_text(an)
        sent = {m.id for m in ctx}
        return [
            m.id
            for m in self.model
            if (m.priority == 2 or m.role == "system")
            and type(m.content) is str
            and m.id in sent
            and json.dumps(m.content, ensure_ascii=False)[1:-1] not in text
        ]

    def _observe(self, s: Any) -> None:
        """Count the states reached (the soak prints them: is the machine reaching them?)."""
        seen = self.fired
        for name in ("compaction_pending", "degraded"):
            seen[f"seen {name}"] += bool(getattr(s, name))
        for name in ("omitted", "waiting", "reids", "compressions", "compaction_failures"):
            seen[f"seen {name}"] += getattr(s, name) > 0
        seen["seen not fits"] += not s.fits
        seen["seen compacted"] += s.compactions > 0
        seen["seen summary"] += self.mem.summary.message() is not None
        seen["seen stand_in"] += self.mem.engine.current().stand_in

    def _pins_missing(self, ctx: list[Message]) -> list[str]:
        """Pinned messages (system, priority 2) of the log that ``ctx`` leaves out, but
        for those with tool blocks that cannot be sent yet or ever: a call (or a result)
        in an exchange still waiting for a result, a result whose call is not sent, or a
        result answering nothing (made nowhere, or answered already)."""
        sent = {m.id for m in ctx}
        calls_sent = {c for m in ctx for c in m.tool_use_ids()}
        waiting, first = waiting_positions(self.model)
        missing = []
        for i, m in enumerate(self.model):
            if m.id in sent or not (m.priority == 2 or m.role == "system"):
                continue
            if m.has_tool_use() or m.has_tool_result():
                if i in waiting:
                    continue
                answers = [r for r in m.tool_result_ids() if first.get(r) == i]
                if m.has_tool_result() and not set(answers) & calls_sent:
                    continue
            missing.append(m.id)
        return missing

    @invariant()
    def the_current_turn_is_sent(self) -> None:
        """The newest user message and its open exchange (once every call in it is
        answered) are in every context, whole or with results reduced (same ids), in the
        OpenAI request and, when it has text, in the Anthropic one."""
        if not hasattr(self, "mem"):
            return
        turn, exchange = current_turn(self.model)
        ctx: list[Message] = self._read("context", "messages")
        sent = {m.id: m for m in ctx}
        if turn >= 0:
            m = self.model[turn]
            assert m.id in sent, f"the newest user message {m.id!r} is not sent"
            if m.text().strip():
                an = self._read("context", "anthropic")
                assert an["messages"], "an Anthropic request with no messages"
                text = json.dumps(m.text(), ensure_ascii=False)[1:-1]
                assert text in anthropic_text(an), "the newest user message is not in it"
        for chunk in group_pairs(self.model):  # its calls and results, once answered
            # (what else it took in, typed while a call ran, may have left the view)
            if chunk.pending or not set(chunk.indices) <= set(exchange):
                continue
            tools = [m for m in chunk.messages if m.has_tool_use() or m.has_tool_result()]
            missing = [m.id for m in tools if m.id not in sent]
            assert not missing, f"the open exchange is not sent whole: {missing}"
        for m in ctx:  # a reduced result keeps its id, its role and what it answers
            if REDUCED_KEY in m.metadata:
                (orig,) = [x for x in self.model if x.id == m.id]
                assert m.role == orig.role  # (a copy may also have lost stray results)
                assert set(m.tool_result_ids()) <= set(orig.tool_result_ids())
                assert TOK.count_message(m) < TOK.count_message(orig)

    @invariant()
    def nothing_summarized_twice(self) -> None:
        if not hasattr(self, "mem"):
            return
        twice = self.tally.twice()
        assert not twice, f"summarized more than once (kind, id, calls): {twice}"


MemoryMachine.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None
)
TestMemoryMachine = MemoryMachine.TestCase


def run_machine(machine: Callable[[], RuleBasedStateMachine] = MemoryMachine) -> None:
    """For ``bench/soak_memory.py``: one run of the machine under the current settings."""
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(machine, settings=MemoryMachine.TestCase.settings)

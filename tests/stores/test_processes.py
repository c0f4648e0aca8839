"""Many processes, one store, through ``ConversationMemory`` (issue 9 §5), on every
backend other processes can reach (every name in ``BACKENDS`` but the in-memory SQLite
database, which lives inside one process).

8 processes each run an agent loop of ``CONVOMEM_PROC_APPENDS`` messages (default 500:
user turns, tool calls with their results, answers) through two memories with a small
budget, so they compact all the time with a deterministic offline summarizer: one memory
on a session all 8 share, one on a session of its own. Every add goes through the shared
``RetryPolicy`` (a locked database or a failover is a ``TransientError``; stores are
idempotent, so a retried add never duplicates). Afterwards, from the store itself: no
message lost, none duplicated (by id), seqs gapless, each process's messages in its own
order; and from each process, its final ``context()`` valid for both providers (tool pairs
complete and ordered, the pinned system prompt first, within budget when it fits).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
from collections.abc import Iterator
from typing import Any

import pytest

from _store_backends import BACKENDS, Backend
from convomem.model import Message
from convomem.stores import open_store
from session.test_memory_stateful import anthropic_problems, openai_problems, request_tokens

PROCESSES = 8
APPENDS = int(os.environ.get("CONVOMEM_PROC_APPENDS", "500"))
BUDGET = 300
SYSTEM = Message("sys", "system", content="You are a careful assistant. Keep tool pairs whole.")

# Fresh interpreters, never forks of this process (it holds connections and threads):
# forked from a clean forkserver with convomem preloaded (8 spawned interpreters importing
# convomem take seconds on 2 busy cores); CONVOMEM_STORE_MP_START=spawn spawns each.
START = os.environ.get("CONVOMEM_STORE_MP_START", "forkserver")
CTX = multiprocessing.get_context(START)
if START == "forkserver":
    CTX.set_forkserver_preload(["convomem.stores", "convomem.session"])

# A backend reachable from other processes: every one but the in-memory database.
SHARED_BACKENDS = [name for name in BACKENDS if name != "sqlite_memory"]


@pytest.fixture(params=SHARED_BACKENDS)
def shared_backend(request: pytest.FixtureRequest) -> Backend:
    b: Backend = request.getfixturevalue(request.param)
    return b


# The child's code, run with exec (no test module to import in the child).
WORKER = """
from convomem.model import Message, TextBlock, ToolResultBlock, ToolUseBlock
from convomem.retry import RetryPolicy, stop_after_attempt, wait_full_jitter
from convomem.session import ConversationMemory
from convomem.stores import open_store


def digest(messages, previous):
    # Deterministic and offline: the same input gives the same summary in any process.
    head = "" if previous is None else previous.text[:40] + " | "
    return head + f"{len(messages)} messages, first {messages[0].id}, last {messages[-1].id}"


def message(k, i):
    # An agent loop in fours: a user turn, a tool call, its result, the answer.
    mid, call = f"p{k}-{i}", f"call-{k}-{i - i % 4 + 1}"
    kind = i % 4
    if kind == 0:
        return Message(mid, "user", content=f"process {k} asks question {i} about orders")
    if kind == 1:
        return Message(mid, "assistant", content=(
            TextBlock(f"looking up {i}"), ToolUseBlock(call, "lookup", {"q": i, "k": k})))
    if kind == 2:
        return Message(mid, "user", content=(
            ToolResultBlock(call, f"order {i} of process {k}: shipped"),))
    return Message(mid, "assistant", content=f"process {k}: order {i - 3} has shipped")


def agent(url, k, n, budget, barrier, results):
    db = open_store(url)
    shared = ConversationMemory(budget, store=db.session("shared", user_id="u"), summarizer=digest)
    own = ConversationMemory(budget, store=db.session(f"own-{k}", user_id="u"), summarizer=digest)
    # The agent's own retry of a failed turn (a locked database, a failover).
    policy = RetryPolicy(stop=stop_after_attempt(60), wait=wait_full_jitter(0.005, max=0.2))
    barrier.wait()
    acked = []
    for i in range(n):
        m = message(k, i)
        policy.call(shared.add_message, m)
        policy.call(own.add_message, m)
        acked.append(m.id)
    out = {"k": k, "acked": acked}
    for name, mem in (("shared", shared), ("own", own)):
        s = mem.stats()
        out[name] = {
            "messages": [m.to_dict() for m in mem.context("messages")],
            "openai": mem.context("openai"),
            "anthropic": mem.context("anthropic"),
            "fits": s.fits,
            "compactions": s.compactions,
        }
    results.put(out)
    db.close()
"""


def start(call: str, **names: Any) -> Any:
    p = CTX.Process(target=exec, args=(f"{WORKER}\n{call}\n", names), daemon=True)
    p.start()
    return p


def collect(procs: list[Any], results: Any) -> list[dict[str, Any]]:
    """Each process's report; fails at once (not after a long timeout) when a process
    died without one."""
    reports: list[dict[str, Any]] = []
    while len(reports) < len(procs):
        try:
            reports.append(results.get(timeout=1))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not dead, f"a process died: exit codes {dead}"
            if all(p.exitcode == 0 for p in procs):  # its report must be in the pipe
                reports.append(results.get(timeout=10))
    return reports


def read_log(db: Any, session_id: str) -> Iterator[Any]:
    """Every entry of a session, oldest first, page by page."""
    cursor = None
    while True:
        entries, cursor = db.session(session_id).entries(cursor, 1000)
        yield from entries
        if cursor is None:
            return


def check_log(db: Any, session_id: str, writers: dict[int, list[str]]) -> None:
    """The session holds the system prompt and exactly what each writer was told was
    stored, gapless, each writer's messages in its order."""
    entries = list(read_log(db, session_id))
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1)), "seqs not gapless"
    ids = [e.message.id for e in entries]
    assert len(set(ids)) == len(ids), "a message is stored twice"
    acked = [i for a in writers.values() for i in a]
    assert sorted(ids) == sorted(["sys", *acked]), "a message is lost or unknown"
    assert ids[0] == "sys"
    for k, own in writers.items():
        assert [i for i in ids if i.startswith(f"p{k}-")] == own, f"process {k} out of order"


def check_context(report: dict[str, Any], where: str) -> None:
    """A process's final context: valid requests, the pinned prompt, within budget."""
    ctx = [Message.from_dict(d) for d in report["messages"]]
    oa, an = report["openai"], report["anthropic"]
    assert report["compactions"] > 0, f"{where}: never compacted: the test proves little"
    assert not openai_problems(oa), f"{where}: {openai_problems(oa)}"
    assert not anthropic_problems(an), f"{where}: {anthropic_problems(an)}"
    assert ctx[0].id == "sys", f"{where}: the pinned system prompt is not sent first"
    assert report["fits"], f"{where}: does not fit a budget of {BUDGET}"
    cost = request_tokens(ctx, oa, an)
    assert cost["messages"] <= BUDGET and cost["openai"] <= BUDGET, f"{where}: {cost}"


def test_eight_agents_through_conversation_memory_lose_and_duplicate_nothing(
    shared_backend: Backend,
) -> None:
    url = shared_backend.fresh_url()
    with open_store(url) as db:  # the session exists, with its prompt, before they start
        for sid in ["shared", *(f"own-{k}" for k in range(PROCESSES))]:
            db.session(sid, user_id="u").append([SYSTEM])
    barrier, results = CTX.Barrier(PROCESSES), CTX.Queue()
    procs = [
        start(
            "agent(url, k, n, budget, barrier, results)",
            url=url,
            k=k,
            n=APPENDS,
            budget=BUDGET,
            barrier=barrier,
            results=results,
        )
        for k in range(PROCESSES)
    ]
    reports = collect(procs, results)
    for p in procs:
        p.join(600)  # a hang guard: each reported already
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    acked = {r["k"]: r["acked"] for r in reports}
    assert sorted(acked) == list(range(PROCESSES))
    assert all(len(a) == APPENDS for a in acked.values())
    with open_store(url) as db:
        check_log(db, "shared", acked)
        for k in range(PROCESSES):
            check_log(db, f"own-{k}", {k: acked[k]})
    for r in reports:
        check_context(r["shared"], f"process {r['k']}, shared session")
        check_context(r["own"], f"process {r['k']}, own session")

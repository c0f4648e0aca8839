"""ConvomemStore (LangGraph's BaseStore over a convomem database).

LangGraph's own ``InMemoryStore`` is the oracle for what both keep (put, delete, get,
filtered listing, namespaces) under random operation sequences; recall search, TTL with an
injected clock, erasure, tenants, async twins and a real graph using the store are checked
directly.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from convomem import aopen_store, open_store
from convomem.errors import ConfigError
from convomem.integrations.langgraph import ConvomemStore
from convomem.recall import AsyncRecallIndex, RecallIndex

EXAMPLES = int(os.environ.get("CONVOMEM_STORE_EXAMPLES", "30"))

namespaces = st.sampled_from(
    [("memories", "u1"), ("memories", "u2"), ("memories", "u1", "work"), ("prefs", "u1")]
)
keys = st.sampled_from(["a", "b", "c"])
values = st.fixed_dictionaries(
    {"n": st.integers(0, 3), "tag": st.sampled_from(["x", "y"])},
    optional={"deep": st.fixed_dictionaries({"k": st.integers(0, 2)})},
)
filters = st.sampled_from(
    [
        None,
        {"tag": "x"},
        {"n": {"$gt": 1}},
        {"n": {"$lte": 1}, "tag": {"$ne": "y"}},
        {"deep": {"k": 1}},
    ]
)
ops = st.one_of(
    st.tuples(st.just("put"), namespaces, keys, values),
    st.tuples(st.just("delete"), namespaces, keys),
    st.tuples(st.just("get"), namespaces, keys),
    st.tuples(st.just("search"), st.sampled_from([("memories",), ("memories", "u1"), ()]), filters),
    st.tuples(
        st.just("namespaces"),
        st.sampled_from([None, ("memories",), ("*", "u1")]),
        st.sampled_from([None, 1, 2]),
    ),
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def view(items: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((tuple(i.namespace), i.key, repr(i.value)) for i in items)


@settings(max_examples=EXAMPLES)
@given(st.lists(ops, max_size=25))
def test_it_keeps_what_langgraphs_in_memory_store_keeps(sequence: list[Any]) -> None:
    oracle = InMemoryStore()
    clock = Clock()
    with open_store("sqlite://") as db:
        ours = ConvomemStore(db, user_at=1, clock=clock)
        for op, *args in sequence:
            clock.now += 1
            if op == "put":
                ours.put(*args)
                oracle.put(*args)
            elif op == "delete":
                ours.delete(*args)
                oracle.delete(*args)
            elif op == "get":
                a, b = ours.get(*args), oracle.get(*args)
                assert (a is None) == (b is None)
                if a is not None and b is not None:
                    assert (a.namespace, a.key, a.value) == (b.namespace, b.key, b.value)
            elif op == "search":
                prefix, flt = args
                found = ours.search(prefix, filter=flt, limit=100)
                assert view(found) == view(oracle.search(prefix, filter=flt, limit=100))
                stamps = [i.updated_at for i in found]
                assert stamps == sorted(stamps, reverse=True)  # newest updated first
                page = ours.search(prefix, filter=flt, limit=2, offset=1)
                assert [(i.namespace, i.key) for i in page] == [
                    (i.namespace, i.key) for i in found[1:3]
                ]
            else:
                prefix, depth = args
                got = ours.list_namespaces(prefix=prefix, max_depth=depth)
                # InMemoryStore also lists namespaces it once held (or was read in);
                # ours, like PostgresStore, those with items: compare with a copy of them
                live = InMemoryStore()
                for item in oracle.search((), limit=1000):
                    live.put(item.namespace, item.key, item.value)
                assert got == live.list_namespaces(prefix=prefix, max_depth=depth)


def test_search_with_recall_is_per_user_and_follows_updates() -> None:
    with open_store("sqlite://") as db:
        store = ConvomemStore(db, user_at=1, recall=RecallIndex(db), fields=["text"])
        store.put(("memories", "u1"), "diet", {"text": "vegetarian since 2019", "n": 1})
        store.put(("memories", "u1"), "city", {"text": "lives in Lisbon by the river"})
        store.put(("memories", "u1"), "secret", {"text": "vegetarian pizza"}, index=False)
        store.put(("memories", "u2"), "diet", {"text": "vegetarian on weekdays"})
        hits = store.search(("memories", "u1"), query="is the user vegetarian?")
        assert hits[0].key == "diet" and hits[0].namespace == ("memories", "u1")
        assert {h.key for h in hits} <= {"diet", "city"}  # not u2's, not the unindexed one
        assert all(h.namespace == ("memories", "u1") for h in hits)
        assert hits[0].score is not None and hits[0].value["n"] == 1
        city = store.search(("memories", "u1"), query="which river city")
        assert city[0].key == "city"
        store.put(("memories", "u1"), "diet", {"text": "eats fish now"})  # an update
        assert "vegetarian" not in str(store.search(("memories", "u1"), query="vegetarian"))
        assert store.search(("memories", "u1"), query="fish")[0].value == {"text": "eats fish now"}
        assert [
            h.key for h in store.search(("memories", "u1"), query="fish", filter={"text": "nope"})
        ] == []
        store.delete(("memories", "u1"), "city")
        assert "city" not in {h.key for h in store.search(("memories", "u1"), query="Lisbon")}
        assert {i.key for i in store.search(("memories", "u1"))} == {"diet", "secret"}
        with pytest.raises(ConfigError, match="namespace_prefix"):
            store.search(("memories",), query="vegetarian")  # recall needs the user


def test_ttl_expires_refreshes_and_sweeps(tmp_path: Path) -> None:
    clock = Clock()
    with open_store(f"sqlite:///{tmp_path}/s.db", clock=clock) as db:
        recall = RecallIndex(db, clock=clock)
        store = ConvomemStore(
            db, user_at=1, recall=recall, clock=clock, ttl={"refresh_on_read": True}
        )
        store.put(("m", "u1"), "short", {"text": "ephemeral note"}, ttl=1.0)
        store.put(("m", "u1"), "long", {"text": "durable note"})
        clock.now += 50
        assert store.get(("m", "u1"), "short") is not None  # read: refreshed to now + 60 s
        clock.now += 50
        assert store.get(("m", "u1"), "short", refresh_ttl=False) is not None
        clock.now += 11
        assert store.get(("m", "u1"), "short") is None  # expired: invisible at once
        assert [i.key for i in store.search(("m", "u1"))] == ["long"]
        assert [i.key for i in store.search(("m", "u1"), query="ephemeral note")] == ["long"]

        def indexed() -> list[str]:
            hits = recall.search("ephemeral", user_id="u1", kinds="langgraph", distinct=False)
            return sorted(h.text for h in hits)

        assert indexed() == ['{"text": "durable note"}', '{"text": "ephemeral note"}']
        assert store.sweep_ttl() == 1
        assert indexed() == ['{"text": "durable note"}']  # the expired one is gone too
        assert store.sweep_ttl() == 0
        future = store.start_ttl_sweeper(sweep_interval_minutes=60)
        assert store.stop_ttl_sweeper(timeout=10) and future.result(timeout=10) is None


def test_erasing_a_user_erases_their_items_and_tenants_do_not_mix() -> None:
    with open_store("sqlite://") as db:
        recall = RecallIndex(db)
        a = ConvomemStore(db, user_at=1, recall=recall, tenant="acme")
        b = ConvomemStore(db, user_at=1, recall=recall, tenant="globex")
        a.put(("memories", "u1"), "k", {"text": "acme secret plan"})
        b.put(("memories", "u1"), "k", {"text": "globex other plan"})
        assert a.get(("memories", "u1"), "k").value == {"text": "acme secret plan"}
        assert [i.value["text"] for i in b.search(("memories", "u1"), query="plan")] == [
            "globex other plan"
        ]
        assert b.list_namespaces() == [("memories", "u1")]
        db.erase_user("u1", tenant="acme")
        assert a.get(("memories", "u1"), "k") is None
        assert a.search(("memories", "u1"), query="secret plan") == []
        assert b.get(("memories", "u1"), "k") is not None


def test_bad_input_changes_nothing() -> None:
    with open_store("sqlite://") as db:
        store = ConvomemStore(db, user_at=1)
        store.put(("m", "u1"), "k", {"v": 1})
        with pytest.raises(ConfigError, match="JSON"):
            store.put(("m", "u1"), "k", {"v": object()})
        assert store.get(("m", "u1"), "k").value == {"v": 1}
        with pytest.raises(ConfigError, match="user id at position 1"):
            store.put(("m",), "k", {"v": 1})
        with pytest.raises(ConfigError, match="operator"):
            store.search(("m",), filter={"v": {"$regex": "x"}})
        with pytest.raises(ConfigError, match="user_at"):
            ConvomemStore(db, recall=RecallIndex(db))
        with pytest.raises(ConfigError, match="this store's database"):
            ConvomemStore(db, user_at=1, recall=RecallIndex("sqlite://"))


async def test_async_twins_over_both_kinds_of_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    clock = Clock()
    adb = await aopen_store(url)
    try:
        store = ConvomemStore(adb, user_at=1, recall=AsyncRecallIndex(adb), clock=clock)
        await store.aput(("memories", "u1"), "diet", {"text": "vegetarian since 2019"})
        await store.aput(("memories", "u1"), "gone", {"text": "vegetarian once"}, ttl=1.0)
        clock.now += 61
        hits = await store.asearch(("memories", "u1"), query="vegetarian")
        assert [h.key for h in hits] == ["diet"]
        assert await store.asweep_ttl() == 1
        assert (await store.aget(("memories", "u1"), "diet")).value["text"].startswith("veg")
        assert await store.alist_namespaces() == [("memories", "u1")]
        with pytest.raises(ConfigError, match="async"):
            store.get(("memories", "u1"), "diet")
    finally:
        await adb.aclose()
    with open_store(url) as db:  # a restart, sync: the items are there
        store = ConvomemStore(db, user_at=1, recall=RecallIndex(db))
        assert (await store.aget(("memories", "u1"), "diet")) is not None
        assert [h.key for h in store.search(("memories", "u1"), query="vegetarian")] == ["diet"]


class State(TypedDict):
    user: str
    text: str
    found: list[str]


def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    ns = ("memories", state["user"])
    store.put(ns, f"m{len(store.search(ns, limit=100))}", {"text": state["text"]})
    found = [i.value["text"] for i in store.search(ns, query=state["text"], limit=3)]
    return {"found": found}


def test_a_graph_uses_it_as_its_store(tmp_path: Path) -> None:
    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", END)
    url = f"sqlite:///{tmp_path}/g.db"
    for run in range(2):  # the second run is a restart over the same file
        with open_store(url) as db:
            app = graph.compile(store=ConvomemStore(db, user_at=1, recall=RecallIndex(db)))
            for i in range(15):
                out = app.invoke(
                    {"user": "u1", "text": f"fact {run} {i} about topic{i}", "found": []}
                )
                assert f"fact {run} {i} about topic{i}" in out["found"]
            out = app.invoke({"user": "u2", "text": "topic3", "found": []})
            assert out["found"] == ["topic3"] * (run + 1)  # u2 sees only its own
    with open_store(url) as db:
        assert len(ConvomemStore(db, user_at=1).search(("memories", "u1"), limit=100)) == 30

"""The storage seam: the Store / AsyncStore protocols and InMemoryStore."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, InvalidMessage
from convomem.model import Message
from convomem.stores import AsyncStore, InMemoryStore, Store, check_items, check_limit


def msg(i: int) -> Message:
    return Message(f"m{i}", "user" if i % 2 == 0 else "assistant", content=f"text {i}")


def test_in_memory_store_implements_the_protocol() -> None:
    store = InMemoryStore()
    assert isinstance(store, Store)
    assert store.get_items() == []
    assert store.pop_item() is None


def test_add_get_pop_clear() -> None:
    store = InMemoryStore([msg(0)])
    store.add_items([msg(1), msg(2)])
    assert [m.id for m in store.get_items()] == ["m0", "m1", "m2"]
    assert len(store) == 3
    assert store.pop_item() == msg(2)
    assert [m.id for m in store.get_items()] == ["m0", "m1"]
    store.clear_session()
    assert store.get_items() == [] and len(store) == 0
    assert "0 messages" in repr(store)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 12), limit=st.one_of(st.none(), st.integers(0, 15)))
def test_get_items_limit_is_the_newest_in_order(n: int, limit: int | None) -> None:
    items = [msg(i) for i in range(n)]
    store = InMemoryStore(items)
    expected = items if limit is None else items[max(0, n - limit) :]
    assert store.get_items(limit) == expected
    assert store.get_items(limit=limit) == expected


def test_get_items_returns_a_copy() -> None:
    store = InMemoryStore([msg(0)])
    store.get_items().append(msg(1))
    assert len(store) == 1


@pytest.mark.parametrize("limit", [-1, 1.5, True, "3"])
def test_bad_limit_names_the_value(limit: object) -> None:
    with pytest.raises(ConfigError, match="limit="):
        InMemoryStore().get_items(limit)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="limit="):
        check_limit(limit)


def test_add_items_is_all_or_nothing() -> None:
    store = InMemoryStore([msg(0)])
    with pytest.raises(InvalidMessage, match=r"items\[1\]"):
        store.add_items([msg(1), "not a message", msg(2)])  # type: ignore[list-item]
    assert [m.id for m in store.get_items()] == ["m0"]


@pytest.mark.parametrize("bad", [msg(0), "text", b"x", 3, None])
def test_add_items_wants_a_sequence_of_messages(bad: object) -> None:
    store = InMemoryStore()
    with pytest.raises(InvalidMessage, match="items"):
        store.add_items(bad)  # type: ignore[arg-type]
    assert store.get_items() == []
    with pytest.raises(InvalidMessage, match="items"):
        check_items(bad)


def test_constructor_checks_items() -> None:
    with pytest.raises(InvalidMessage, match=r"items\[0\]"):
        InMemoryStore([{"role": "user"}])  # type: ignore[list-item]


class AsyncListStore:
    """A minimal AsyncStore, as a backend would write one."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()

    async def get_items(self, limit: int | None = None) -> list[Message]:
        return self.inner.get_items(limit)

    async def add_items(self, items: Sequence[Message]) -> None:
        self.inner.add_items(items)

    async def pop_item(self) -> Message | None:
        return self.inner.pop_item()

    async def clear_session(self) -> None:
        self.inner.clear_session()


async def test_async_store_protocol() -> None:
    store = AsyncListStore()
    assert isinstance(store, AsyncStore)
    await store.add_items([msg(0), msg(1)])
    assert [m.id for m in await store.get_items(1)] == ["m1"]
    assert await store.pop_item() == msg(1)
    await store.clear_session()
    assert await store.get_items() == []

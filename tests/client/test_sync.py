"""``Client`` against the real app in-process and against a real ``convomem serve``
process: every route it mirrors, pagination, idempotent appends, ``If-Match`` conflicts
(raised, or retried when asked, under real contention), the typed errors, and chat."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from _service_support import Service
from convomem.client import (
    Client,
    MessageIdConflict,
    NotFound,
    RequestInvalid,
    SessionMoved,
    Unauthorized,
)
from convomem.errors import ConcurrentUpdate, InvalidMessage, MessageConflict
from convomem.model import Message


@pytest.fixture(params=["in-process", pytest.param("process", marks=pytest.mark.server)])
def svc(request: pytest.FixtureRequest) -> Service:
    return request.getfixturevalue("service" if request.param == "in-process" else "served")


@pytest.fixture
def client(svc: Service) -> Iterator[Client]:
    with Client(svc.url, svc.key, http=svc.http) as c:
        yield c


_n = iter(range(10**6))


def fresh(client: Client, user: str = "u1") -> str:
    """A new session (the served process is shared by the module's tests)."""
    sid = f"s-{next(_n)}-{threading.get_ident()}"
    assert client.create_session(user, id=sid)["id"] == sid
    return sid


def test_sessions_and_messages_round_trip_with_pages(client: Client) -> None:
    user = f"user-{next(_n)}"
    sids = [fresh(client, user) for _ in range(5)]
    assert client.session(sids[0])["user_id"] == user
    assert sorted(s["id"] for s in client.iter_sessions(user, page_size=2)) == sorted(sids)
    page, cursor = client.list_sessions(user, limit=2)
    assert len(page) == 2 and cursor is not None
    sid = sids[0]
    dicts = [{"role": "user", "content": f"question {i}"} for i in range(7)]
    assert client.append(sid, dicts)["last_seq"] == 7
    objects = [Message(role="assistant", content="an answer", metadata={"k": 1})]
    assert client.append(sid, objects)["last_seq"] == 8
    log = list(client.iter_messages(sid, page_size=3))
    assert [m["seq"] for m in log] == list(range(1, 9))
    assert [m["content"] for m in log] == [d["content"] for d in dicts] + ["an answer"]
    assert log[-1]["id"] == objects[0].id and log[-1]["metadata"] == {"k": 1}
    ctx = client.context(sid, budget=200)
    assert ctx["context"][-1] == {"role": "assistant", "content": "an answer"}
    assert ctx["accounting"]["log_messages"] == 8
    client.delete_session(sid)
    with pytest.raises(NotFound) as info:
        client.session(sid)
    assert isinstance(info.value, LookupError) and info.value.status == 404


def test_appends_are_idempotent_by_message_id_and_conflicts_are_typed(client: Client) -> None:
    sid = fresh(client)
    msgs = [{"role": "user", "content": "hello", "id": "m1"}]
    client.append(sid, msgs)
    client.append(sid, msgs)  # a retried request
    assert [m["id"] for m in client.iter_messages(sid)] == ["m1"]
    with pytest.raises(MessageIdConflict) as info:
        client.append(sid, [{"role": "user", "content": "other", "id": "m1"}])
    assert isinstance(info.value, MessageConflict) and info.value.status == 409


def test_if_match_raises_when_the_session_moved_and_retries_when_asked(client: Client) -> None:
    sid = fresh(client)
    client.append(sid, [{"role": "user", "content": "one"}], if_match=0)
    with pytest.raises(SessionMoved) as info:
        client.append(sid, [{"role": "user", "content": "two"}], if_match=0)
    assert isinstance(info.value, ConcurrentUpdate) and info.value.actual == 1
    done = client.append(sid, [{"role": "user", "content": "two"}], if_match=0, retry_conflicts=1)
    assert done["last_seq"] == 2
    assert [m["content"] for m in client.iter_messages(sid)] == ["one", "two"]


def test_writers_racing_with_if_match_lose_nothing_and_duplicate_nothing(
    served: Service,
) -> None:
    """Four threads, each with its own client, append 15 messages each to one session
    with ``If-Match`` and conflict retries: every message lands once, seqs are gapless."""
    with Client(served.url, served.key) as c:
        sid = fresh(c)
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            with Client(served.url, served.key) as c:
                for i in range(15):
                    seen = c.session(sid)["last_seq"]
                    msg = {"role": "user", "content": f"w{w} m{i}", "id": f"w{w}-{i}"}
                    c.append(sid, [msg], if_match=seen, retry_conflicts=200)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Client(served.url, served.key) as c:
        log = list(c.iter_messages(sid, page_size=50))
    assert [m["seq"] for m in log] == list(range(1, 61))
    assert sorted(m["id"] for m in log) == sorted(f"w{w}-{i}" for w in range(4) for i in range(15))
    for w in range(4):  # each writer's messages in its own order
        mine = [m["id"] for m in log if m["id"].startswith(f"w{w}-")]
        assert mine == [f"w{w}-{i}" for i in range(15)]


def test_typed_errors_name_the_field(svc: Service, client: Client) -> None:
    sid = fresh(client)
    with pytest.raises(RequestInvalid) as info:
        client.append(sid, [{"role": "wizard", "content": "x"}])
    assert isinstance(info.value, InvalidMessage) and info.value.status == 422
    assert "role" in info.value.field and info.value.value == "wizard"
    assert list(client.iter_messages(sid)) == []  # nothing written
    with Client(svc.url, "not-a-key", http=svc.http) as bad, pytest.raises(Unauthorized):
        bad.session(sid)
    with Client(svc.url, svc.other_key, http=svc.http) as other, pytest.raises(NotFound):
        other.session(sid)  # another tenant's session does not exist for this key


def test_chat_streams_the_reply(svc: Service, client: Client) -> None:
    sid = fresh(client)
    stream = client.chat(sid, "Where is my parcel?")
    assert list(stream) == svc.upstream.deltas()
    assert stream.text == svc.upstream.reply
    log = list(client.iter_messages(sid))
    assert [(m["role"], m["content"]) for m in log] == [
        ("user", "Where is my parcel?"),
        ("assistant", svc.upstream.reply),
    ]
    assert log[-1]["id"] == stream.message_id


def test_operations_routes(client: Client) -> None:
    assert client.health()["status"] == "ok"
    assert client.ready()["status"] == "ready"
    assert "convomem_requests_total" in client.metrics()


def test_users_facts_recall_and_erasure(client: Client, svc: Service) -> None:
    user = f"user-{next(_n)}"
    sid = fresh(client, user)
    client.append(
        sid, [{"role": "user", "content": "I live in Lyon and I am allergic to peanuts."}]
    )
    hits = client.search(user, "peanuts allergy", k=3)["hits"]
    assert hits and "peanuts" in hits[0]["text"]
    facts = client.facts(user)
    assert facts["user_id"] == user and facts["current"], facts
    with Client(svc.url, svc.other_key, http=svc.http) as other, pytest.raises(NotFound):
        other.search(user, "peanuts allergy")  # this user does not exist in another tenant
    erased = client.erase_user(user)
    assert erased["sessions"] == 1
    with pytest.raises(NotFound):
        client.session(sid)
    with pytest.raises(NotFound):
        client.facts(user)


def test_facts_are_set_corrected_and_deleted_by_id(client: Client, svc: Service) -> None:
    user = f"user-{next(_n)}"
    sid = fresh(client, user)
    client.append(sid, [{"role": "user", "content": "My email is ana@old.example"}])
    (email,) = client.facts(user)["current"]
    fixed = client.update_fact(user, email["id"], value="ana@new.example")
    assert fixed["value"] == "ana@new.example" and fixed["manual"] and fixed["set_by"]
    every = client.facts(user, history=True)
    assert [f["value"] for f in every["history"]] == ["ana@old.example", "ana@new.example"]
    assert client.fact(user, email["id"])["current"] is False
    added = client.add_fact(user, "city", "Porto", if_match=every["version"])
    assert added["statement"] == "city: Porto"
    with pytest.raises(SessionMoved) as moved:  # a ConcurrentUpdate: the facts moved
        client.add_fact(user, "city", "Faro", if_match=every["version"])
    assert isinstance(moved.value, ConcurrentUpdate)
    assert moved.value.actual == client.facts(user)["version"]
    client.delete_fact(user, added["id"])
    assert {f["attribute"] for f in client.facts(user)["current"]} == {"email"}
    with pytest.raises(NotFound):
        client.delete_fact(user, added["id"])
    with pytest.raises(RequestInvalid) as bad:
        client.update_fact(user, fixed["id"], value="")
    assert bad.value.field == "value"
    with Client(svc.url, svc.other_key, http=svc.http) as other, pytest.raises(NotFound):
        other.update_fact(user, fixed["id"], value="x@y.z")  # another tenant: no such user
    assert client.facts(user)["current"][0]["value"] == "ana@new.example"

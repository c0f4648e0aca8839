"""Erase and delete leave nothing (issue 20 §2), held at the bytes: a real ``convomem
serve`` over a SQLite file writes a user's sessions (messages, metadata, facts, recall
items, idempotency records), deletes one session and erases the user; once the process
is gone (stopped, or killed with SIGKILL) no byte of the database's files (``.db``,
``-wal``, ``-shm``) holds any of the user's distinctive strings, nor the digest of a
request body they sent, while a user who was not erased is still there."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from _servers_app import Launcher, create_key, serve_app  # noqa: F401
from convomem.server.idempotency import body_digest
from convomem.server.models import AppendRequest

GONE = {
    "user": "zq-user-4471",
    "session": "zq-sess-9051",
    "other session": "zq-sess-6620",
    "message id": "zq-mid-3318",
    "content": "zq-secret-payload-7734",
    "metadata": "zq-meta-2219",
    "reply": "zq-reply-5150",
    "place": "Zqville",
}
KEPT = {"user": "kp-user-1001", "content": "kp-kept-payload-2002"}


def _files(db: Path) -> dict[str, bytes]:
    out = {}
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{db}{suffix}")
        if path.exists():
            out[path.name] = path.read_bytes()
    return out


@pytest.mark.parametrize("stop", ["terminate", "kill"])
def test_an_erased_user_leaves_no_byte_in_the_database_files(
    serve_app: Launcher,  # noqa: F811
    tmp_path: Path,
    stop: str,
) -> None:
    db = tmp_path / "erase.db"
    url = f"sqlite:///{db}"
    h = {"Authorization": f"Bearer {create_key(url, 'acme')}"}
    (replica,) = serve_app(url, 1, "--rate", "0")
    digests = []
    with httpx.Client(base_url=replica.url, timeout=60) as http:

        def append(sid: str, body: dict[str, object], key: str) -> None:
            r = http.post(
                f"/v1/sessions/{sid}/messages", json=body, headers=h | {"Idempotency-Key": key}
            )
            assert r.status_code == 201, r.text
            digests.append(body_digest(sid, AppendRequest(**body).model_dump(mode="json")))

        for sid in (GONE["session"], GONE["other session"]):
            made = {"id": sid, "user_id": GONE["user"], "metadata": {"note": GONE["metadata"]}}
            assert http.post("/v1/sessions", json=made, headers=h).status_code == 201
            said = f"I live in {GONE['place']}. My code is {GONE['content']}."
            body = {
                "messages": [
                    {"id": f"{GONE['message id']}-{sid}", "role": "user", "content": said},
                    {"role": "assistant", "content": f"noted {GONE['reply']}"},
                ]
            }
            append(sid, body, f"idem-{sid}")
            ctx = http.get(f"/v1/sessions/{sid}/context", params={"query": "code"}, headers=h)
            assert ctx.status_code == 200
        kept = {"id": "kp-sess", "user_id": KEPT["user"]}
        assert http.post("/v1/sessions", json=kept, headers=h).status_code == 201
        append("kp-sess", {"messages": [{"role": "user", "content": KEPT["content"]}]}, "kp")
        search = {"user_id": GONE["user"], "query": GONE["content"]}
        assert http.post("/v1/recall/search", json=search, headers=h).json()["hits"]
        facts = http.get(f"/v1/users/{GONE['user']}/facts", headers=h).json()
        assert any(f["value"] == GONE["place"] for f in facts["current"])
        # while it runs the files hold them (the check below can see them)
        assert any(GONE["content"].encode() in b for b in _files(db).values())
        assert http.delete(f"/v1/sessions/{GONE['session']}", headers=h).status_code == 204
        assert http.delete(f"/v1/users/{GONE['user']}", headers=h).status_code == 200
    if stop == "kill":
        replica.process.send_signal(signal.SIGKILL)
        replica.process.wait(30)
    else:
        replica.stop()
    files = _files(db)
    found = [
        (name, what)
        for name, raw in files.items()
        for what, text in [*GONE.items(), *(("digest", d) for d in digests[:2])]
        if text.encode() in raw
    ]
    assert found == [], found
    assert KEPT["content"].encode() in b"".join(files.values())


def test_a_replica_never_serves_what_another_erased(
    serve_app: Launcher,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Replica A holds the session's memory (and its user's recall partition) in its
    caches; replica B erases the user, who comes back with a session of the same id and
    as many messages: A serves only what is there now."""
    url = f"sqlite:///{tmp_path / 'replicas.db'}"
    h = {"Authorization": f"Bearer {create_key(url, 'acme')}"}
    a, b = serve_app(url, 2, "--rate", "0")
    with httpx.Client(base_url=a.url, timeout=60) as ha, httpx.Client(base_url=b.url) as hb:

        def seed(http: httpx.Client, text: str) -> None:
            made = {"id": "s", "user_id": "u"}
            assert http.post("/v1/sessions", json=made, headers=h).status_code == 201
            body = {"messages": [{"role": "user", "content": f"{text} {i}"} for i in range(4)]}
            assert http.post("/v1/sessions/s/messages", json=body, headers=h).status_code == 201

        def seen(http: httpx.Client) -> str:
            ctx = http.get("/v1/sessions/s/context", headers=h).json()["context"]
            hits = http.post(
                "/v1/recall/search", json={"user_id": "u", "query": "payload"}, headers=h
            ).json()["hits"]
            return str(ctx) + str(hits)

        seed(ha, "old-payload")
        assert "old-payload" in seen(ha)  # cached in A: the memory and the partition
        assert hb.delete("/v1/users/u", headers=h).status_code == 200
        assert ha.get("/v1/sessions/s", headers=h).status_code == 404
        seed(hb, "new-payload")  # same id, same seqs, same counters
        now = seen(ha)
        assert "new-payload" in now and "old-payload" not in now

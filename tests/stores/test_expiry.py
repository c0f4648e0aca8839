"""``stores.expiry``: the expiry rule in Python (``expired``) and in SQL
(``expired_sessions_sql``, what recall and facts filter on) agree, on SQLite and
PostgreSQL, for sessions under the database's TTL, their own TTL in metadata (a number;
anything else is no TTL), both, or neither, at any moment."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _store_backends import _pg_connect, _pg_settings, _sqlite_raw
from convomem.stores import open_store
from convomem.stores.expiry import TTL_KEY, expired, expired_sessions_sql, expires_at

own_ttls = st.one_of(
    st.none(),
    st.integers(1, 50),
    st.floats(0.5, 50.0),
    st.sampled_from([True, "10", [5], {"s": 1}]),  # not numbers: no TTL of its own
)
sessions = st.lists(st.tuples(st.integers(0, 60), own_ttls, st.booleans()), min_size=1, max_size=6)


def _sql_expired(db: Any, kind: str, user: str, now: float) -> set[str]:
    if kind == "sqlite":
        with contextlib.closing(_sqlite_raw(db)) as conn:
            rows = conn.execute(expired_sessions_sql("sqlite"), ("", user, now, now)).fetchall()
    else:
        table = f"{_pg_settings(db).schema}.convomem_sessions"
        with _pg_connect(db) as conn:
            rows = conn.execute(
                expired_sessions_sql("postgresql", table), ("", user, now, now)
            ).fetchall()
    return {str(r[0]) for r in rows}


@pytest.mark.parametrize("backend_name", ["sqlite_file", "postgresql"])
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=sessions,
    db_ttl=st.one_of(st.none(), st.integers(5, 80)),
    probes=st.lists(st.floats(0, 200), min_size=1, max_size=5),
)
def test_the_sql_rule_is_the_python_rule(
    request: pytest.FixtureRequest,
    backend_name: str,
    data: list[tuple[int, Any, bool]],
    db_ttl: int | None,
    probes: list[float],
) -> None:
    backend: Any = request.getfixturevalue(backend_name)
    now = [0.0]
    db = open_store(backend.fresh_url(), ttl=db_ttl, clock=lambda: now[0])
    try:
        for i, (at, ttl, write_after) in enumerate(data):
            now[0] = float(at)
            meta = {} if ttl is None else {TTL_KEY: ttl}
            s = db.session(f"s{i}", user_id="u")
            s.set_metadata(meta)
            if write_after:  # a later write moves updated_at (and the store's expiry)
                now[0] = float(at) + 3
                s.add_items([])
        kind = "sqlite" if backend_name == "sqlite_file" else "postgresql"
        now[0] = 0.0
        infos = {}
        for i in range(len(data)):  # read while nothing expired yet (the store hides those)
            info = db.session(f"s{i}").info()
            assert info is not None
            infos[info.session_id] = info
        for t in probes:
            python = {sid for sid, info in infos.items() if expired(info, t)}
            assert _sql_expired(db, kind, "u", t) == python, (t, infos)
            assert _sql_expired(db, kind, "someone else", t) == set()
        for info in infos.values():
            own = info.metadata.get(TTL_KEY)
            if own is None or isinstance(own, bool) or not isinstance(own, int | float):
                assert expires_at(info) == info.expires_at
    finally:
        db.close()

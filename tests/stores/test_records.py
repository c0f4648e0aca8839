"""``stores.records``: the one id rule (``check_id``), what plain JSON is
(``json_problem``) and cursors out of range, each against a brute-force statement of the
rule."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.stores.records import (
    ID_RULE,
    MAX_POSITION,
    check_id,
    decode_cursor,
    json_problem,
)


def _allowed(value: str) -> bool:
    """The id rule, said the plain way."""
    if not 1 <= len(value) <= 256 or value in (".", ".."):
        return False
    for c in value:
        if ord(c) < 0x20 or ord(c) == 0x7F or c in "/\\" or 0xD800 <= ord(c) <= 0xDFFF:
            return False
    return True


ids = st.one_of(
    st.text(max_size=8),
    st.text(alphabet=st.sampled_from("./\\a \x00\x7f\ud800é🙂%?#"), max_size=4),
    st.sampled_from([".", "..", "...", "a" * 256, "a" * 257]),
)


@given(ids)
def test_check_id_is_the_rule(value: str) -> None:
    if _allowed(value):
        assert check_id("session_id", value) == value
    else:
        with pytest.raises(ConfigError, match=r"session_id=.*an id must be") as err:
            check_id("session_id", value)
        assert ID_RULE in str(err.value)


def test_check_id_refuses_what_is_not_a_string() -> None:
    for bad in (None, 3, b"x", ["x"]):
        with pytest.raises(ConfigError, match="user_id="):
            check_id("user_id", bad)


def _plain(value: Any) -> bool:
    """Whether ``value`` survives strict JSON and UTF-8 unchanged (the oracle)."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except (ValueError, TypeError):
        return False
    return bool(json.loads(text) == value)


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(alphabet=st.sampled_from("ab\ud800\udfffé"), max_size=3),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(alphabet="ab\udc00", max_size=2), inner, max_size=3),
        st.tuples(inner),
    ),
    max_leaves=8,
)


@given(json_values)
def test_json_problem_names_what_strict_json_refuses(value: Any) -> None:
    problem = json_problem("body", value)
    assert (problem is None) == _plain(value)
    assert problem is None or problem.startswith("body")


def test_json_problem_points_at_the_culprit() -> None:
    body = {"messages": [{"content": "ok"}, {"metadata": {"x": float("inf")}}]}
    assert (
        json_problem("body", body)
        == "body['messages'][1]['metadata']['x']=inf: must be a finite number"
    )
    assert "lone surrogate" in (json_problem("body", {"k": "a\ud800"}) or "")


def test_a_cursor_past_the_largest_position_is_refused() -> None:
    assert decode_cursor(f"f:{MAX_POSITION}", "f", "page()") == MAX_POSITION
    for big in (MAX_POSITION + 1, 10**19 - 1):
        with pytest.raises(ConfigError, match="out of range"):
            decode_cursor(f"f:{big}", "f", "page()")

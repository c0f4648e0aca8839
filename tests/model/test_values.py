"""JSON values: validated, frozen, keyed by their JSON text; thawed back to plain data."""

from __future__ import annotations

import copy
import enum
import json
import math
import pickle
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import InvalidMessage
from convomem.model.values import EMPTY, MAX_DEPTH, FrozenDict, FrozenList, freeze, thaw

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


def text_of(value: Any) -> str:
    """The oracle: two values are the same JSON exactly when this text is."""
    return json.dumps(value, ensure_ascii=False)


@settings(max_examples=100)
@given(json_values)
def test_freeze_then_thaw_gives_the_value_back(value: Any) -> None:
    frozen, _ = freeze(value, "v")
    assert text_of(frozen) == text_of(value)  # json.dumps reads frozen values as they are
    plain = thaw(frozen)
    assert plain == value and text_of(plain) == text_of(value)
    assert type(plain) is type(value) or not isinstance(value, dict | list)
    if isinstance(value, dict | list):
        assert frozen == value  # plain == works against frozen values


def lookalike(draw: st.DrawFn, value: Any) -> Any:
    """``value`` or a value Python finds equal: 1 for True, 1.0 for 1, keys reordered."""
    if isinstance(value, bool):
        return draw(st.sampled_from([value, int(value), float(value)]))
    if isinstance(value, int) and abs(value) < 2**53:
        return draw(st.sampled_from([value, float(value)]))
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return draw(st.sampled_from([value, int(value), -value if value == 0 else value]))
    if isinstance(value, list):
        return [lookalike(draw, v) for v in value]
    if isinstance(value, dict):
        items = [(k, lookalike(draw, v)) for k, v in value.items()]
        return dict(reversed(items) if draw(st.booleans()) else items)
    return value


@settings(max_examples=150)
@given(json_values, st.data())
def test_keys_are_equal_exactly_when_the_json_text_is(a: Any, data: st.DataObject) -> None:
    b = data.draw(json_values) if data.draw(st.booleans()) else lookalike(data.draw, a)
    assert (freeze(a, "a")[1] == freeze(b, "b")[1]) == (text_of(a) == text_of(b))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"v": 1}, {"v": True}),
        ({"v": 1}, {"v": 1.0}),
        ({"v": True}, {"v": 1.0}),
        ({"v": 0}, {"v": False}),
        ({"v": 0.0}, {"v": -0.0}),
        ([1, 2], [1.0, 2]),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),  # key order is part of the JSON text
        ({"v": [1]}, {"v": {"0": 1}}),
        ({"v": []}, {"v": {}}),
        ({"v": None}, {"v": "null"}),
        ({"v": "1"}, {"v": 1}),
    ],
)
def test_python_equal_values_get_different_keys(a: Any, b: Any) -> None:
    assert freeze(a, "a")[1] != freeze(b, "b")[1]


def test_frozen_values_cannot_change() -> None:
    frozen, _ = freeze({"a": [1, {"b": 2}], "c": "x"}, "v")
    assert isinstance(frozen, FrozenDict) and isinstance(frozen["a"], FrozenList)
    mutations = [
        lambda: frozen.__setitem__("z", 1),
        lambda: frozen.__delitem__("c"),
        lambda: frozen.update(z=1),
        lambda: frozen.setdefault("z", 1),
        lambda: frozen.pop("c"),
        lambda: frozen.popitem(),
        lambda: frozen.clear(),
        lambda: frozen["a"].append(3),
        lambda: frozen["a"].extend([3]),
        lambda: frozen["a"].insert(0, 3),
        lambda: frozen["a"].pop(),
        lambda: frozen["a"].remove(1),
        lambda: frozen["a"].clear(),
        lambda: frozen["a"].sort(),
        lambda: frozen["a"].reverse(),
        lambda: frozen["a"].__setitem__(0, 9),
        lambda: frozen["a"].__delitem__(0),
        lambda: frozen["a"][1].__setitem__("b", 3),
    ]
    for mutate in mutations:
        with pytest.raises(TypeError, match="immutable"):
            mutate()
    with pytest.raises(TypeError):
        frozen |= {"z": 1}  # type: ignore[misc]
    lst = frozen["a"]
    with pytest.raises(TypeError):
        lst += [3]
    with pytest.raises(TypeError):
        lst *= 2
    assert thaw(frozen) == {"a": [1, {"b": 2}], "c": "x"}
    with pytest.raises(TypeError, match="freeze"):
        FrozenDict({"a": 1})
    with pytest.raises(TypeError, match="freeze"):
        FrozenList([1])


@settings(max_examples=60)
@given(st.dictionaries(st.text(max_size=4), json_values, min_size=1, max_size=4), json_values)
def test_mutating_the_input_afterwards_changes_nothing(value: dict[str, Any], junk: Any) -> None:
    before = text_of(value)
    frozen, key = freeze(value, "v")
    # Mutate everything mutable the caller still holds, at every level.
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += list(item.values())
            item["__new__"] = junk
        elif isinstance(item, list):
            stack += item
            item.append(junk)
    assert text_of(frozen) == before
    assert freeze(json.loads(before), "v")[1] == key


def test_copies_pickles_and_hashes() -> None:
    frozen, _ = freeze({"a": [1, {"b": 2.5}], "t": True}, "v")
    assert copy.copy(frozen) is frozen and copy.deepcopy(frozen) is frozen
    back = pickle.loads(pickle.dumps(frozen))
    assert isinstance(back, FrozenDict) and back == frozen
    assert freeze(back, "v")[1] == freeze(frozen, "v")[1]
    assert hash(frozen) == hash(freeze({"t": True, "a": [1, {"b": 2.5}]}, "v")[0])
    assert {frozen: 1}[freeze({"a": [1, {"b": 2.5}], "t": True}, "v")[0]] == 1
    assert json.loads(json.dumps(frozen)) == thaw(frozen)
    assert dict(frozen) == {"a": [1, {"b": 2.5}], "t": True}
    assert {**frozen, "n": 1}["n"] == 1  # merging into a new dict works as for a dict
    assert EMPTY == {} and freeze({}, "v")[1] == freeze(EMPTY, "v")[1]


def test_frozen_values_are_reused_not_copied() -> None:
    inner, _ = freeze({"deep": [1, 2]}, "v")
    outer, _ = freeze({"inner": inner}, "v")
    assert outer["inner"] is inner


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def test_subclasses_are_stored_as_plain_values() -> None:
    frozen, key = freeze(OrderedDict([("c", Colour.RED), ("l", Level.HIGH), ("t", (1, 2))]), "v")
    assert type(frozen["c"]) is str and type(frozen["l"]) is int
    assert thaw(frozen) == {"c": "red", "l": 3, "t": [1, 2]}  # a tuple is an array
    assert key == freeze({"c": "red", "l": 3, "t": [1, 2]}, "v")[1]
    assert type(next(iter(freeze({Colour.RED: 1}, "v")[0]))) is str


@pytest.mark.parametrize(
    ("value", "field", "bad"),
    [
        ({(1, 2): "x"}, "input", (1, 2)),
        ({1: "x"}, "input", 1),
        ({"a": {None: 1}}, "input['a']", None),
        ({"s": {1, 2}}, "input['s']", {1, 2}),
        ({"b": b"raw"}, "input['b']", b"raw"),
        ({"o": object}, "input['o']", object),
        ({"n": [1, math.inf]}, "input['n'][1]", math.inf),
        ({"n": -math.inf}, "input['n']", -math.inf),
        ({"t": "ok\ud800"}, "input['t']", "ok\ud800"),
        ({"k\udc00": 1}, "input", "k\udc00"),
    ],
)
def test_non_json_values_name_the_path(value: Any, field: str, bad: Any) -> None:
    with pytest.raises(InvalidMessage) as info:
        freeze(value, "input")
    assert info.value.field == field
    assert info.value.value == bad or info.value.value is bad


def test_nan_is_rejected() -> None:
    with pytest.raises(InvalidMessage) as info:
        freeze({"x": [math.nan]}, "m")
    assert info.value.field == "m['x'][0]" and math.isnan(info.value.value)


def nested(depth: int, kind: str = "dict") -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else [value]
    return value


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_depth_limit(kind: str) -> None:
    assert thaw(freeze(nested(MAX_DEPTH, kind), "v")[0]) == nested(MAX_DEPTH, kind)
    for depth in (MAX_DEPTH + 1, 3000, 100_000):
        with pytest.raises(InvalidMessage, match=f"deeper than {MAX_DEPTH}"):
            freeze(nested(depth, kind), "v")


def test_depth_limit_counts_reused_frozen_values() -> None:
    inner, _ = freeze(nested(MAX_DEPTH - 1), "v")
    freeze({"x": inner}, "v")  # exactly MAX_DEPTH
    with pytest.raises(InvalidMessage, match="deeper"):
        freeze({"x": {"y": inner}}, "v")

"""The AdkError tree: reason tags, JSON-safe details, pickling of every class, the docstring drawing."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import adk_actors.errors as errors
from adk_actors.content.canonical import canonical_dumps
from adk_actors.errors import AdkError, error_from_dict, json_safe


def all_error_classes() -> list[type[AdkError]]:
    found, stack = [], [AdkError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return sorted(set(found), key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_round_trips_through_pickle_with_keyword_only_arguments(cls: type[AdkError]) -> None:
    err = cls("something failed", reason="custom_reason", details={"agent": "a", "limit": 3})
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert (back.reason, back.message, back.details) == (
        "custom_reason",
        "something failed",
        {"agent": "a", "limit": 3},
    )
    assert back == err
    default = pickle.loads(pickle.dumps(cls()))
    assert default.reason == cls.default_reason


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_is_drawn_in_the_module_docstring(cls: type[AdkError]) -> None:
    assert cls.__name__ in (errors.__doc__ or "")


def test_details_are_json_safe_and_never_carry_object_reprs() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "SECRET-REPR"

    err = AdkError("x", details={"obj": Opaque(), "nan": float("nan"), "nested": {"t": (1, 2)}})
    text = json.dumps(err.details, allow_nan=False)
    assert "SECRET-REPR" not in text
    assert err.details == {"obj": "<Opaque>", "nan": "nan", "nested": {"t": [1, 2]}}


def test_error_dict_round_trip_keeps_type_and_reason() -> None:
    err = errors.SessionNotFound("no session", details={"session_id": "s1"})
    back = error_from_dict(json.loads(json.dumps(err.to_dict())))
    assert isinstance(back, errors.SessionNotFound)
    assert back.reason == "not_found" and back.details == {"session_id": "s1"}
    unknown = error_from_dict({"type": "NoSuchClass", "reason": "weird"})
    assert type(unknown) is AdkError and unknown.reason == "weird"


def test_subclass_relationships_follow_the_tree() -> None:
    assert issubclass(errors.RateLimited, errors.ProviderHttpError)
    assert issubclass(errors.ProviderHttpError, errors.ProviderError)
    assert issubclass(errors.AskTimeout, errors.RuntimeFailure)
    assert issubclass(errors.SessionNotFound, errors.SessionError)
    assert errors.SessionNotFound().reason == "not_found"
    assert errors.RunNotFound().reason == "not_found"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_json_safe_output_always_serialises_strictly(value: object) -> None:
    json.dumps(json_safe(value), allow_nan=False)


# ---- bounded details ---------------------------------------------------------------------------------------------


class Opaque:
    """An object whose repr must never reach details."""

    def __repr__(self) -> str:
        return "SECRET-REPR"


big_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=1 << 63, max_value=1 << 300)
    | st.integers(max_value=-(1 << 63) - 1, min_value=-(1 << 300))
    | st.floats()
    | st.text(max_size=20)
    | st.text(min_size=4000, max_size=4200)
    | st.builds(Opaque)
)
big_keys = st.text(max_size=8) | st.text(min_size=250, max_size=300) | st.integers() | st.tuples(st.integers())
oversized = st.recursive(
    big_leaves,
    lambda inner: (
        st.lists(inner, max_size=80)
        | st.dictionaries(big_keys, inner, max_size=80)
        | st.tuples(inner, inner)
        | st.frozensets(st.integers(), max_size=80)
    ),
    max_leaves=300,
)
"""Values past every bound: long strings and keys, wide and deep containers, huge ints, opaque objects."""


@dataclass
class Shape:
    depth: int = 0
    items: int = 0
    string: int = 0
    key: int = 0
    cost: int = 0


def shape(value: object, depth: int = 0, seen: Shape | None = None) -> Shape:
    """The largest depth, container, string and key of a JSON value, and its cost as json_safe counts it."""
    out = seen or Shape()
    out.cost += 1
    if isinstance(value, dict):
        out.depth, out.items = max(out.depth, depth), max(out.items, len(value))
        for key, item in value.items():
            assert isinstance(key, str)
            out.key, out.cost = max(out.key, len(key)), out.cost + len(key)
            shape(item, depth + 1, out)
    elif isinstance(value, list):
        out.depth, out.items = max(out.depth, depth), max(out.items, len(value))
        for item in value:
            shape(item, depth + 1, out)
    elif isinstance(value, str):
        out.string, out.cost = max(out.string, len(value)), out.cost + len(value)
    else:
        assert value is None or isinstance(value, bool | int | float), type(value)
        if isinstance(value, int) and not isinstance(value, bool):
            assert -(1 << 63) <= value < 1 << 63
    return out


# Values json_safe does not charge: the "…" of each entry left once the budget is spent (only containers on the
# path being projected have entries left), one string overshooting the budget.
_SLACK = 4 * errors.MAX_DETAIL_ITEMS * (errors.MAX_DETAIL_DEPTH + 2) + errors.MAX_DETAIL_STR


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(oversized)
def test_json_safe_bounds_depth_entries_strings_keys_and_total_size_and_is_idempotent(value: object) -> None:
    safe = json_safe(value)
    text = json.dumps(safe, allow_nan=False)
    assert "SECRET-REPR" not in text
    found = shape(safe)
    assert found.depth <= errors.MAX_DETAIL_DEPTH
    assert found.items <= errors.MAX_DETAIL_ITEMS
    assert found.string <= errors.MAX_DETAIL_STR + 1  # the cut string plus its "…"
    assert found.key <= errors.MAX_DETAIL_KEY + 1
    assert found.cost <= errors.MAX_DETAIL_BUDGET + _SLACK
    assert len(text) < 2 * 1024 * 1024
    canonical_dumps(safe)  # every store can write it: no NUL, no lone surrogate, no unwritable int
    assert json_safe(safe) == safe  # already bounded values pass unchanged (a pickled error re-projected)


storable_text = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
small_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(storable_text, max_size=40),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(storable_text, max_size=12), inner, max_size=8),
    max_leaves=30,
)


@given(small_json)
def test_json_safe_keeps_details_within_the_bounds_unchanged(value: object) -> None:
    assert json_safe(value) == value


def test_json_safe_marks_what_it_cut() -> None:
    wide = json_safe({f"k{i}": i for i in range(100)})
    assert len(wide) == errors.MAX_DETAIL_ITEMS and wide["…"] == 100 - (errors.MAX_DETAIL_ITEMS - 1)
    assert [wide[f"k{i}"] for i in range(errors.MAX_DETAIL_ITEMS - 1)] == list(range(errors.MAX_DETAIL_ITEMS - 1))
    long_list = json_safe(list(range(100)))
    assert long_list[:-1] == list(range(errors.MAX_DETAIL_ITEMS - 1)) and long_list[-1] == "<37 more>"
    deep: object = "leaf"
    for _ in range(20):
        deep = {"d": deep}
    assert shape(json_safe(deep)).depth == errors.MAX_DETAIL_DEPTH
    assert "<depth>" in json.dumps(json_safe(deep))
    assert json_safe("x" * 10_000) == "x" * errors.MAX_DETAIL_STR + "…"
    assert list(json_safe({"k" * 1000: 1})) == ["k" * errors.MAX_DETAIL_KEY + "…"]
    assert json_safe([1 << 64, -(1 << 64), (1 << 63) - 1]) == ["<int>", "<int>", (1 << 63) - 1]
    assert json_safe({(1, 2): 1, 3: 2}) == {"<tuple>": 1, "3": 2}  # never a key's repr
    assert json_safe({"k\x00": "v\ud800"}) == {"k\ufffd": "v\ufffd"}  # what no store could write is replaced
    spent = json_safe([["y" * errors.MAX_DETAIL_STR] * 40] * 2)  # 320 KiB of strings against a 64 Ki budget
    assert shape(spent).cost <= errors.MAX_DETAIL_BUDGET + _SLACK
    assert spent[1] == "…" and spent[0][-1] == "…"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.text(max_size=2000), oversized)
def test_an_error_bounds_its_reason_and_details_and_pickles_them_unchanged(reason: str, details: object) -> None:
    err = errors.WorkflowError("failed", reason=reason, details={"payload": details})
    assert len(err.reason) <= errors.MAX_REASON_CHARS
    canonical_dumps([err.reason, err.details])
    if "\x00" not in reason and all(not "\ud800" <= c <= "\udfff" for c in reason):
        assert err.reason == (reason[: errors.MAX_REASON_CHARS] or "workflow_error")
    assert shape(err.details).items <= errors.MAX_DETAIL_ITEMS
    assert shape(err.details).cost <= errors.MAX_DETAIL_BUDGET + _SLACK
    back = pickle.loads(pickle.dumps(err))
    assert (back.reason, back.details) == (err.reason, err.details)
    rebuilt = error_from_dict(json.loads(json.dumps(err.to_dict())))
    assert (rebuilt.reason, rebuilt.details) == (err.reason, err.details)

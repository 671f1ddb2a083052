"""Canonical JSON at its edges: lone surrogates, huge integers, key-free error paths and the exact limits."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors import content as c
from adk_actors.content import (
    MAX_ENVELOPE_DEPTH,
    MAX_JSON_DEPTH,
    MAX_JSON_NODES,
    canonical_dumps,
    canonical_loads,
    check_json_safe,
    copy_json,
)
from adk_actors.content.parts import MAX_CALL_ID_CHARS
from adk_actors.errors import ContentError, ValidationError

SECRET_KEY = "sk-SECRET-0123456789abcdef"
SURROGATES = ["\ud800", "\udfff", "a\udc00b", "\ud83d"]  # lone halves; "\ud83d\ude00" joined is still two halves


def _nested(depth: int) -> Any:
    """``depth`` nested containers (alternating dicts and lists), innermost empty."""
    value: Any = {}
    for i in range(depth - 1):
        value = {"a": value} if i % 2 else [value]
    return value


def _assert_not_echoed(err: BaseException, *needles: str) -> None:
    assert isinstance(err, ValidationError)
    text = f"{err} {err!r} {err.details} {err.to_dict()}"
    for needle in needles:
        assert needle not in text


@pytest.mark.parametrize("bad", SURROGATES)
@pytest.mark.parametrize("where", ["value", "key", "nested-value", "nested-key", "list"])
def test_lone_surrogates_are_rejected_in_values_and_keys(bad: str, where: str) -> None:
    value = {
        "value": bad,
        "key": {bad: 1},
        "nested-value": {"a": [{"b": bad}]},
        "nested-key": {"a": [{bad: None}]},
        "list": [1, bad],
    }[where]
    for attempt in (lambda: check_json_safe(value), lambda: canonical_dumps(value)):
        with pytest.raises(ValidationError) as info:
            attempt()
        assert type(info.value) is ValidationError
        assert info.value.reason == "invalid_json"
        assert set(info.value.details) == {"path"}
        assert info.value.details["path"].startswith("$")
        _assert_not_echoed(info.value, bad)


@pytest.mark.parametrize("text", ['"\\ud800"', '{"\\udfff":1}', '["a\\udc00"]'])
def test_canonical_loads_rejects_escaped_lone_surrogates(text: str) -> None:
    with pytest.raises(ValidationError) as info:
        canonical_loads(text)
    assert info.value.reason == "invalid_json"


def test_surrogate_pairs_and_astral_characters_are_fine() -> None:
    value = {"emoji": "\U0001f600", "\u00e9": "\u4e2d"}
    assert canonical_loads(canonical_dumps(value)) == value
    assert canonical_loads('"\\ud83d\\ude00"') == "\U0001f600"  # an escaped *pair* is one character


def test_copy_json_reports_surrogates_with_its_error_class() -> None:
    with pytest.raises(ContentError) as info:
        copy_json({"k": "\ud800"}, error=ContentError, field="args")
    assert info.value.reason == "invalid_json"
    assert info.value.details == {"field": "args", "path": "$.<key#0>"}
    with pytest.raises(ContentError):
        c.function_call("f", {"\ud800": 1})
    with pytest.raises(ContentError):
        c.function_response("f", {"r": ["\udfff"]})


@pytest.mark.parametrize("exponent", [309, 400, 4299])
def test_integers_beyond_the_float_range_are_exact_json(exponent: int) -> None:
    value = {"n": 10**exponent, "m": -(10**exponent)}
    assert canonical_loads(canonical_dumps(value)) == value


def test_integers_too_large_to_write_are_validation_errors() -> None:
    for value in (10**5000, [-(10**5000)], {"k": {"n": 10**5000}}):
        with pytest.raises(ValidationError) as info:
            canonical_dumps(value)
        assert info.value.reason == "invalid_json" and set(info.value.details) == {"path"}
    with pytest.raises(ContentError):
        c.function_call("f", {"n": 10**5000})


def test_deep_values_are_validation_errors_not_recursion_errors() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    for attempt in (
        lambda: check_json_safe(deep),
        lambda: canonical_dumps(deep),
        lambda: check_json_safe({"k": deep}),
        lambda: canonical_loads("[" * 100_000 + "]" * 100_000),
    ):
        with pytest.raises(ValidationError) as info:
            attempt()
        assert info.value.reason in {"limit_exceeded", "invalid_json"}  # loads: the parser's own limit may come first
    with pytest.raises(ValidationError) as info:
        check_json_safe(deep)
    assert info.value.reason == "limit_exceeded"
    assert info.value.details["limit"] == "max_json_depth" and info.value.details["max"] == MAX_ENVELOPE_DEPTH


def test_check_json_safe_depth_limit_is_inclusive_and_adjustable() -> None:
    check_json_safe(_nested(MAX_ENVELOPE_DEPTH))
    assert canonical_loads(canonical_dumps(_nested(MAX_ENVELOPE_DEPTH))) == _nested(MAX_ENVELOPE_DEPTH)
    for attempt in (
        lambda: check_json_safe(_nested(MAX_ENVELOPE_DEPTH + 1)),
        lambda: canonical_dumps(_nested(MAX_ENVELOPE_DEPTH + 1)),
        lambda: canonical_loads(json.dumps(_nested(MAX_ENVELOPE_DEPTH + 1))),
        lambda: check_json_safe(_nested(4), max_depth=3),
    ):
        with pytest.raises(ValidationError) as info:
            attempt()
        assert info.value.reason == "limit_exceeded" and info.value.details["limit"] == "max_json_depth"
    check_json_safe(_nested(3), max_depth=3)
    # The envelope limit leaves room for a value at the value limit inside an event or a request body.
    assert MAX_ENVELOPE_DEPTH >= MAX_JSON_DEPTH + 8


def _self_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def _dict_cycle() -> dict[str, Any]:
    value: dict[str, Any] = {"a": {"b": [0, {}]}}
    value["a"]["b"][1]["back"] = value
    return value


def _cycle_below_depth(levels: int) -> Any:
    loop: list[Any] = []
    loop.append({"again": loop})
    return _wrapped(loop, levels)


def _wrapped(inner: Any, levels: int) -> Any:
    for _ in range(levels):
        inner = {"w": inner}
    return inner


def _shared_tower(levels: int) -> list[Any]:
    """``levels`` lists, each holding the one below twice: a few hundred bytes, 2**levels leaves when walked."""
    value: list[Any] = [0]
    for _ in range(levels):
        value = [value, value]
    return value


@pytest.mark.timeout(10)  # before the member budget, walking this took 2**60 steps
def test_a_value_that_shares_sub_values_exponentially_is_refused_quickly() -> None:
    tower = _shared_tower(60)
    for attempt in (lambda: check_json_safe(tower), lambda: canonical_dumps(tower)):
        with pytest.raises(ValidationError) as info:
            attempt()
        assert info.value.reason == "limit_exceeded" and info.value.details["limit"] == "max_json_nodes"
        assert info.value.details["max"] == MAX_JSON_NODES
    with pytest.raises(ContentError) as content_info:
        c.function_call("f", {"args": tower})
    assert content_info.value.reason == "limit_exceeded"
    # Sharing within the budget is still fine: 2**12 leaves.
    small = _shared_tower(12)
    check_json_safe(small)
    assert json.loads(canonical_dumps(small)) == json.loads(json.dumps(small))


@pytest.mark.timeout(10)  # before cycles were detected, these never ended
@pytest.mark.parametrize(
    ("value", "path"),
    [
        (_self_list(), "$[1]"),
        (_dict_cycle(), "$.<key#0>.<key#0>[1].<key#0>"),
        (_cycle_below_depth(10), "$" + ".<key#0>" * 10 + "[0].<key#0>"),
    ],
    ids=["self-list", "dict-cycle", "deep-cycle"],
)
def test_reference_cycles_are_validation_errors_that_say_where(value: Any, path: str) -> None:
    for attempt in (lambda: check_json_safe(value), lambda: canonical_dumps(value)):
        with pytest.raises(ValidationError) as info:
            attempt()
        assert info.value.reason == "invalid_json"
        assert info.value.details == {"path": path, "cycle": True}
    with pytest.raises(ContentError) as content_info:
        c.function_call("f", {"args": value})
    assert content_info.value.reason == "invalid_json" and content_info.value.details["cycle"] is True
    # A container met twice without containing itself is no cycle.
    shared: dict[str, Any] = {"x": [1, 2]}
    dag = {"a": shared, "b": [shared, shared], "c": {"d": shared["x"]}}
    check_json_safe(dag)
    assert canonical_loads(canonical_dumps(dag)) == json.loads(json.dumps(dag))
    assert copy_json(dag)[0]["b"][1] == shared


@pytest.mark.parametrize(
    "bad",
    [float("nan"), float("inf"), "x\x00", "\ud800", object(), 10**5000],
    ids=["nan", "inf", "nul", "surrogate", "object", "huge-int"],
)
def test_error_paths_never_name_the_values_keys(bad: Any) -> None:
    value = {"ok": 1, SECRET_KEY: {"inner-" + SECRET_KEY: [0, {"deeper-" + SECRET_KEY: bad}]}}
    with pytest.raises(ValidationError) as info:
        check_json_safe(value)
    assert info.value.details["path"] == "$.<key#1>.<key#0>[1].<key#0>"
    _assert_not_echoed(info.value, SECRET_KEY)
    with pytest.raises(ContentError) as content_info:
        c.function_call("f", value)
    _assert_not_echoed(content_info.value, SECRET_KEY)


@pytest.mark.parametrize("bad_key", [1, None, (1, 2), "x\x00", "\ud800"], ids=repr)
def test_bad_keys_are_reported_by_position(bad_key: Any) -> None:
    with pytest.raises(ValidationError) as info:
        check_json_safe({SECRET_KEY: 1, bad_key: 2})
    assert info.value.details["path"] == "$.<key#1>"
    _assert_not_echoed(info.value, SECRET_KEY)


def test_max_json_depth_is_inclusive() -> None:
    exact, over = _nested(MAX_JSON_DEPTH), _nested(MAX_JSON_DEPTH + 1)
    assert copy_json(exact)[0] == json.loads(json.dumps(exact))
    with pytest.raises(ValidationError) as info:
        copy_json(over)
    assert info.value.reason == "limit_exceeded" and info.value.details["max"] == MAX_JSON_DEPTH
    # Function-call args count their own object as the first level.
    assert c.function_call("f", {"a": _nested(MAX_JSON_DEPTH - 1)}).args
    with pytest.raises(ContentError) as content_info:
        c.function_call("f", {"a": _nested(MAX_JSON_DEPTH)})
    assert content_info.value.reason == "limit_exceeded"


def test_call_id_limit_is_inclusive() -> None:
    assert MAX_CALL_ID_CHARS == 256
    assert c.function_call("f", {}, id="i" * MAX_CALL_ID_CHARS).id == "i" * MAX_CALL_ID_CHARS
    assert c.function_response("f", {}, id="i" * MAX_CALL_ID_CHARS).id == "i" * MAX_CALL_ID_CHARS
    for attempt in (
        lambda: c.function_call("f", {}, id="i" * (MAX_CALL_ID_CHARS + 1)),
        lambda: c.function_response("f", {}, id="i" * (MAX_CALL_ID_CHARS + 1)),
        lambda: c.function_call("f", {}, id="\ud800"),
    ):
        with pytest.raises(ContentError) as info:
            attempt()
        assert info.value.reason == "invalid_call_id"


any_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=10) | st.sampled_from(SURROGATES)
huge_ints = st.builds(lambda e, sign: sign * 10**e, st.sampled_from([309, 400, 4299, 5000]), st.sampled_from([1, -1]))
scalars = (
    st.none() | st.booleans() | st.integers() | huge_ints | st.floats() | any_text | st.sampled_from([b"x", object()])
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.tuples(inner) | st.dictionaries(any_text | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_canonical_json_raises_only_validation_errors_and_always_encodes(value: Any) -> None:
    try:
        text = canonical_dumps(value)
    except ValidationError as exc:
        assert exc.reason == "invalid_json" and ("path" in exc.details or "error" in exc.details)
        return
    text.encode("utf-8")  # never a UnicodeEncodeError once accepted
    assert canonical_dumps(canonical_loads(text)) == text


def _graph(shape: Any, cycle_at: int | None, levels: int) -> tuple[Any, bool, int]:
    """Build a value from a hypothesis ``shape``; with ``cycle_at``, one container also holds one of its
    ancestors. Returns ``(value, has_cycle, depth)``, depth counting containers (the outermost is 1)."""
    containers: list[tuple[Any, list[Any]]] = []  # (container, its ancestors)

    def build(node: Any, ancestors: list[Any]) -> Any:
        if isinstance(node, list):
            out: list[Any] = []
            containers.append((out, ancestors))
            out.extend(build(child, [*ancestors, out]) for child in node)
            return out
        if isinstance(node, dict):
            obj: dict[str, Any] = {}
            containers.append((obj, ancestors))
            for key, child in node.items():
                obj[key] = build(child, [*ancestors, obj])
            return obj
        return node

    def depth_of(node: Any) -> int:
        if isinstance(node, list):
            return 1 + max((depth_of(child) for child in node), default=0)
        if isinstance(node, dict):
            return 1 + max((depth_of(child) for child in node.values()), default=0)
        return 0

    value = build(shape, [])
    has_cycle = False
    if cycle_at is not None and containers:
        holder, ancestors = containers[cycle_at % len(containers)]
        target = ancestors[cycle_at % len(ancestors)] if ancestors else holder
        if isinstance(holder, list):
            holder.append(target)
        else:
            holder["cycle"] = target
        has_cycle = True
    return _wrapped(value, levels), has_cycle, depth_of(shape) + levels


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=5)
)
shapes = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="abc", max_size=2), inner, max_size=3),
    max_leaves=12,
)


@pytest.mark.timeout(60)
@settings(max_examples=300, deadline=None)
@given(
    shape=shapes,
    cycle_at=st.none() | st.integers(min_value=0, max_value=50),
    levels=st.integers(min_value=0, max_value=12) | st.integers(min_value=MAX_ENVELOPE_DEPTH - 8, max_value=10_000),
    max_depth=st.sampled_from([1, 5, 9, MAX_JSON_DEPTH, MAX_ENVELOPE_DEPTH]),
)
def test_depth_and_cycles_are_decided_exactly(shape: Any, cycle_at: int | None, levels: int, max_depth: int) -> None:
    value, has_cycle, depth = _graph(shape, cycle_at, levels)
    try:
        check_json_safe(value, max_depth=max_depth)
    except ValidationError as exc:
        assert has_cycle or depth > max_depth, "a plain JSON value within the limit was refused"
        if depth <= max_depth:
            assert exc.reason == "invalid_json" and exc.details["cycle"] is True
        else:
            assert exc.reason in {"limit_exceeded", "invalid_json"}
            assert exc.reason == "limit_exceeded" or exc.details["cycle"] is True
        return
    assert not has_cycle and depth <= max_depth
    assert json.loads(canonical_dumps(value, max_depth=max_depth)) == json.loads(json.dumps(value))

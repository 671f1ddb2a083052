"""Property tests of the scoped state-delta logic (pure functions, then through the stores)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.sessions.support import make_event
from adk_actors.errors import ValidationError
from adk_actors.sessions import InMemorySessionService, SessionRef, SqlSessionService
from adk_actors.sessions.state import ABSENT, merge_state, mismatched_keys, scope_of, split_delta

_prefixes = st.sampled_from(["", "user:", "app:", "temp:"])
_keys = st.builds(lambda p, n: p + n, _prefixes, st.sampled_from(["a", "b", "c", "x:y", "user", "app:z"]))
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([10**400, -(10**400), 2**1024])  # exact JSON integers beyond the float range
    | st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4).filter(lambda k: "\x00" not in k), inner, max_size=3)
    ),
    max_leaves=6,
)
_deltas = st.dictionaries(_keys, _json, max_size=6)
# No example database: the tests leave nothing behind in the working tree.
_quick = settings(database=None, max_examples=60, deadline=None)


@_quick
@given(_deltas)
def test_split_delta_partitions_keys_by_scope(delta: dict[str, Any]) -> None:
    parts = split_delta(delta)
    pieces = {"session": parts.session, "user": parts.user, "app": parts.app, "temp": parts.temp}
    assert sum(len(p) for p in pieces.values()) == len(delta)
    for scope, piece in pieces.items():
        for key, value in piece.items():
            assert scope_of(key) == scope
            assert delta[key] == value
    assert bool(parts) == bool(delta)
    assert parts.shared == bool(parts.user or parts.app)


@_quick
@given(st.lists(_deltas, max_size=6))
def test_merging_scoped_parts_equals_applying_the_deltas_in_order(deltas: list[dict[str, Any]]) -> None:
    session: dict[str, Any] = {}
    user: dict[str, Any] = {}
    app: dict[str, Any] = {}
    temp: dict[str, Any] = {}
    flat: dict[str, Any] = {}
    for delta in deltas:
        parts = split_delta(delta)
        session.update(parts.session)
        user.update(parts.user)
        app.update(parts.app)
        temp.update(parts.temp)
        flat.update(delta)
    assert merge_state(session=session, user=user, app=app, temp=temp) == flat
    assert mismatched_keys(flat, flat) == []
    assert mismatched_keys(flat, {k: ABSENT for k in flat}) == sorted(flat)


# NaN, Infinity, NUL, lone surrogates (which the default text strategy never draws) and integers too large to
# write as text.
_unsafe = (
    st.sampled_from([float("nan"), float("inf"), "a\x00", "\ud800", "x\udfffy"])
    | st.builds(lambda sign: sign * 10**5000, st.sampled_from([1, -1]))
    | st.text(alphabet=st.characters(blacklist_categories=()), max_size=6).map(lambda t: t + "\udc00")
)
_unsafe_keys = st.builds(lambda p, bad: p + bad, _prefixes, st.sampled_from(["\x00", "\ud800", "k\udfff"]))


@_quick
@given(st.dictionaries(_keys, _unsafe, min_size=1, max_size=3))
def test_unsafe_values_are_always_rejected(delta: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        split_delta(delta)
    assert info.value.reason == "invalid_json"


@_quick
@given(st.dictionaries(_unsafe_keys, _json, min_size=1, max_size=3), _deltas)
def test_unsafe_keys_are_always_rejected(bad: dict[str, Any], good: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        split_delta({**good, **bad})
    assert info.value.reason == "invalid_json"
    assert set(info.value.details) == {"path"}
    with pytest.raises(ValidationError):
        InMemorySessionService().create_session(app_name="a", user_id="u", session_id="s", state={**good, **bad})


def test_booleans_are_not_numbers_when_comparing_expected_state() -> None:
    assert mismatched_keys({"a": 1}, {"a": True}) == ["a"]
    assert mismatched_keys({"a": 1}, {"a": 1.0}) == []
    assert mismatched_keys({"a": [1, {"b": False}]}, {"a": [1, {"b": 0}]}) == ["a"]


_ops = st.lists(st.tuples(st.integers(0, 3), _deltas, st.booleans(), st.booleans()), max_size=12)
# Sessions 0 and 1 belong to user u1, 2 to u2, and 3 to u1 of another app.
_SESSIONS = [("app", "u1", "s0"), ("app", "u1", "s1"), ("app", "u2", "s2"), ("other", "u1", "s3")]


def _model_views(ops: list[tuple[int, dict[str, Any], bool, bool]]) -> list[dict[str, Any]]:
    session: list[dict[str, Any]] = [{} for _ in _SESSIONS]
    temp: list[dict[str, Any]] = [{} for _ in _SESSIONS]
    user: dict[tuple[str, str], dict[str, Any]] = {}
    app: dict[str, dict[str, Any]] = {}
    for idx, delta, partial, clear in ops:
        a, u, _ = _SESSIONS[idx]
        if not partial:
            for key, value in delta.items():
                scope = scope_of(key)
                target = {
                    "session": session[idx],
                    "temp": temp[idx],
                    "user": user.setdefault((a, u), {}),
                    "app": app.setdefault(a, {}),
                }[scope]
                target[key] = value
        if clear:
            temp[idx] = {}
    return [
        merge_state(session=session[i], user=user.get((a, u), {}), app=app.get(a, {}), temp=temp[i])
        for i, (a, u, _) in enumerate(_SESSIONS)
    ]


def _run(service: Any, ops: list[tuple[int, dict[str, Any], bool, bool]]) -> list[dict[str, Any]]:
    refs = [SessionRef(app_name=a, user_id=u, session_id=s) for a, u, s in _SESSIONS]
    for ref in refs:
        service.create_session(app_name=ref.app_name, user_id=ref.user_id, session_id=ref.session_id)
    for idx, delta, partial, clear in ops:
        service.add_event(refs[idx], make_event(delta=delta, partial=partial))
        if clear:
            service.clear_temp_state(refs[idx])
    return [service.get_session(ref).state for ref in refs]


@_quick
@given(_ops)
def test_memory_store_matches_the_scope_model(ops: list[tuple[int, dict[str, Any], bool, bool]]) -> None:
    assert _run(InMemorySessionService(), ops) == _model_views(ops)


@settings(database=None, max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ops)
def test_sqlite_store_matches_the_scope_model(ops: list[tuple[int, dict[str, Any], bool, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        service = SqlSessionService(f"sqlite:///{Path(tmp) / 's.db'}")
        try:
            assert _run(service, ops) == _model_views(ops)
        finally:
            service.close()

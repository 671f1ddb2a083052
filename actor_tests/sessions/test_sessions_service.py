"""The behavioural contract of every session backend (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import math
import pickle
import threading
from typing import Any

import pytest

from actor_tests.sessions.support import make_event
from adk_actors.errors import ConcurrencyConflict, SessionError, SessionNotFound, ValidationError
from adk_actors.sessions import ABSENT, BaseSessionService, Session, SessionRef

APP, USER = "state_demo", "user-1"
WAIT_TIMEOUT_S = 60.0
"""Every barrier wait and thread join in these tests is bounded by this; a timeout fails the test."""


_timed_out: list[threading.Barrier] = []


def _meet(barrier: threading.Barrier) -> bool:
    """Wait at ``barrier`` (bounded by its timeout); ``False`` (and recorded) when it timed out or broke."""
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        _timed_out.append(barrier)
        return False
    return True


def _join_all(threads: list[threading.Thread]) -> None:
    """Join every thread (bounded) and assert that none is still running and no barrier timed out."""
    try:
        for t in threads:
            t.join(WAIT_TIMEOUT_S)
            assert not t.is_alive(), f"a thread did not finish within {WAIT_TIMEOUT_S}s"
        assert not _timed_out, "a barrier wait timed out"
    finally:
        _timed_out.clear()


def _ref(session_id: str = "s1", user_id: str = USER, app_name: str = APP) -> SessionRef:
    return SessionRef(app_name=app_name, user_id=user_id, session_id=session_id)


def test_every_backend_satisfies_the_protocol(service: Any) -> None:
    assert isinstance(service, BaseSessionService)


def test_create_then_get_round_trips_state_and_identity(service: Any) -> None:
    created = service.create_session(app_name=APP, user_id=USER, session_id="s1", state={"theme": "local"})
    assert isinstance(created, Session)
    assert (created.app_name, created.user_id, created.id) == (APP, USER, "s1")
    got = service.get_session(created.ref)
    assert got.state == {"theme": "local"}
    assert got.events == () and got.version == 0 and got.last_seq == 0


def test_create_without_id_generates_a_unique_id(service: Any) -> None:
    a = service.create_session(app_name=APP, user_id=USER)
    b = service.create_session(app_name=APP, user_id=USER)
    assert a.id != b.id and len(a.id) >= 16


def test_create_is_idempotent_and_never_overwrites(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1", state={"x": 1})
    service.add_event(_ref(), make_event(delta={"y": 2}))
    again = service.create_session(
        app_name=APP, user_id=USER, session_id="s1", state={"x": 99, "user:z": 1}, events=[make_event()]
    )
    assert again.state == {"x": 1, "y": 2}
    assert len(again.events) == 1
    with pytest.raises(SessionError) as info:
        service.create_session(app_name=APP, user_id=USER, session_id="s1", if_exists="error")
    assert info.value.reason == "already_exists"


def test_concurrent_creators_all_get_the_one_session(service: Any) -> None:
    barrier = threading.Barrier(8, timeout=WAIT_TIMEOUT_S)
    results: list[Session] = []
    errors: list[BaseException] = []

    def create(i: int) -> None:
        try:
            if not _meet(barrier):
                return
            results.append(service.create_session(app_name=APP, user_id=USER, session_id="race", state={"creator": i}))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    _join_all(threads)
    assert not errors
    winners = {r.state["creator"] for r in results}
    assert len(winners) == 1
    assert service.get_session(_ref("race")).state == {"creator": winners.pop()}
    assert [s.id for s in service.list_sessions(app_name=APP, user_id=USER)] == ["race"]


@pytest.mark.parametrize("call", ["get", "update", "add", "add_if", "clear_temp", "compact"])
def test_missing_session_raises_not_found(service: Any, call: str) -> None:
    ref = _ref("missing")
    ops = {
        "get": lambda: service.get_session(ref),
        "update": lambda: service.update_state(ref, {"a": 1}),
        "add": lambda: service.add_event(ref, make_event()),
        "add_if": lambda: service.add_event_if_state(ref, make_event(), {}),
        "clear_temp": lambda: service.clear_temp_state(ref),
        "compact": lambda: service.compact_events(ref, through_seq=1, compaction_event=make_event()),
    }
    with pytest.raises(SessionNotFound) as info:
        ops[call]()
    assert info.value.reason == "not_found"
    assert info.value.details["session_id"] == "missing"


def test_delete_is_idempotent_and_removes_events(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1")
    service.add_event(_ref(), make_event(delta={"user:keep": 1}))
    assert service.delete_session(_ref()) is True
    assert service.delete_session(_ref()) is False
    with pytest.raises(SessionNotFound):
        service.get_session(_ref())
    recreated = service.create_session(app_name=APP, user_id=USER, session_id="s1")
    assert recreated.events == () and recreated.state == {"user:keep": 1}


def test_state_scopes_follow_the_reference_lifetimes(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="state-session-1")
    service.update_state(
        _ref("state-session-1"),
        {"theme": "local", "user:preferences": "dark", "app:release": "0.3.0", "temp:lookup": "in-flight"},
    )
    stored = service.get_session(_ref("state-session-1")).state
    assert stored == {"theme": "local", "user:preferences": "dark", "app:release": "0.3.0", "temp:lookup": "in-flight"}
    future = service.create_session(app_name=APP, user_id=USER, session_id="state-session-2").state
    assert future == {"user:preferences": "dark", "app:release": "0.3.0"}
    other_user = service.create_session(app_name=APP, user_id="user-2", session_id="s").state
    assert other_user == {"app:release": "0.3.0"}
    other_app = service.create_session(app_name="other", user_id=USER, session_id="s").state
    assert other_app == {}
    service.clear_temp_state(_ref("state-session-1"))
    assert "temp:lookup" not in service.get_session(_ref("state-session-1")).state


def test_shared_state_reaches_existing_sessions(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="a")
    service.create_session(app_name=APP, user_id=USER, session_id="b")
    service.add_event(_ref("a"), make_event(delta={"user:lang": "fr", "app:mode": "beta", "local": 1}))
    assert service.get_session(_ref("b")).state == {"user:lang": "fr", "app:mode": "beta"}
    assert [s.state for s in service.list_sessions(app_name=APP, user_id=USER)] == [
        {"user:lang": "fr", "app:mode": "beta", "local": 1},
        {"user:lang": "fr", "app:mode": "beta"},
    ]


def test_initial_state_and_events_apply_only_on_creation(service: Any) -> None:
    s = service.create_session(
        app_name=APP,
        user_id=USER,
        session_id="s1",
        state={"a": 1, "user:u": 1},
        events=[make_event(delta={"b": 2}), make_event(delta={"a": 3}, partial=True)],
    )
    assert s.state == {"a": 1, "b": 2, "user:u": 1}
    assert s.event_seqs == (1, 2) and s.last_seq == 2


def test_add_event_appends_in_order_and_applies_the_delta(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1")
    events = [make_event("user", delta={"step": 1}), make_event("agent", delta={"step": 2}, is_final=True)]
    results = [service.add_event(_ref(), e) for e in events]
    assert [r.seq for r in results] == [1, 2]
    assert [r.version for r in results] == [1, 2]
    assert results[-1].state == {"step": 2}
    got = service.get_session(_ref())
    assert got.events == tuple(events)
    assert got.event_seqs == (1, 2) and got.last_seq == 2 and got.version == 2
    assert got.state == {"step": 2}


def test_partial_events_are_stored_but_never_apply_state(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1")
    partial = make_event("agent", delta={"step": 9, "user:x": 1}, partial=True)
    service.add_event(_ref(), partial)
    got = service.get_session(_ref())
    assert got.events == (partial,)
    assert got.state == {}


def test_event_dicts_are_accepted_and_decoded_as_events(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1")
    event = make_event(delta={"k": [1, {"n": None}]})
    service.add_event(_ref(), event.to_dict())
    assert service.get_session(_ref()).events == (event,)


def test_temp_state_is_in_flight_only(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1")
    result = service.add_event(_ref(), make_event(delta={"temp:scratch": 1, "kept": 1}))
    assert result.state == {"temp:scratch": 1, "kept": 1}
    assert service.get_session(_ref()).state["temp:scratch"] == 1
    service.clear_temp_state(_ref())
    assert service.get_session(_ref()).state == {"kept": 1}


def test_add_event_if_state_appends_only_on_a_match(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1", state={"op": "running", "user:n": 1})
    ok = service.add_event_if_state(
        _ref(), make_event(delta={"op": "done"}), {"op": "running", "user:n": 1, "absent": ABSENT}
    )
    assert ok.seq == 1 and ok.state["op"] == "done"
    with pytest.raises(ConcurrencyConflict) as info:
        service.add_event_if_state(_ref(), make_event(delta={"op": "again"}), {"op": "running"})
    assert info.value.reason == "state_mismatch"
    assert info.value.details["keys"] == ["op"]
    with pytest.raises(ConcurrencyConflict):
        service.add_event_if_state(_ref(), make_event(), {"op": ABSENT})
    with pytest.raises(ConcurrencyConflict):
        service.add_event_if_state(_ref(), make_event(), {"never_set": None})
    got = service.get_session(_ref())
    assert len(got.events) == 1 and got.state["op"] == "done" and got.version == 1


def test_add_event_if_state_orders_racing_terminal_updates(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1", state={"op": "running"})
    barrier = threading.Barrier(6, timeout=WAIT_TIMEOUT_S)
    wins: list[int] = []
    conflicts: list[int] = []

    def finish(i: int) -> None:
        if not _meet(barrier):
            return
        try:
            service.add_event_if_state(_ref(), make_event(delta={"op": f"done-{i}"}), {"op": "running"})
            wins.append(i)
        except ConcurrencyConflict:
            conflicts.append(i)

    threads = [threading.Thread(target=finish, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    _join_all(threads)
    assert len(wins) == 1 and len(conflicts) == 5
    got = service.get_session(_ref())
    assert len(got.events) == 1 and got.state["op"] == f"done-{wins[0]}"


def test_concurrent_appends_from_threads_are_dense(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1")
    barrier = threading.Barrier(4, timeout=WAIT_TIMEOUT_S)

    def writer(w: int) -> None:
        if not _meet(barrier):
            return
        for i in range(25):
            service.add_event(_ref(), make_event(f"w{w}", delta={f"w{w}": i}))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    _join_all(threads)
    got = service.get_session(_ref())
    assert got.event_seqs == tuple(range(1, 101))
    assert got.state == {f"w{w}": 24 for w in range(4)}


def test_list_sessions_is_newest_first_without_events(service: Any) -> None:
    for sid in ("a", "b", "c"):
        service.create_session(app_name=APP, user_id=USER, session_id=sid)
    service.create_session(app_name=APP, user_id="other", session_id="z")
    service.add_event(_ref("a"), make_event())
    listed = service.list_sessions(app_name=APP, user_id=USER)
    assert listed[0].id == "a"
    assert {s.id for s in listed} == {"a", "b", "c"}
    assert all(s.events == () for s in listed)
    assert listed[0].last_seq == 1
    assert {s.id for s in service.list_sessions(app_name=APP)} == {"a", "b", "c", "z"}
    assert service.list_sessions(app_name="nobody") == []


def test_compact_events_replaces_a_prefix_atomically(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1")
    events = [make_event(delta={"n": i}) for i in range(5)]
    for e in events:
        service.add_event(_ref(), e)
    summary = make_event("compactor", delta={"n": -1}, text="summary")
    with pytest.raises(ConcurrencyConflict) as info:
        service.compact_events(_ref(), through_seq=3, compaction_event=summary, expected_version=1)
    assert info.value.reason == "stale_session"
    with pytest.raises(ValidationError):
        service.compact_events(_ref(), through_seq=6, compaction_event=summary)
    result = service.compact_events(_ref(), through_seq=3, compaction_event=summary, expected_version=5)
    assert result.seq == 3 and result.version == 6
    got = service.get_session(_ref())
    assert got.events == (summary, events[3], events[4])
    assert got.event_seqs == (3, 4, 5)
    assert got.state == {"n": 4}
    assert service.add_event(_ref(), make_event()).seq == 6


def test_legacy_conversation_save_and_load(service: Any) -> None:
    with pytest.raises(SessionNotFound):
        service.load_conversation(APP, "agent", "k")
    history = [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "yo"}]}]
    service.save_conversation(APP, "agent", "k", history)
    assert service.load_conversation(APP, "agent", "k") == history
    service.save_conversation(APP, "agent", "k", history[:1])
    assert service.load_conversation(APP, "agent", "k") == history[:1]
    with pytest.raises(SessionNotFound):
        service.load_conversation(APP, "other-agent", "k")


@pytest.mark.parametrize("bad", ["\ud800", "s\udfff", "\udc00x", "a\x00", "tab\t"])
def test_names_with_lone_surrogates_or_control_characters_are_rejected(service: Any, bad: str) -> None:
    attempts = [
        lambda: service.create_session(app_name=APP, user_id=USER, session_id=bad),
        lambda: service.create_session(app_name=APP, user_id=bad, session_id="s1"),
        lambda: service.create_session(app_name=bad, user_id=USER, session_id="s1"),
        lambda: service.list_sessions(app_name=APP, user_id=bad),
        lambda: service.save_conversation(APP, bad, "k", []),
        lambda: SessionRef(app_name=APP, user_id=USER, session_id=bad),
    ]
    for attempt in attempts:
        with pytest.raises(ValidationError) as info:
            attempt()
        assert info.value.reason == "invalid_name"
        assert set(info.value.details) == {"field", "type"}
    assert service.list_sessions(app_name=APP) == []


@pytest.mark.parametrize(
    "bad", [float("nan"), math.inf, "nul\x00char", {"k\x00": 1}, "lone\ud800", "x\udfff", {"k\udc00": 1}, ["\ud83d"]]
)
def test_nul_and_nan_are_rejected_identically_and_nothing_is_written(service: Any, bad: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1")
    with pytest.raises(ValidationError) as info:
        service.update_state(_ref(), {"k": bad})
    assert info.value.reason == "invalid_json"
    with pytest.raises(ValidationError) as info2:
        service.add_event(_ref(), {**make_event().to_dict(), "provider_metadata": {"m": bad}})
    assert isinstance(info2.value, ValidationError)
    with pytest.raises(ValidationError) as info3:
        service.create_session(app_name=APP, user_id=USER, session_id="s2", state={"k": bad})
    assert info3.value.reason == "invalid_json"
    with pytest.raises(ValidationError):
        service.save_conversation(APP, "agent", "k", [{"t": bad}])
    got = service.get_session(_ref())
    assert got.events == () and got.state == {} and got.version == 0
    with pytest.raises(SessionNotFound):
        service.get_session(_ref("s2"))


@pytest.mark.parametrize("bad_name", ["", "a\x00b", "x" * 256, 7])
def test_invalid_names_are_rejected(service: Any, bad_name: Any) -> None:
    with pytest.raises(ValidationError) as info:
        service.create_session(app_name=APP, user_id=bad_name, session_id="s1")
    assert info.value.reason == "invalid_name"


def test_invalid_events_are_rejected(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1")
    with pytest.raises(ValidationError):
        service.add_event(_ref(), {"id": "x"})
    with pytest.raises(ValidationError):
        service.add_event(_ref(), 42)
    assert service.get_session(_ref()).events == ()


def test_returned_state_is_a_copy(service: Any) -> None:
    s = service.create_session(app_name=APP, user_id=USER, session_id="s1", state={"k": {"n": 1}})
    s.state["k"]["n"] = 2
    s.state["new"] = 1
    assert service.get_session(_ref()).state == {"k": {"n": 1}}


def test_service_pickles_and_keeps_working(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="s1")
    service.add_event(_ref(), make_event(delta={"a": 1}))
    clone = pickle.loads(pickle.dumps(service))
    try:
        assert clone.get_session(_ref()).state == {"a": 1}
        clone.add_event(_ref(), make_event(delta={"a": 2}))
        if type(service).__name__ == "SqlSessionService":
            assert service.get_session(_ref()).state == {"a": 2}
    finally:
        clone.close()


def test_expectations_on_user_state_are_atomic_across_sessions(service: Any) -> None:
    for i in range(6):
        service.create_session(app_name=APP, user_id=USER, session_id=f"s{i}")
    service.update_state(_ref("s0"), {"user:token": "free"})
    barrier = threading.Barrier(6, timeout=WAIT_TIMEOUT_S)
    wins: list[int] = []

    def claim(i: int) -> None:
        if not _meet(barrier):
            return
        try:
            service.add_event_if_state(
                _ref(f"s{i}"), make_event(delta={"user:token": f"taken-{i}"}), {"user:token": "free"}
            )
            wins.append(i)
        except ConcurrencyConflict:
            pass

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    _join_all(threads)
    assert len(wins) == 1
    assert service.get_session(_ref("s3")).state["user:token"] == f"taken-{wins[0]}"
    assert sum(len(service.get_session(_ref(f"s{i}")).events) for i in range(6)) == 1

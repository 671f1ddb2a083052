"""Authenticated pagination and rewind (``adk_actors.sessions.query``) on every backend."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from actor_tests.sessions.support import make_event
from adk_actors.errors import SessionError, SessionNotFound, ValidationError
from adk_actors.sessions import SessionRef, query

APP, USER = "query_app", "user-1"
SECRET = query.new_cursor_secret()


def _ref(sid: str = "query-a", user_id: str = USER) -> SessionRef:
    return SessionRef(app_name=APP, user_id=user_id, session_id=sid)


def _seed(service: Any, sid: str = "query-a", n: int = 7) -> list[Any]:
    service.create_session(app_name=APP, user_id=USER, session_id=sid)
    events = [
        make_event(
            "user" if i % 2 == 0 else "agent",
            delta={"step": i},
            invocation_id=f"inv-{i // 3}",
            timestamp=1000.0 + i,
            text=None if i == 5 else f"t{i}",
        )
        for i in range(n)
    ]
    for e in events:
        service.add_event(_ref(sid), e)
    return events


def _reason(exc_info: Any) -> str:
    return str(exc_info.value.reason)


def test_new_cursor_secrets_are_random_32_bytes() -> None:
    a, b = query.new_cursor_secret(), query.new_cursor_secret()
    assert isinstance(a, bytes) and len(a) == 32 and a != b


def test_reference_example_pages_and_rewinds(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="query-a")
    service.add_event(_ref(), make_event("user", delta={"step": 1}, text="question"))
    service.add_event(_ref(), make_event("agent", delta={"step": 2}, text="answer", is_final=True))
    page = query.list(service, app_name=APP, user_id=USER, limit=10, cursor_secret=SECRET)
    assert [s.id for s in page.sessions] == ["query-a"] and page.next_cursor is None
    events = query.get(service, _ref(), event_limit=1, cursor_secret=SECRET)
    assert isinstance(events.next_cursor, str)
    result = query.rewind(service, _ref(), to_index=1, target_session_id="query-a-before-answer")
    assert (result.session_id, result.events_copied) == ("query-a-before-answer", 1)
    assert len(service.get_session(_ref()).events) == 2
    branch = service.get_session(_ref("query-a-before-answer"))
    assert branch.state == {"step": 1} and len(branch.events) == 1


def test_event_pages_walk_every_event_once(service: Any) -> None:
    events = _seed(service)
    seen: list[Any] = []
    cursor = None
    pages = 0
    while True:
        page = query.get(service, _ref(), event_limit=3, cursor=cursor, cursor_secret=SECRET)
        seen.extend(page.session.events)
        pages += 1
        assert page.total == 7
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == events and pages == 3
    desc = query.get(service, _ref(), event_limit=100, order="desc", cursor_secret=SECRET)
    assert desc.session.events == tuple(reversed(events))
    assert desc.session.event_seqs == tuple(range(7, 0, -1))


@pytest.mark.parametrize(
    ("flt", "expected_steps"),
    [
        (query.EventFilter(authors=("agent",)), [1, 3, 5]),
        (query.EventFilter(invocation_ids=("inv-1",)), [3, 4, 5]),
        (query.EventFilter(authors="agent", invocation_ids="inv-0"), [1]),
        (query.EventFilter(since=1002.0, until=1004.0), [2, 3]),
        (query.EventFilter(has_content=False), [5]),
        (query.EventFilter(partial=False, authors=("user",)), [0, 2, 4, 6]),
        (query.EventFilter(partial=True), []),
    ],
)
def test_event_filters(service: Any, flt: query.EventFilter, expected_steps: list[int]) -> None:
    _seed(service)
    page = query.get(service, _ref(), event_limit=2, cursor_secret=SECRET, event_filter=flt)
    steps = [e.actions.state_delta["step"] for e in page.session.events]
    cursor = page.next_cursor
    while cursor:
        page = query.get(service, _ref(), event_limit=2, cursor=cursor, cursor_secret=SECRET, event_filter=flt)
        steps += [e.actions.state_delta["step"] for e in page.session.events]
        cursor = page.next_cursor
    assert steps == expected_steps


def test_session_list_pages_newest_first(service: Any) -> None:
    for i in range(5):
        service.create_session(app_name=APP, user_id=USER, session_id=f"s{i}")
        service.add_event(_ref(f"s{i}"), make_event())
    first = query.list(service, app_name=APP, user_id=USER, limit=2, cursor_secret=SECRET)
    second = query.list(service, app_name=APP, user_id=USER, limit=2, cursor=first.next_cursor, cursor_secret=SECRET)
    third = query.list(service, app_name=APP, user_id=USER, limit=2, cursor=second.next_cursor, cursor_secret=SECRET)
    ids = [s.id for p in (first, second, third) for s in p.sessions]
    assert sorted(ids) == [f"s{i}" for i in range(5)] and third.next_cursor is None
    assert ids == [s.id for s in service.list_sessions(app_name=APP, user_id=USER)]


def _tamper(cursor: str) -> str:
    body, mac = cursor.split(".")
    data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    data["offset"] = 0
    forged = base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":"), sort_keys=True).encode())
    return forged.rstrip(b"=").decode() + "." + mac


@pytest.mark.parametrize(
    "forge",
    [
        _tamper,
        lambda c: c[:-2] + ("AA" if not c.endswith("AA") else "BB"),
        lambda c: "not-a-cursor",
        lambda c: c.replace(".", ""),
        lambda c: "!!!." + c.split(".")[1],
    ],
)
def test_forged_cursors_are_invalid(service: Any, forge: Any) -> None:
    _seed(service)
    cursor = query.get(service, _ref(), event_limit=2, cursor_secret=SECRET).next_cursor
    with pytest.raises(SessionError) as info:
        query.get(service, _ref(), event_limit=2, cursor=forge(cursor), cursor_secret=SECRET)
    assert _reason(info) == "invalid_cursor"


def test_a_cursor_under_another_secret_is_invalid(service: Any) -> None:
    _seed(service)
    cursor = query.get(service, _ref(), event_limit=2, cursor_secret=SECRET).next_cursor
    with pytest.raises(SessionError) as info:
        query.get(service, _ref(), event_limit=2, cursor=cursor, cursor_secret=query.new_cursor_secret())
    assert _reason(info) == "invalid_cursor"


def test_cross_scope_and_rebound_cursors_are_invalid(service: Any) -> None:
    _seed(service, "query-a")
    _seed(service, "query-b")
    cursor = query.get(service, _ref("query-a"), event_limit=2, cursor_secret=SECRET).next_cursor
    attempts = {
        "other session": lambda: query.get(
            service, _ref("query-b"), event_limit=2, cursor=cursor, cursor_secret=SECRET
        ),
        "other page size": lambda: query.get(
            service, _ref("query-a"), event_limit=3, cursor=cursor, cursor_secret=SECRET
        ),
        "other order": lambda: query.get(
            service, _ref("query-a"), event_limit=2, cursor=cursor, order="desc", cursor_secret=SECRET
        ),
        "other filter": lambda: query.get(
            service,
            _ref("query-a"),
            event_limit=2,
            cursor=cursor,
            cursor_secret=SECRET,
            event_filter=query.EventFilter(authors=("user",)),
        ),
        "list with an event cursor": lambda: query.list(
            service, app_name=APP, user_id=USER, limit=2, cursor=cursor, cursor_secret=SECRET
        ),
    }
    for name, attempt in attempts.items():
        with pytest.raises(SessionError) as info:
            attempt()
        assert _reason(info) == "invalid_cursor", name
    list_cursor = query.list(service, app_name=APP, user_id=USER, limit=1, cursor_secret=SECRET).next_cursor
    service.create_session(app_name=APP, user_id="user-2", session_id="x")
    with pytest.raises(SessionError) as info:
        query.list(service, app_name=APP, user_id="user-2", limit=1, cursor=list_cursor, cursor_secret=SECRET)
    assert _reason(info) == "invalid_cursor"


def test_cursors_go_stale_when_the_source_changes(service: Any) -> None:
    _seed(service)
    cursor = query.get(service, _ref(), event_limit=2, cursor_secret=SECRET).next_cursor
    service.update_state(_ref(), {"touched": True})
    with pytest.raises(SessionError) as info:
        query.get(service, _ref(), event_limit=2, cursor=cursor, cursor_secret=SECRET)
    assert _reason(info) == "stale_cursor"
    cursor = query.get(service, _ref(), event_limit=2, cursor_secret=SECRET).next_cursor
    service.add_event(_ref(), make_event())
    with pytest.raises(SessionError) as info:
        query.get(service, _ref(), event_limit=2, cursor=cursor, cursor_secret=SECRET)
    assert _reason(info) == "stale_cursor"
    service.create_session(app_name=APP, user_id=USER, session_id="other")
    list_cursor = query.list(service, app_name=APP, user_id=USER, limit=1, cursor_secret=SECRET).next_cursor
    service.create_session(app_name=APP, user_id=USER, session_id="newer")
    with pytest.raises(SessionError) as info:
        query.list(service, app_name=APP, user_id=USER, limit=1, cursor=list_cursor, cursor_secret=SECRET)
    assert _reason(info) == "stale_cursor"


def test_a_recreated_session_does_not_accept_old_cursors(service: Any) -> None:
    _seed(service, n=4)
    cursor = query.get(service, _ref(), event_limit=2, cursor_secret=SECRET).next_cursor
    service.delete_session(_ref())
    _seed(service, n=4)
    with pytest.raises(SessionError) as info:
        query.get(service, _ref(), event_limit=2, cursor=cursor, cursor_secret=SECRET)
    assert _reason(info) == "stale_cursor"


def test_malformed_filters_are_rejected() -> None:
    for kwargs in ({"authors": [1]}, {"partial": "yes"}, {"since": "yesterday"}, {"invocation_ids": 5}):
        with pytest.raises(ValidationError) as info:
            query.EventFilter(**kwargs)
        assert info.value.reason == "invalid_filter"


@pytest.mark.parametrize("bad", ["\ud800", "user\udfff", "a\x00"])
def test_filters_with_lone_surrogates_or_nul_are_rejected(service: Any, bad: str) -> None:
    _seed(service, n=2)
    for kwargs in ({"authors": (bad,)}, {"authors": bad}, {"invocation_ids": ["inv-0", bad]}):
        with pytest.raises(ValidationError) as info:
            query.get(service, _ref(), cursor_secret=SECRET, event_filter=query.EventFilter(**kwargs))
        assert info.value.reason == "invalid_filter" and info.value.details == {"field": next(iter(kwargs))}


def test_bad_page_arguments_are_rejected(service: Any) -> None:
    _seed(service, n=1)
    for kwargs in ({"event_limit": 0}, {"event_limit": 1001}, {"order": "sideways"}):
        with pytest.raises(ValidationError):
            query.get(service, _ref(), cursor_secret=SECRET, **kwargs)
    with pytest.raises(ValidationError) as info:
        query.get(service, _ref(), cursor_secret=b"short")
    assert _reason(info) == "invalid_cursor_secret"
    with pytest.raises(SessionNotFound):
        query.get(service, _ref("nope"), cursor_secret=SECRET)


def test_rewind_never_edits_the_source_and_copies_a_prefix(service: Any) -> None:
    events = _seed(service)
    before = service.get_session(_ref())
    result = query.rewind(service, _ref(), before_event_id=events[4].id)
    assert result.events_copied == 4 and result.session_id != "query-a"
    branch = service.get_session(_ref(result.session_id))
    assert branch.events == tuple(events[:4]) and branch.state == {"step": 3}
    assert service.get_session(_ref()) == before
    empty = query.rewind(service, _ref(), to_index=0)
    assert empty.events_copied == 0 and empty.session.events == ()
    with pytest.raises(SessionError) as info:
        query.rewind(service, _ref(), to_index=1, target_session_id=result.session_id)
    assert _reason(info) == "already_exists"
    for bad in ({"to_index": 8}, {"to_index": -1}, {}, {"to_index": 1, "before_event_id": events[0].id}):
        with pytest.raises(ValidationError):
            query.rewind(service, _ref(), **bad)
    with pytest.raises(ValidationError) as info2:
        query.rewind(service, _ref(), before_event_id="no-such-event")
    assert _reason(info2) == "event_not_found"
    with pytest.raises(SessionNotFound):
        query.rewind(service, _ref("missing"), to_index=0)


def test_rewind_refuses_temp_deltas_and_needs_opt_in_for_shared_state(service: Any) -> None:
    service.create_session(app_name=APP, user_id=USER, session_id="src")
    service.add_event(_ref("src"), make_event(delta={"user:lang": "fr", "app:flag": 1, "k": 1}))
    service.add_event(_ref("src"), make_event(delta={"temp:scratch": 1}, partial=True))
    service.add_event(_ref("src"), make_event(delta={"temp:scratch": 2}))
    with pytest.raises(SessionError) as info:
        query.rewind(service, _ref("src"), to_index=3)
    assert _reason(info) == "temp_state_replay"
    with pytest.raises(SessionError) as info:
        query.rewind(service, _ref("src"), to_index=2)
    assert _reason(info) == "shared_state_replay"
    service.update_state(_ref("src"), {"user:lang": "de"})
    result = query.rewind(service, _ref("src"), to_index=2, allow_shared_state=True)
    assert result.events_copied == 2
    assert service.get_session(_ref(result.session_id)).state == {"user:lang": "fr", "app:flag": 1, "k": 1}
    assert [s.id for s in service.list_sessions(app_name=APP, user_id=USER)].count(result.session_id) == 1

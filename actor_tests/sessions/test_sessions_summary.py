"""``SessionSummary``: sessions per app and user of the in-memory store (the admin shell's ``sessions``)."""

from __future__ import annotations

import pytest

from adk_actors.errors import ValidationError
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import InMemorySessionService
from adk_actors.sessions.actor import STORE_NAME, ActorSessionService, summarize
from adk_actors.sessions.messages import MAX_SUMMARY_ROWS, SessionSummary


def test_session_counts_groups_by_app_and_user_and_forgets_deleted_sessions() -> None:
    service = InMemorySessionService()
    assert service.session_counts() == {}
    for app, user in [("b", "u2"), ("b", "u1"), ("b", "u2"), ("a", "u1")]:
        service.create_session(app_name=app, user_id=user)
    gone = service.create_session(app_name="a", user_id="u9")
    service.delete_session(gone)
    counts = service.session_counts()
    assert counts == {"a": {"u1": 1}, "b": {"u1": 1, "u2": 2}}
    assert list(counts) == ["a", "b"] and list(counts["b"]) == ["u1", "u2"]


def test_summarize_bounds_the_rows_but_counts_every_session() -> None:
    counts = {"a": {"u1": 2, "u2": 1}, "b": {"u1": 4}}
    assert summarize(counts, 10) == {"backend": "memory", "apps": counts, "sessions": 7, "truncated": False}
    assert summarize(counts, 2) == {
        "backend": "memory",
        "apps": {"a": {"u1": 2, "u2": 1}},
        "sessions": 7,
        "truncated": True,
    }
    many = {"a": {f"u{i}": 1 for i in range(MAX_SUMMARY_ROWS + 1)}}
    assert summarize(many, MAX_SUMMARY_ROWS * 2)["truncated"] is True
    for bad in (-1, False, 1.5):
        with pytest.raises(ValidationError):
            summarize(counts, bad)  # type: ignore[arg-type]


def test_the_store_actor_answers_session_summary_and_survives_a_bad_limit(system: ActorSystemHandle) -> None:
    store = ActorSessionService(system=system)
    app = "summary_app"
    store.create_session(app_name=app, user_id="alice")
    store.create_session(app_name=app, user_id="alice")
    summary = system.ask(STORE_NAME, SessionSummary())
    assert summary["backend"] == "memory" and summary["apps"][app] == {"alice": 2}
    pid = system.ask(STORE_NAME, GetStatus())["pid"]
    with pytest.raises(ValidationError):
        system.ask(STORE_NAME, SessionSummary(limit=-1))
    assert system.ask(STORE_NAME, GetStatus())["pid"] == pid  # a failed reply, not a crash

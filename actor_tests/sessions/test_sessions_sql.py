"""SQL-only behaviour: schema, migrations, descriptors, failure to open, what is (not) persisted."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, text

from actor_tests.sessions.support import make_event
from adk_actors.content.canonical import canonical_dumps, canonical_loads, check_json_safe
from adk_actors.errors import ConfigError, StorageError, ValidationError
from adk_actors.sessions import (
    InMemorySessionService,
    SessionRef,
    SqlSessionService,
    default_sqlite_url,
    session_service_from_settings,
)
from adk_actors.sessions.model import TEMP_VALUE_MARKER
from adk_actors.sessions.sql import SCHEMA_VERSION

REF = SessionRef(app_name="app", user_id="u", session_id="s1")


@pytest.fixture
def sql_service(sql_kind: str, sql_url_factory: Any) -> Any:
    svc = SqlSessionService(sql_url_factory(sql_kind))
    yield svc
    svc.close()


def _raw(svc: SqlSessionService, sql: str) -> list[Any]:
    engine = create_engine(svc.url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)).all())
    finally:
        engine.dispose()


def test_schema_is_created_and_its_version_recorded(sql_service: SqlSessionService) -> None:
    sql_service.open()
    assert sql_service.schema_version() == SCHEMA_VERSION
    engine = create_engine(sql_service.url)
    try:
        insp = inspect(engine)
        tables = set(insp.get_table_names())
        assert {
            "adk_sessions",
            "adk_session_events",
            "adk_user_state",
            "adk_app_state",
            "adk_conversations",
            "adk_session_schema",
        } <= tables
        index_names = {i["name"] for i in insp.get_indexes("adk_sessions")}
        assert "ix_adk_sessions_newest" in index_names
        pk = insp.get_pk_constraint("adk_session_events")["constrained_columns"]
        assert pk == ["session_pk", "seq"]
        if engine.dialect.name == "postgresql":
            types = {c["name"]: type(c["type"]).__name__ for c in insp.get_columns("adk_sessions")}
            assert types["state"] == "JSONB"
    finally:
        engine.dispose()


def test_reopening_does_not_migrate_again_and_newer_schemas_are_refused(sql_service: SqlSessionService) -> None:
    sql_service.create_session(app_name="app", user_id="u", session_id="s1", state={"a": 1})
    sql_service.close()
    again = SqlSessionService(sql_service.url)
    assert again.get_session(REF).state == {"a": 1}
    again.close()
    engine = create_engine(sql_service.url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE adk_session_schema SET version = :v"), {"v": SCHEMA_VERSION + 1})
    engine.dispose()
    newer = SqlSessionService(sql_service.url)
    with pytest.raises(StorageError) as info:
        newer.open()
    assert info.value.reason == "schema_too_new"


def test_stored_json_is_canonical_and_temp_state_is_never_persisted(sql_service: SqlSessionService) -> None:
    sql_service.create_session(app_name="app", user_id="u", session_id="s1", state={"temp:t0": 1})
    sql_service.add_event(REF, make_event(delta={"b": 1, "a": 2, "temp:t": "secret-ish", "user:z": 1}))
    sql_service.update_state(REF, {"temp:t2": 2})
    assert sql_service.get_session(REF).state["temp:t"] == "secret-ish"
    rows = _raw(sql_service, "SELECT state FROM adk_sessions")
    assert len(rows) == 1
    stored = rows[0][0]
    if isinstance(stored, str):  # SQLite returns the text exactly as written
        assert stored == '{"a":2,"b":1}'
    else:
        assert stored == {"a": 2, "b": 1}
    fresh = pickle.loads(pickle.dumps(sql_service))
    assert fresh.get_session(REF).state == {"a": 2, "b": 1, "user:z": 1}
    fresh.close()
    # The event record keeps the temp: key (rewind must know it was set) but never its value.
    events = _raw(sql_service, "SELECT data FROM adk_session_events")
    assert len(events) == 1
    record = events[0][0]
    raw_text = record if isinstance(record, str) else canonical_dumps(record)
    assert "secret-ish" not in raw_text
    stored_delta = (canonical_loads(record) if isinstance(record, str) else record)["actions"]["state_delta"]
    assert stored_delta == {"a": 2, "b": 1, "temp:t": TEMP_VALUE_MARKER, "user:z": 1}
    assert sql_service.get_session(REF).events[0].actions.state_delta["temp:t"] == TEMP_VALUE_MARKER


def test_temp_values_are_redacted_identically_in_every_stored_event_record(sql_url_factory: Any) -> None:
    def records(svc: Any) -> list[dict[str, Any]]:
        svc.create_session(
            app_name="app",
            user_id="u",
            session_id="s1",
            events=[make_event(delta={"temp:c": "secret-create"}, event_id="e0", timestamp=1.0)],
        )
        result = svc.add_event(
            REF, make_event(delta={"temp:a": {"secret": "secret-a"}, "x": 1}, event_id="e1", timestamp=2.0)
        )
        assert result.state["temp:a"] == {"secret": "secret-a"}  # the in-flight state keeps the real value
        svc.add_event(REF, make_event(delta={"temp:p": "secret-partial"}, partial=True, event_id="e2", timestamp=3.0))
        svc.add_event_if_state(REF, make_event(delta={"temp:b": "secret-b"}, event_id="e3", timestamp=4.0), {"x": 1})
        got = svc.get_session(REF)
        assert got.state["temp:b"] == "secret-b" and got.state["temp:a"] == {"secret": "secret-a"}
        out = [e.to_dict() for e in got.events]
        if isinstance(svc, SqlSessionService):
            raw = [r[0] for r in _raw(svc, "SELECT data FROM adk_session_events ORDER BY seq")]
            text = " ".join(r if isinstance(r, str) else canonical_dumps(r) for r in raw)
            assert "secret-" not in text
        assert "secret-" not in canonical_dumps(out)
        return out

    sqlite_svc = SqlSessionService(sql_url_factory("sqlite"))
    pg_svc = SqlSessionService(sql_url_factory("postgres"))
    memory_svc = InMemorySessionService()
    try:
        stored = [records(svc) for svc in (sqlite_svc, pg_svc, memory_svc)]
    finally:
        for svc in (sqlite_svc, pg_svc, memory_svc):
            svc.close()
    assert stored[0] == stored[1] == stored[2]
    deltas = [e["actions"]["state_delta"] for e in stored[0]]
    assert deltas == [
        {"temp:c": TEMP_VALUE_MARKER},
        {"temp:a": TEMP_VALUE_MARKER, "x": 1},
        {"temp:p": TEMP_VALUE_MARKER},
        {"temp:b": TEMP_VALUE_MARKER},
    ]


def test_pickle_carries_url_and_options_never_an_engine(sql_service: SqlSessionService) -> None:
    sql_service.open()
    blob = pickle.dumps(sql_service)
    assert b"Engine" not in blob and b"sqlalchemy" not in blob
    clone = pickle.loads(blob)
    assert clone.url == sql_service.url and clone._engine is None
    clone.close()


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_dir: Path) -> None:
    svc = SqlSessionService(f"sqlite:///{tmp_dir / 'wal.db'}", busy_timeout_ms=1234)
    try:
        svc.open()
        engine = svc._get_engine()
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 1234
    finally:
        svc.close()


def test_default_url_is_a_sqlite_file_under_the_data_dir(tmp_dir: Path) -> None:
    data_dir = tmp_dir / "data" / "nested"
    svc = session_service_from_settings("sql", "", data_dir)
    try:
        assert isinstance(svc, SqlSessionService)
        assert svc.url == default_sqlite_url(data_dir) == f"sqlite:///{data_dir.resolve() / 'sessions.db'}"
        assert (data_dir / "sessions.db").exists()
        with sqlite3.connect(data_dir / "sessions.db") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        svc.close()
    assert isinstance(session_service_from_settings("memory", "", data_dir), InMemorySessionService)


def test_unknown_backend_is_a_config_error(tmp_dir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        session_service_from_settings("redis", "", tmp_dir)
    assert info.value.reason == "invalid_value"
    with pytest.raises(ConfigError):
        SqlSessionService("not a url")


@pytest.mark.parametrize(
    "url_of",
    [
        lambda tmp: f"sqlite:///{tmp / 'a-file' / 'sessions.db'}",
        lambda tmp: "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2",
        lambda tmp: "nosuchdialect://host/db",
        lambda tmp: "sqlite://",
    ],
    ids=["sqlite-parent-is-a-file", "postgres-refused", "unknown-dialect", "in-memory-sqlite"],
)
def test_a_configured_backend_that_cannot_open_fails_loudly(tmp_dir: Path, url_of: Any) -> None:
    (tmp_dir / "a-file").write_text("not a directory")
    url = url_of(tmp_dir)
    with pytest.raises((StorageError, ConfigError)) as info:
        session_service_from_settings("sql", url, tmp_dir)
    if isinstance(info.value, StorageError):
        assert info.value.reason == "open_failed"
    svc = SqlSessionService(url) if "nosuch" not in url else None
    if svc is not None:
        with pytest.raises(StorageError):
            svc.get_session(REF)


def test_password_never_appears_in_errors_or_repr(tmp_dir: Path) -> None:
    url = "postgresql+psycopg://user:hunter2@127.0.0.1:1/none?connect_timeout=2"
    svc = SqlSessionService(url)
    assert "hunter2" not in repr(svc)
    with pytest.raises(StorageError) as info:
        svc.open()
    assert "hunter2" not in str(info.value) and "hunter2" not in str(info.value.details)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://drv-user-x7q:hunter2@127.0.0.1:1/drv-db-x7q?connect_timeout=2",
        "postgresql+psycopg://drv-user-x7q:hunter2@drv-host-x7q.invalid/drv-db-x7q?connect_timeout=2",
    ],
    ids=["refused", "unresolvable-host"],
)
def test_storage_errors_are_structural_and_never_carry_driver_text(url: str) -> None:
    svc = SqlSessionService(url)
    try:
        for attempt in (
            svc.open,
            lambda: svc.get_session(REF),
            lambda: svc.create_session(app_name="app", user_id="u", session_id="s1"),
        ):
            with pytest.raises(StorageError) as info:
                attempt()
            err = info.value
            assert err.reason == "open_failed"
            assert set(err.details) <= {"operation", "dialect", "error", "sqlstate"}
            assert err.details["dialect"] == "postgresql" and err.details["operation"] in {"open", "initialize"}
            assert err.__cause__ is None and err.__suppress_context__
            text = f"{err} {err!r} {err.details} {err.to_dict()} {pickle.loads(pickle.dumps(err))}"
            for needle in ("hunter2", "drv-user", "drv-host", "drv-db", "127.0.0.1", "connection", "refused"):
                assert needle not in text, needle
    finally:
        svc.close()


def test_sqlite_storage_errors_never_carry_paths(tmp_dir: Path) -> None:
    (tmp_dir / "a-file").write_text("not a directory")
    svc = SqlSessionService(f"sqlite:///{tmp_dir / 'a-file' / 'drv-sqlite-x7q.db'}")
    try:
        with pytest.raises(StorageError) as info:
            svc.open()
    finally:
        svc.close()
    text = f"{info.value} {info.value!r} {info.value.details}"
    assert "drv-sqlite" not in text and str(tmp_dir) not in text
    assert info.value.details["dialect"] == "sqlite" and info.value.details["operation"] == "open"


BAD_VALUES = (float("nan"), float("inf"), "a\x00b", "\ud800", "a\udfffb")
"""NaN, Infinity, NUL and lone surrogates: none of them can be canonical JSON or UTF-8 text."""


def _bad_inputs() -> list[tuple[str, Any]]:
    base = make_event().to_dict()
    cases: list[tuple[str, Any]] = []
    for bad in BAD_VALUES:
        cases.append(("update_state", {"k": bad}))
        cases.append(("update_state", {"user:k": [bad]}))
        cases.append(("add_event", {**base, "actions": {**base["actions"], "state_delta": {"k": bad}}}))
        cases.append(("add_event", {**base, "provider_metadata": {"m": bad}}))
        cases.append(("create_session", {"k": bad}))
        cases.append(("save_conversation", [{"t": bad}]))
    for bad_text in ("\x00", "\ud800", "x\udc00"):
        cases.append(("update_state", {f"k{bad_text}": 1}))
        cases.append(("update_state", {f"temp:k{bad_text}": 1}))
        cases.append(("add_event", {**base, "actions": {**base["actions"], "state_delta": {f"app:{bad_text}": 1}}}))
        cases.append(("add_event", {**base, "author": f"a{bad_text}"}))
        cases.append(("add_event", {**base, "id": f"e{bad_text}"}))
        cases.append(("create_session", {f"user:{bad_text}": 1}))
        cases.append(("create_session_id", f"s{bad_text}"))
        cases.append(("list_user_id", f"u{bad_text}"))
    return cases


def _outcomes(svc: Any) -> list[tuple[str, str, dict[str, Any]]]:
    svc.create_session(app_name="app", user_id="u", session_id="s1")
    seen = []
    for op, arg in _bad_inputs():
        with pytest.raises(ValidationError) as info:
            if op == "update_state":
                svc.update_state(REF, arg)
            elif op == "add_event":
                svc.add_event(REF, arg)
            elif op == "create_session":
                svc.create_session(app_name="app", user_id="u", session_id="s2", state=arg)
            elif op == "create_session_id":
                svc.create_session(app_name="app", user_id="u", session_id=arg)
            elif op == "list_user_id":
                svc.list_sessions(app_name="app", user_id=arg)
            else:
                svc.save_conversation("app", "agent", "k", arg)
        seen.append((type(info.value).__name__, info.value.reason, info.value.details))
    if isinstance(svc, SqlSessionService):
        assert _raw(svc, "SELECT count(*) FROM adk_session_events")[0][0] == 0
        assert _raw(svc, "SELECT count(*) FROM adk_sessions")[0][0] == 1
        assert _raw(svc, "SELECT count(*) FROM adk_conversations")[0][0] == 0
    assert [s.id for s in svc.list_sessions(app_name="app")] == ["s1"]
    got = svc.get_session(REF)
    assert got.state == {} and got.events == () and got.version == 0
    return seen


def test_nul_nan_and_surrogates_fail_identically_on_sqlite_postgresql_and_memory(sql_url_factory: Any) -> None:
    sqlite_svc = SqlSessionService(sql_url_factory("sqlite"))
    pg_svc = SqlSessionService(sql_url_factory("postgres"))
    memory_svc = InMemorySessionService()
    try:
        on_sqlite, on_pg, in_memory = _outcomes(sqlite_svc), _outcomes(pg_svc), _outcomes(memory_svc)
    finally:
        sqlite_svc.close()
        pg_svc.close()
        memory_svc.close()
    assert on_sqlite == on_pg == in_memory
    assert {reason for _, reason, _ in on_sqlite} <= {"invalid_json", "invalid_event", "invalid_name"}
    for _, _, details in on_sqlite:  # structural only: the bad text is never echoed (so details stay JSON-safe)
        check_json_safe(details)


def test_an_older_schema_is_migrated_forward_on_open(
    sql_service: SqlSessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    import adk_actors.sessions.sql as sql_module

    sql_service.create_session(app_name="app", user_id="u", session_id="s1", state={"a": 1})
    sql_service.close()
    ran: list[int] = []

    def to_2(conn: Any) -> None:
        ran.append(2)
        conn.execute(text("CREATE INDEX ix_adk_test_migration ON adk_session_events (author)"))

    monkeypatch.setattr(sql_module, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(sql_module.MIGRATIONS, 2, to_2)
    upgraded = SqlSessionService(sql_service.url)
    try:
        assert upgraded.get_session(REF).state == {"a": 1}
        assert upgraded.schema_version() == 2 and ran == [2]
    finally:
        upgraded.close()
    again = SqlSessionService(sql_service.url)
    try:
        again.open()
        assert ran == [2]
    finally:
        again.close()


def test_sqlite_readers_are_not_blocked_by_a_writer(tmp_dir: Path) -> None:
    db = tmp_dir / "readers.db"
    svc = SqlSessionService(f"sqlite:///{db}", busy_timeout_ms=100)
    svc.create_session(app_name="app", user_id="u", session_id="s1", state={"a": 1})
    holder = sqlite3.connect(db, isolation_level=None, timeout=0.1)
    try:
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("UPDATE adk_sessions SET version = version")
        assert svc.get_session(REF).state == {"a": 1}
        assert [s.id for s in svc.list_sessions(app_name="app")] == ["s1"]
        with pytest.raises(StorageError) as info:
            svc.add_event(REF, make_event())
        assert info.value.reason == "write_failed"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        svc.close()

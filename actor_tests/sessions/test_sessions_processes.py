"""Several processes sharing one SQL store through the picklable service descriptor."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from actor_tests.sessions.support import append_worker, close_only, endless_writer, make_event
from adk_actors.sessions import SessionRef, SqlSessionService

REF = SessionRef(app_name="app", user_id="u", session_id="shared")

pytestmark = pytest.mark.slow


KILL_JOIN_TIMEOUT_S = 30


def _reap(proc: Any) -> None:
    """Kill ``proc`` if it is still running and wait (bounded) for it to go."""
    if proc.is_alive():
        proc.kill()
        proc.join(KILL_JOIN_TIMEOUT_S)
        assert not proc.is_alive(), "a killed child process did not exit"


def _join_all(procs: list[Any], timeout: float = 100) -> None:
    try:
        for p in procs:
            p.join(timeout)
            assert not p.is_alive(), f"a child process did not finish within {timeout}s"
        assert [p.exitcode for p in procs] == [0] * len(procs)
    finally:
        for p in procs:
            _reap(p)


def test_four_processes_append_1000_dense_events(sql_kind: str, sql_url_factory: Any) -> None:
    service = SqlSessionService(sql_url_factory(sql_kind))
    try:
        service.create_session(app_name="app", user_id="u", session_id="shared")
        ctx = multiprocessing.get_context("spawn")  # spawn: the descriptor really crosses a pickle
        start = ctx.Event()
        procs = [ctx.Process(target=append_worker, args=(service, REF, w, 250, start)) for w in range(4)]
        for p in procs:
            p.start()
        start.set()
        _join_all(procs)
        session = service.get_session(REF)
        assert session.event_seqs == tuple(range(1, 1001))
        assert session.last_seq == 1000 and session.version == 1000
        assert len({e.id for e in session.events}) == 1000
        assert session.state == {f"w{w}_{i}": i for w in range(4) for i in range(250)}
        for w in range(4):  # each writer's own events keep their order
            mine = [int(e.id.split("-")[1]) for e in session.events if e.author == f"w{w}"]
            assert mine == list(range(250))
    finally:
        service.close()


def test_a_forked_child_opens_its_own_engine(sql_kind: str, sql_url_factory: Any) -> None:
    service = SqlSessionService(sql_url_factory(sql_kind))
    try:
        service.create_session(app_name="app", user_id="u", session_id="shared")
        parent_engine = service._get_engine()
        ctx = multiprocessing.get_context("fork")
        start = ctx.Event()
        start.set()
        child = ctx.Process(target=append_worker, args=(service, REF, 0, 20, start))
        child.start()
        _join_all([child])
        closer = ctx.Process(target=close_only, args=(service,))
        closer.start()
        _join_all([closer])
        assert service._get_engine() is parent_engine
        service.add_event(REF, make_event("parent"))
        assert service.get_session(REF).event_seqs == tuple(range(1, 22))
    finally:
        service.close()


def test_sigkill_mid_write_leaves_sqlite_consistent(tmp_dir: Path) -> None:
    db = tmp_dir / "killed.db"
    service = SqlSessionService(f"sqlite:///{db}")
    service.create_session(app_name="app", user_id="u", session_id="shared")
    service.close()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    writer = ctx.Process(target=endless_writer, args=(service, REF, ready, 50))
    writer.start()
    try:
        assert ready.wait(60), "the writer never got going"
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(30)
        assert not writer.is_alive(), "the killed writer did not exit"
        assert writer.exitcode == -signal.SIGKILL
    finally:
        _reap(writer)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    reopened = SqlSessionService(f"sqlite:///{db}")
    try:
        session = reopened.get_session(REF)
        n = len(session.events)
        assert n >= 50
        assert session.event_seqs == tuple(range(1, n + 1)) and session.last_seq == n == session.version
        # Every event's delta was applied iff the event exists, in all three persisted scopes.
        expected = {f"{scope}k{i}": i for i in range(n) for scope in ("", "user:", "app:")}
        assert session.state == expected
        assert [e.id for e in session.events] == [f"e{i}" for i in range(n)]
        reopened.add_event(REF, make_event("after"))
        assert reopened.get_session(REF).last_seq == n + 1
    finally:
        reopened.close()


def test_sigkill_mid_write_leaves_postgresql_consistent(pg_schema: Any) -> None:
    service = SqlSessionService(pg_schema.url)
    service.create_session(app_name="app", user_id="u", session_id="shared")
    service.close()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    writer = ctx.Process(target=endless_writer, args=(service, REF, ready, 30))
    writer.start()
    try:
        assert ready.wait(60), "the writer never got going"
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(30)
        assert not writer.is_alive(), "the killed writer did not exit"
    finally:
        _reap(writer)
    # The server aborts the dead client's open transaction when it notices the closed socket.
    engine = create_engine(pg_schema.url.split("?")[0])
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = :n AND pid <> pg_backend_pid()"
                ),
                {"n": pg_schema.name},
            )
    finally:
        engine.dispose()
    reopened = SqlSessionService(pg_schema.url)
    try:
        session = reopened.get_session(REF)
        n = len(session.events)
        assert n >= 30
        assert session.event_seqs == tuple(range(1, n + 1)) and session.last_seq == n
        assert session.state == {f"{scope}k{i}": i for i in range(n) for scope in ("", "user:", "app:")}
    finally:
        reopened.close()

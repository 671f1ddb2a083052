"""The node's session backend: the actor-owned in-memory store, and start() failing on a broken SQL backend."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import adk_actors
from adk_actors.errors import ConfigError, SessionNotFound, StorageError
from adk_actors.events import Event, EventActions
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle, group_pids, port_listening
from adk_actors.sessions import SessionRef
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.sessions.sql import SqlSessionService
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port


@pytest.fixture
def node(tmp_path: Path) -> Iterator[ActorSystemHandle]:
    handle = adk_actors.start(Settings(admin_port=reserved_port(), data_dir=str(tmp_path)))
    try:
        yield handle
    finally:
        handle.stop()


def _add_from_worker(app: str, user: str, session_id: str, text: str) -> int:
    from adk_actors import session_service
    from adk_actors.events import Event

    service = session_service()
    event = Event.new(invocation_id="w", author="user", content=text)
    return service.add_event(SessionRef(app_name=app, user_id=user, session_id=session_id), event).seq


def test_the_in_memory_store_is_one_actor_shared_by_every_process(node: ActorSystemHandle) -> None:
    service = adk_actors.session_service(node.settings)
    assert isinstance(service, ActorSessionService)
    session = service.create_session(app_name="app", user_id="u1", state={"user:name": "Ada", "k": 1})
    ref = SessionRef(app_name="app", user_id="u1", session_id=session.id)
    service.add_event(ref, Event.new(invocation_id="i1", author="user", actions=EventActions(state_delta={"k": 2})))
    seq = node.run_job(_add_from_worker, "app", "u1", session.id, "from a worker process", timeout=20)
    loaded = service.get_session(ref)
    assert loaded.state["k"] == 2 and loaded.state["user:name"] == "Ada"
    assert [e.invocation_id for e in loaded.events] == ["i1", "w"] and seq == loaded.last_seq
    with pytest.raises(SessionNotFound):
        service.get_session(SessionRef(app_name="app", user_id="u1", session_id="missing"))
    # the store is a tier-1 actor: killing every host leaves sessions intact
    for host in ("host-0", "host-1"):
        os.kill(node.ask(host, GetStatus())["pid"], signal.SIGKILL)
    assert service.get_session(ref).state["k"] == 2
    assert node.ask("sessions", GetStatus())["operations"] >= 4


def test_a_sql_backend_that_cannot_initialize_makes_start_fail_clearly(tmp_path: Path) -> None:
    port = reserved_port()
    bad = Settings(
        admin_port=port,
        data_dir=str(tmp_path),
        session_backend="sql",
        session_url="postgresql+psycopg://nobody@127.0.0.1:1/none",
    )
    with pytest.raises(StorageError) as info:
        adk_actors.start(bad)
    assert info.value.reason == "open_failed"
    assert not port_listening(port), "no system may be left running after a failed start"


def test_a_sql_backend_defaults_to_sqlite_under_the_data_dir(tmp_path: Path) -> None:
    handle = adk_actors.start(Settings(admin_port=reserved_port(), data_dir=str(tmp_path), session_backend="sql"))
    try:
        service = adk_actors.session_service(handle.settings)
        assert isinstance(service, SqlSessionService)
        session = service.create_session(app_name="a", user_id="u")
        assert service.get_session(session).id == session.id
        assert (tmp_path / "sessions.db").exists() or any(tmp_path.rglob("*.db"))
        service.close()
        assert "sessions" not in [c["id"] for c in handle.status()["children"]]
    finally:
        handle.stop()
    assert group_pids(handle.pgid) == []


def test_bench_measures_the_actor_client_against_a_running_node(node: ActorSystemHandle, tmp_path: Path) -> None:
    from adk_actors.devtools import session_throughput as bench

    before = node.ask("sessions", GetStatus())["operations"]
    result = bench.run("actor", n=20, reads=2, handle=node)
    assert result["backend"] == "actor" and result["events"] == 20 and result["get_session_reads"] == 2
    assert result["add_event_per_s"] and result["get_session_per_s"]
    # create + 20 appends + 2 reads + delete, every one an ask to the node's store actor
    assert node.ask("sessions", GetStatus())["operations"] - before == 24
    with pytest.raises(ConfigError) as info:
        bench.run("actor", n=1)
    assert info.value.reason == "invalid_value"
    # The other backends keep their behaviour (a handle, if given, is ignored).
    assert bench.run("memory", n=5, reads=1, handle=node)["backend"] == "memory"
    sql = bench.run("sql", f"sqlite:///{tmp_path / 'bench.db'}", n=5, reads=1, data_dir=str(tmp_path))
    assert sql["backend"] == "sqlite" and sql["events"] == 5
    assert node.ask("sessions", GetStatus())["operations"] - before == 24

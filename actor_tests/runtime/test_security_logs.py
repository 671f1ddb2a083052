"""Private data stays out of logs and stores: library loggers at WARNING, SQL parameters hidden (logs.py,
storage/sql.py), configured secret values scrubbed from persisted event text (secrets.py via sessions/model.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import adk_actors
from adk_actors import Runner, spawn_agent, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.runtime.system import ActorSystemHandle, group_pids
from adk_actors.secrets import REDACTED, Secret, register_secret, scrub_event_text
from adk_actors.sessions import SessionRef, SqlSessionService
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.settings import Settings
from adk_actors.testing import reserved_port
from adk_actors.testing.actors import Log

from .helpers import PROBE, start_child, unique

KEY = "AIza" + uuid.uuid4().hex + "Zq"  # the node's configured key, shaped like a real one
AGENT = "SecurityAgent"


@pytest.fixture(scope="module")
def node(tmp_module_dir: Path) -> Iterator[tuple[ActorSystemHandle, Emulator]]:
    """A node at the default log level with a configured key, and an agent on the emulator."""
    with Emulator() as emu:
        handle = adk_actors.start(
            Settings(
                admin_port=reserved_port(),
                data_dir=str(tmp_module_dir / "data"),
                hosts=1,
                workers=1,
                gemini_api_key=Secret(KEY),
            )
        )
        try:
            spawn_agent(AGENT, {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}, system=handle)
            yield handle, emu
            stop_agent(AGENT, system=handle)
        finally:
            handle.stop()
    assert group_pids(handle.pgid) == []


def _texts(service: Any, sid: str) -> list[str]:
    session = service.get_session(SessionRef(app_name="sec", user_id="u", session_id=sid))
    return [event.content.visible_text() for event in session.events if event.content is not None]


def test_a_sql_backed_turn_at_the_default_level_logs_no_statement_and_no_user_text(
    node: tuple[ActorSystemHandle, Emulator], tmp_path: Path
) -> None:
    handle, _emu = node
    assert handle.settings.log_level == "info"
    canary = f"canary-{uuid.uuid4().hex}"
    probe = start_child(handle, ChildSpec(id=unique("logs"), actor=PROBE))
    handle.ask(probe, Log(text=f"{canary} at info", level="info"))
    user_text = f"my private note {uuid.uuid4().hex}"
    store = SqlSessionService(f"sqlite:///{tmp_path / 'turns.db'}")  # opened by the host, inside the node
    try:
        assert Runner(AGENT, "sec", store, system=handle).run("u", unique("s"), user_text)
    finally:
        store.close()
    handle.ask(probe, Log(text=f"{canary} after the turn", level="info"))
    sink = _read_when(handle.log_sink, f"{canary} after the turn")
    assert f"{canary} at info" in sink, "an actor's info line never reached the sink"
    for needle in (user_text, "INSERT INTO", "SELECT ", "sqlalchemy.engine"):
        assert needle not in sink, f"{needle!r} reached the node log"


def _read_when(path: Path, line: str, seconds: float = 10.0) -> str:
    """The sink once ``line`` is in it (the logger process writes asynchronously; nothing to block on)."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        text = path.read_text(errors="replace")
        if line in text or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_configured_key_typed_into_a_message_is_not_persisted(
    node: tuple[ActorSystemHandle, Emulator], tmp_path: Path, backend: str
) -> None:
    handle, _emu = node
    db = tmp_path / "scrub.db"
    service: Any = ActorSessionService(system=handle) if backend == "memory" else SqlSessionService(f"sqlite:///{db}")
    sid = unique("s")
    try:
        assert Runner(AGENT, "sec", service, system=handle).run("u", sid, f"my key is {KEY} keep it")
        texts = _texts(service, sid)
    finally:
        if backend == "sqlite":
            service.close()
    assert f"my key is {REDACTED} keep it" in texts
    assert not any(KEY in text for text in texts)
    if backend == "sqlite":
        for path in tmp_path.glob("scrub.db*"):
            assert KEY.encode() not in path.read_bytes(), f"the key is in {path.name}"


def test_scrub_event_text_touches_text_parts_only() -> None:
    register_secret(KEY)
    data = {
        "content": {
            "parts": [
                {"type": "text", "text": f"a {KEY} b"},
                {"type": "function_call", "name": "f", "args": {"note": "plain"}},
            ]
        }
    }
    assert scrub_event_text(data)["content"]["parts"][0]["text"] == f"a {REDACTED} b"
    assert scrub_event_text({"content": None}) == {"content": None}


def test_sql_engines_hide_statement_parameters(tmp_path: Path) -> None:
    store = SqlSessionService(f"sqlite:///{tmp_path / 'hidden.db'}").open()
    try:
        assert store._get_engine().hide_parameters is True
    finally:
        store.close()

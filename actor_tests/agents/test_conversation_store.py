"""The ``session_id`` option: the compatibility conversation persists through the session service's legacy
save/load, so a stopped (or crashed) and respawned agent continues it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from adk_actors.agents import agent_history, build_spec, prompt, stop_agent
from adk_actors.agents.spec import LEGACY_APP
from adk_actors.emulator import Emulator
from adk_actors.errors import ConfigError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import InMemorySessionService, SqlSessionService, default_sqlite_url

from .conftest import Spawner, config_for, make_spawner, unique


def test_the_conversation_survives_a_respawn(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, tmp_path: Path
) -> None:
    store = SqlSessionService(f"sqlite:///{tmp_path / 'sessions.db'}").open()
    name = unique("Persistent")
    config = config_for(emu, session_id="conv-1", session_service=store)
    agent = spawn(name, config)
    assert prompt(agent, "one", system=system) == "You said: one"
    assert prompt(agent, "two", system=system) == "You said: two"
    saved = store.load_conversation(LEGACY_APP, name, "conv-1")
    assert [h["role"] for h in saved] == ["user", "model", "user", "model"]
    stop_agent(agent, system=system)
    again = spawn(name, config)
    assert prompt(again, "three", system=system) == "You said: three"
    assert len(emu.requests[-1]["body"]["contents"]) == 5  # one, answer, two, answer, three
    assert len(agent_history(again, system=system)) == 6
    other = spawn(unique("Persistent"), config_for(emu, session_id="conv-1", session_service=store))
    prompt(other, "fresh", system=system)
    assert len(emu.requests[-1]["body"]["contents"]) == 1  # keyed by agent name and session id


def test_session_id_needs_a_shared_store() -> None:
    base = {"provider": "gemini", "api_key": "k"}
    with pytest.raises(ConfigError) as info:
        build_spec("A", {**base, "session_id": "s"})
    assert info.value.reason == "session_backend_required"
    with pytest.raises(ConfigError) as info:
        build_spec("A", {**base, "session_id": "s", "session_service": InMemorySessionService()})
    assert info.value.details["key"] == "session_service"
    with pytest.raises(ConfigError) as info:
        build_spec("A", {**base, "session_id": ""})
    assert info.value.details["key"] == "session_id"


def test_with_a_sql_session_backend_the_nodes_store_is_used(
    make_system: Callable[..., ActorSystemHandle], emu: Emulator
) -> None:
    sql_system = make_system(session_backend="sql")
    spawn, cleanup = make_spawner(sql_system)
    try:
        name = unique("NodeStore")
        agent = spawn(name, config_for(emu, session_id="conv-9"))
        assert prompt(agent, "one", system=sql_system) == "You said: one"
        store = SqlSessionService(default_sqlite_url(sql_system.settings.data_dir))
        assert len(store.load_conversation(LEGACY_APP, name, "conv-9")) == 2
    finally:
        cleanup()


def test_with_the_memory_backend_the_nodes_store_actor_keeps_the_conversation(emu: Emulator, tmp_path: Path) -> None:
    import adk_actors
    from adk_actors.settings import Settings
    from adk_actors.testing import reserved_port

    from ..conftest import _started

    settings = Settings.from_dict(
        {"admin_port": reserved_port(), "data_dir": str(tmp_path), "hosts": 2, "workers": 2, "start_timeout_s": 30.0}
    )
    node = adk_actors.start(settings)  # the node composition: it runs the in-memory session store actor
    _started.append(node)
    try:
        spawn, cleanup = make_spawner(node)
        name = unique("MemoryStore")
        agent = spawn(name, config_for(emu, session_id="conv-m"))
        assert prompt(agent, "one", system=node) == "You said: one"
        stop_agent(agent, system=node)
        again = spawn(name, config_for(emu, session_id="conv-m"))
        assert prompt(again, "two", system=node) == "You said: two"
        assert len(emu.requests[-1]["body"]["contents"]) == 3
        cleanup()
    finally:
        node.stop()

"""Agent-test fixtures: the real Gemini emulator over HTTP and a spawner that stops every agent it started."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from adk_actors.agents import AgentRef, spawn_agent, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.errors import AdkError
from adk_actors.runtime.system import ActorSystemHandle

Spawner = Callable[..., AgentRef]


def unique(prefix: str) -> str:
    """An agent name that no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def emu() -> Iterator[Emulator]:
    """A fresh emulator with the built-in script (tests replace it with ``emu.set_script``)."""
    with Emulator() as emulator:
        yield emulator


def config_for(emu: Emulator, **extra: Any) -> dict[str, Any]:
    """A provider config pointing at the emulator."""
    return {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key", **extra}


def make_spawner(system: ActorSystemHandle) -> tuple[Spawner, Callable[[], None]]:
    started: list[AgentRef] = []

    def spawn(name: str, config: dict[str, Any], tools: Sequence[Any] = ()) -> AgentRef:
        ref = spawn_agent(name, config, tools, system=system)
        started.append(ref)
        return ref

    def cleanup() -> None:
        for ref in reversed(started):
            try:
                stop_agent(ref, system=system)
            except AdkError:
                pass  # already stopped by the test

    return spawn, cleanup


@pytest.fixture
def spawn(system: ActorSystemHandle) -> Iterator[Spawner]:
    """``spawn(name, config, tools)`` on the shared system; every agent is stopped after the test."""
    spawner, cleanup = make_spawner(system)
    yield spawner
    cleanup()

"""Fixtures of the trigger edge tests (SQL queue source, developer surfaces, CLI): the emulator, an agent and a
trigger factory over the shared node that unregisters every trigger it registered.

Test modules import the fixtures they use from here (``# noqa: F401``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actor_tests.agents.conftest import config_for, emu, make_spawner  # noqa: F401
from adk_actors.emulator import Emulator
from adk_actors.errors import TriggerError
from adk_actors.runner import Runner
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService

APP = "trigger_edges"
ECHO = {"rules": [{"when": {}, "respond": {"text": "Done: {user_text}"}}]}
"""The emulator script: every turn answers ``Done: <input>``."""

Register = Callable[..., str]


def unique_trigger(prefix: str = "t2") -> str:
    """A trigger name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def echo_runner(system: ActorSystemHandle, emu: Emulator) -> Iterator[Runner]:  # noqa: F811
    """A Runner over a fresh agent that answers ``Done: <input>`` (the emulator scripted with :data:`ECHO`)."""
    emu.set_script(ECHO)
    spawn, stop_all = make_spawner(system)
    agent = spawn(f"TriggerEdge_{uuid.uuid4().hex[:8]}", config_for(emu))
    yield Runner(agent, APP, ActorSessionService(system=system), system=system)
    stop_all()


@pytest.fixture
def register(system: ActorSystemHandle, echo_runner: Runner) -> Iterator[Register]:
    """``register(name=None, **options) -> name``: a trigger with :func:`echo_runner` on the shared node,
    unregistered after the test."""
    from adk_actors.triggers import register_trigger, unregister_trigger

    names: list[str] = []

    def make(name: str | None = None, runner: Any = None, **options: Any) -> str:
        name = name or unique_trigger()
        register_trigger(name, runner or echo_runner, options, system=system)
        names.append(name)
        return name

    yield make
    for name in names:
        try:
            unregister_trigger(name, system=system)
        except TriggerError:
            pass

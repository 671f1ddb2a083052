"""Trigger-test fixtures: the emulator, agent spawner and session service of the Runner tests, and a trigger
factory that unregisters every trigger it registered."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actor_tests.runner.conftest import config_for, emu, spawn, svc, unique  # noqa: F401
from adk_actors import AdkError, Runner
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.triggers import register_trigger, unregister_trigger

Register = Callable[..., str]


def text_script(text: str = "done", *, delay_ms: int = 0) -> dict[str, Any]:
    """An emulator script answering every request with ``text`` (after ``delay_ms``)."""
    respond: dict[str, Any] = {"text": text}
    if delay_ms:
        respond["delay_ms"] = delay_ms
    return {"rules": [{"respond": respond}]}


@pytest.fixture
def make_trigger(
    system: ActorSystemHandle,
    emu: Emulator,  # noqa: F811
    spawn: Any,  # noqa: F811
    svc: Any,  # noqa: F811
) -> Iterator[Register]:
    """``make_trigger(options=None, **agent_config) -> name``: an agent on the emulator, a Runner over the node's
    session service and a trigger of a fresh name; all unregistered after the test."""
    names: list[str] = []

    def make(options: Any = None, **config: Any) -> str:
        agent = unique("TrigAgent")
        spawn(agent, config_for(emu, **config))
        runner = Runner(agent, "trigger-tests", svc, system=system)
        name = unique("trig").replace("_", "-")
        register_trigger(name, runner, options, system=system)
        names.append(name)
        return name

    yield make
    for name in names:
        try:
            unregister_trigger(name, system=system, timeout=10)
        except AdkError:
            pass  # unregistered by the test

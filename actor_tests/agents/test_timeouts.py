"""Deadlines: a hanging tool is killed at agent_call_timeout; slow models hit the call and turn bounds."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from adk_actors.agents import prompt
from adk_actors.emulator import Emulator
from adk_actors.errors import AskTimeout
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.tools import FunctionTool

from .conftest import Spawner, config_for, make_spawner, unique
from .support import get_weather, hang

CALL_MS, TURN_MS = 1500, 2500


@pytest.fixture(scope="module")
def short_system(make_system: Callable[..., ActorSystemHandle]) -> ActorSystemHandle:
    return make_system(agent_call_timeout_ms=CALL_MS, agent_turn_timeout_ms=TURN_MS)


@pytest.fixture
def spawn_short(short_system: ActorSystemHandle) -> Iterator[Spawner]:
    spawner, cleanup = make_spawner(short_system)
    yield spawner
    cleanup()


def test_a_tool_that_hangs_past_its_deadline_is_reported_to_the_model_as_tool_timeout(
        short_system: ActorSystemHandle, emu: Emulator, spawn_short: Spawner) -> None:
    agent = spawn_short(unique("Hang"), config_for(emu), [FunctionTool(hang, name="get_weather")])
    answer = prompt(agent, "What is the weather in Tokyo?", system=short_system, timeout=30)
    assert "tool_timeout" in answer
    # The killed worker was replaced: the next tool call runs normally.
    healthy = spawn_short(unique("Healthy"), config_for(emu), [FunctionTool(get_weather)])
    assert "sunny" in prompt(healthy, "What is the weather in Oslo?", system=short_system, timeout=30)


def test_a_model_call_slower_than_agent_call_timeout_fails_with_agent_call_timeout(
        short_system: ActorSystemHandle, emu: Emulator, spawn_short: Spawner) -> None:
    emu.set_script({"rules": [{"when": {"user_text_equals": "slow"}, "respond": {"text": "late", "delay_ms": 5000}},
                              {"when": {}, "respond": {"text": "fast {user_text}"}}]})
    agent = spawn_short(unique("Slow"), config_for(emu))
    with pytest.raises(AskTimeout) as info:
        prompt(agent, "slow", system=short_system, timeout=30)
    assert info.value.reason == "agent_call_timeout"
    assert prompt(agent, "next", system=short_system, timeout=30) == "fast next"


def test_a_turn_whose_rounds_outlast_agent_turn_timeout_fails_with_agent_turn_timeout(
        short_system: ActorSystemHandle, emu: Emulator, spawn_short: Spawner) -> None:
    # Each model call takes 1 s (inside the 1.5 s call bound); the tool loop never ends on its own.
    emu.set_script({"rules": [{"when": {}, "respond": {"function_calls": [
        {"name": "get_weather", "args": {"city": "Tokyo"}}], "delay_ms": 1000}}]})
    agent = spawn_short(unique("Long"), config_for(emu), [FunctionTool(get_weather)])
    with pytest.raises(AskTimeout) as info:
        prompt(agent, "loop forever", system=short_system, timeout=30)
    assert info.value.reason == "agent_turn_timeout"

"""Deadlines: a hanging tool is killed at agent_call_timeout; slow models and sub-agents hit the call and turn
bounds; a caller that gives up cuts the provider call; ``infinity`` settings never become infinite timers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adk_actors.agents import prompt
from adk_actors.emulator import Emulator
from adk_actors.errors import AskTimeout, ProviderError
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SqlSessionService
from adk_actors.tools import FunctionTool

from .conftest import Spawner, config_for, make_spawner, unique
from .support import get_weather, hang, read_json_line

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
    short_system: ActorSystemHandle, emu: Emulator, spawn_short: Spawner
) -> None:
    agent = spawn_short(unique("Hang"), config_for(emu), [FunctionTool(hang, name="get_weather")])
    killed = short_system.ask("workers", GetStatus())["killed"]
    answer = prompt(agent, "What is the weather in Tokyo?", system=short_system, timeout=30)
    assert "tool_timeout" in answer
    assert short_system.ask("workers", GetStatus())["killed"] == killed + 1  # the hung worker process was killed
    # The killed worker was replaced: the next tool call runs normally.
    healthy = spawn_short(unique("Healthy"), config_for(emu), [FunctionTool(get_weather)])
    assert "sunny" in prompt(healthy, "What is the weather in Oslo?", system=short_system, timeout=30)


def test_a_model_call_slower_than_agent_call_timeout_fails_with_agent_call_timeout(
    short_system: ActorSystemHandle, emu: Emulator, spawn_short: Spawner
) -> None:
    emu.set_script(
        {
            "rules": [
                {"when": {"user_text_equals": "slow"}, "respond": {"text": "late", "delay_ms": 5000}},
                {"when": {}, "respond": {"text": "fast {user_text}"}},
            ]
        }
    )
    agent = spawn_short(unique("Slow"), config_for(emu))
    with pytest.raises(AskTimeout) as info:
        prompt(agent, "slow", system=short_system, timeout=30)
    assert info.value.reason == "agent_call_timeout"
    assert prompt(agent, "next", system=short_system, timeout=30) == "fast next"


# A turn whose tool rounds outlast agent_turn_timeout fails with agent_turn_timeout at its next step: pure engine
# logic, tested with a fake clock in test_turn_engine.py
# (test_a_turn_past_its_deadline_fails_with_agent_turn_timeout_at_its_next_step); the tests here prove the wiring
# (the actor enforces each effect's deadline).


def test_a_sub_agent_call_slower_than_agent_call_timeout_reaches_the_model_as_agent_call_timeout(
    short_system: ActorSystemHandle, emu: Emulator, spawn_short: Spawner
) -> None:
    # The child's every step is inside the 1.5 s call bound (two 1 s model calls), the whole child call is not.
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"system_text_contains": "Slow child", "has_function_response": False},
                    "respond": {
                        "function_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}],
                        "delay_ms": 1000,
                    },
                },
                {"when": {"system_text_contains": "Slow child"}, "respond": {"text": "child done", "delay_ms": 1000}},
                {
                    "when": {"has_function_response": False, "tool_declared": "SlowChild*"},
                    "respond": {"function_calls": [{"name": "{tool}", "args": {"prompt": "{user_text}"}}]},
                },
                {"when": {}, "respond": {"text": "parent got {response_text}"}},
            ]
        }
    )
    child = unique("SlowChild")
    spawn_short(child, config_for(emu, instructions="Slow child."), [FunctionTool(get_weather)])
    parent = spawn_short(unique("Parent"), config_for(emu, sub_agents=[child]))
    answer = prompt(parent, "delegate this", system=short_system, timeout=30)
    assert answer.startswith("parent got ") and "agent_call_timeout" in answer and "child done" not in answer


# ---- infinity -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def endless_system(make_system: Callable[..., ActorSystemHandle]) -> ActorSystemHandle:
    """``infinity`` call and turn bounds, and one I/O thread per host (so a provider call that is not cut off
    when its caller gives up blocks the next one)."""
    return make_system(agent_call_timeout_ms="infinity", agent_turn_timeout_ms="infinity", host_io_threads=1)


@pytest.fixture
def spawn_endless(endless_system: ActorSystemHandle) -> Iterator[Spawner]:
    spawner, cleanup = make_spawner(endless_system)
    yield spawner
    cleanup()


def _child(system: ActorSystemHandle, child_id: str) -> dict[str, Any]:
    """A child of the root supervisor as the tree reports it (pid, restart count, status)."""
    child: dict[str, Any] = next(c for c in system.tree()["children"] if c["id"] == child_id)
    return child


def _host_restarts(system: ActorSystemHandle) -> list[tuple[int, int]]:
    return [(h["pid"], h["restarts"]) for h in _child(system, "hosts")["status"]["children"]]


def test_with_infinite_bounds_failed_turns_run_the_error_hook_and_the_worker_pool_is_not_restarted(
    endless_system: ActorSystemHandle, emu: Emulator, spawn_endless: Spawner, tmp_path: Path
) -> None:
    fifo = tmp_path / "errors.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    keep_open = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # no end-of-file between the hooks' writes
    pool, hosts = _child(endless_system, "workers"), _host_restarts(endless_system)
    try:
        emu.set_script({"rules": [{"when": {}, "respond": {"fault": {"status": 500}}}]})
        agent = spawn_endless(
            unique("Failing"),
            config_for(
                emu,
                callbacks=["actor_tests.agents.callbacks_for_tests:ErrorWatch"],
                callback_config={"fifo": str(fifo)},
            ),
        )
        for i in range(3):
            with pytest.raises(ProviderError) as info:
                prompt(agent, f"hi {i}", system=endless_system, timeout=30)
            line = read_json_line(reader)
            assert line["error"]["reason"] == info.value.reason == "internal"
    finally:
        os.close(keep_open)
        os.close(reader)
    after = _child(endless_system, "workers")
    assert (after["pid"], after["restarts"]) == (pool["pid"], pool["restarts"])
    assert after["status"]["completed"] >= pool["status"]["completed"] + 3  # each hook job finished in the pool
    assert _host_restarts(endless_system) == hosts


def test_with_infinite_bounds_the_session_id_conversation_is_saved_and_the_host_lives_on(
    endless_system: ActorSystemHandle, emu: Emulator, spawn_endless: Spawner, tmp_path: Path
) -> None:
    store = SqlSessionService(f"sqlite:///{tmp_path / 'sessions.db'}").open()
    hosts = _host_restarts(endless_system)
    agent = spawn_endless(unique("Saved"), config_for(emu, session_id="conv-inf", session_service=store))
    assert prompt(agent, "one", system=endless_system, timeout=30) == "You said: one"
    assert prompt(agent, "two", system=endless_system, timeout=30) == "You said: two"
    assert len(emu.requests[-1]["body"]["contents"]) == 3
    assert _host_restarts(endless_system) == hosts


def test_a_provider_call_is_cut_off_when_the_prompts_timeout_passes(
    endless_system: ActorSystemHandle, emu: Emulator, spawn_endless: Spawner
) -> None:
    emu.set_script(
        {
            "rules": [
                {"when": {"user_text_equals": "slow"}, "respond": {"text": "late", "delay_ms": 30000}},
                {"when": {}, "respond": {"text": "fast {user_text}"}},
            ]
        }
    )
    agent = spawn_endless(unique("Impatient"), config_for(emu))
    with pytest.raises(AskTimeout):
        prompt(agent, "slow", system=endless_system, timeout=1.5)
    # The agent's host has one I/O thread: the next model call runs only once the first one's socket is cut.
    assert prompt(agent, "next", system=endless_system, timeout=10) == "fast next"
    assert [r["body"]["contents"][-1]["parts"][0]["text"] for r in emu.requests] == ["slow", "next"]

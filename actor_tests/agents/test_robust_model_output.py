"""Hostile model output through agents: a turn error, never an agent crash, and never a neighbour's failure.

The model is the real emulator over HTTP on 127.0.0.1, scripted to answer a 12 MiB text or a function call whose
arguments hold a NUL character, while other invocations of the same agent are in flight.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from adk_actors import Runner
from adk_actors.agents import invoke, prompt
from adk_actors.emulator import Emulator
from adk_actors.errors import ConfigError, ProviderError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.tools import FunctionTool

from .conftest import Spawner, config_for, unique
from .support import get_weather

BIG = "x" * (12 * 1024 * 1024)
RULES = [
    {"when": {"user_text_equals": "big"}, "respond": {"text": BIG}},
    {
        "when": {"user_text_equals": "nul", "has_function_response": False},
        "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Tok\u0000yo"}}]},
    },
    {"when": {"user_text_equals": "slow"}, "respond": {"text": "slow answer", "delay_ms": 1500}},
]


def _inner_entry(system: ActorSystemHandle, name: str) -> dict[str, Any] | None:
    hosts = next(c for c in system.tree()["children"] if c["id"] == "hosts")
    for host in hosts["status"]["children"]:
        for entry in host["status"].get("inner", []):
            if entry.get("register_as") == name:
                return entry
    return None


@pytest.mark.parametrize("bad", ["big", "nul"])
@pytest.mark.parametrize("surface", ["runner", "invoke"])
def test_hostile_model_output_fails_the_turn_not_the_agent_or_its_neighbours(
    system: ActorSystemHandle, spawn: Spawner, surface: str, bad: str
) -> None:
    name = unique("robust")
    with Emulator(script={"rules": RULES}) as emu:
        agent = spawn(name, config_for(emu), [FunctionTool(get_weather)])
        runner = Runner(agent, "robust_app", ActorSessionService(system=system), system=system)

        def run(session: str, text: str) -> Any:
            if surface == "runner":
                return runner.run("u", session, text)
            return invoke(
                agent, text, scope={"app_name": "robust_app", "user_id": "u", "session_id": session}, system=system
            )

        with ThreadPoolExecutor(5) as pool:
            neighbours = [pool.submit(run, f"n{i}", "slow") for i in range(4)]
            with pytest.raises(ProviderError) as info:
                run("victim", bad)
            assert [f.result(timeout=60) for f in neighbours] == ["slow answer"] * 4
    assert info.value.reason == "invalid_model_output"
    entry = _inner_entry(system, name)
    assert entry is not None and entry["state"] == "running" and entry["restarts"] == 0


def test_an_oversize_answer_does_not_poison_a_prompt_conversation(system: ActorSystemHandle, spawn: Spawner) -> None:
    with Emulator(script={"rules": RULES}) as emu:
        agent = spawn(unique("robust_prompt"), config_for(emu))
        with pytest.raises(ProviderError) as info:
            prompt(agent, "big", system=system)
        assert info.value.reason == "invalid_model_output"
        assert prompt(agent, "hello", system=system) == "You said: hello"


def test_a_run_timeout_past_any_deadline_is_a_config_error(system: ActorSystemHandle, spawn: Spawner) -> None:
    with Emulator() as emu:
        agent = spawn(unique("robust_timeout"), config_for(emu))
        with pytest.raises(ConfigError) as info:
            Runner(agent, "robust_app", ActorSessionService(system=system), system=system, run_timeout=10**5000)
        assert info.value.reason == "invalid_value" and info.value.details["key"] == "run_timeout"
        runner = Runner(
            agent, "robust_app", ActorSessionService(system=system), system=system, run_timeout=365 * 86400 * 1000
        )
        assert runner.run("u", "s-long", "hi") == "You said: hi"

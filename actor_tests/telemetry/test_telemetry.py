"""Telemetry: agent prompt/model/tool events reach a subscriber in another process, structural only."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from adk_actors import telemetry
from adk_actors.agents import prompt, spawn_agent, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.errors import ProviderError
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.tools import FunctionTool


def get_weather(city: str) -> dict[str, str]:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    return {"city": city, "forecast": "sunny"}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


def test_a_prompt_emits_start_model_tool_and_stop_events_to_a_subscriber(
    system: ActorSystemHandle, emu: Emulator
) -> None:
    agent = spawn_agent(
        "TelemetryAgent",
        {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"},
        [FunctionTool(get_weather)],
        system=system,
    )
    try:
        with telemetry.attach("agent.", system=system) as sub:
            answer = prompt(agent, "What is the weather in Tokyo?", timeout=30, system=system)
            events = list(sub.until("agent.prompt.stop", timeout=10))
        names = [e.name for e in events]
        assert names[0] == "agent.prompt.start" and names[-1] == "agent.prompt.stop"
        assert names.count("agent.model.start") == names.count("agent.model.stop") == 2  # call, then answer
        assert "agent.tool.start" in names and "agent.tool.stop" in names
        stop = events[-1]
        assert stop.metadata["agent"] == "TelemetryAgent" and stop.measurements["duration_ms"] > 0
        tool_stop = next(e for e in events if e.name == "agent.tool.stop")
        assert tool_stop.metadata["tool"] == "get_weather" and tool_stop.metadata["outcome"] == "ok"
        blob = json.dumps([{"m": e.metadata, "x": e.measurements} for e in events])
        assert "Tokyo" not in blob and "sunny" not in blob and answer not in blob  # no content, no arguments
    finally:
        stop_agent(agent, system=system)


def test_a_failing_prompt_emits_an_exception_event(system: ActorSystemHandle, emu: Emulator) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"fault": {"status": 400}}}]})
    agent = spawn_agent(
        "TelemetryFailing", {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}, system=system
    )
    try:
        with telemetry.attach("agent.prompt.", system=system) as sub:
            with pytest.raises(ProviderError) as info:
                prompt(agent, "hi", timeout=30, system=system)
            events = list(sub.until("agent.prompt.exception", timeout=10))
        assert events[-1].metadata["reason"] == info.value.reason
        assert events[-1].metadata["agent"] == "TelemetryFailing"
    finally:
        stop_agent(agent, system=system)


def test_subscribers_in_another_process_receive_events(system: ActorSystemHandle, emu: Emulator) -> None:
    code = (
        f"from adk_actors.runtime.system import attach\n"
        f"from adk_actors.settings import Settings\n"
        f"from adk_actors import telemetry\n"
        f"h = attach({system.port}, Settings(hosts={system.settings.hosts}), make_default=False)\n"
        f"with telemetry.attach('agent.prompt.stop', system=h) as sub:\n"
        f"    print('attached', flush=True)\n"
        f"    e = sub.next(30)\n"
        f"    print(e.name, e.metadata['agent'], flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    agent = spawn_agent(
        "TelemetryRemote", {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}, system=system
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "attached"
        prompt(agent, "hello", timeout=30, system=system)
        assert proc.stdout.readline().strip() == "agent.prompt.stop TelemetryRemote"
        assert proc.wait(20) == 0
        assert system.ask("telemetry", GetStatus())["delivered"] >= 1
    finally:
        stop_agent(agent, system=system)
        if proc.poll() is None:
            proc.kill()
            proc.wait()

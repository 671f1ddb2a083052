"""Sub-agents and AgentTool: advertised as functions, resolved by registered name at call time, tree checks."""

from __future__ import annotations

import json
import os
import signal

import pytest

from adk_actors.agents import AgentTool, agent_history, describe_agent, prompt, spawn_agent, stop_agent
from adk_actors.agents.api import local_id
from adk_actors.agents.messages import Invoke
from adk_actors.agents.spec import MAX_TREE_DEPTH
from adk_actors.emulator import Emulator
from adk_actors.errors import AgentError
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import host_name, place
from adk_actors.runtime.system import ActorSystemHandle

from .conftest import Spawner, config_for, make_spawner, unique
from .support import DELEGATION_RULES

SCRIPT = {"rules": [*DELEGATION_RULES, {"when": {}, "respond": {"text": "You said: {user_text}"}}]}


def _pair(emu: Emulator, spawn: Spawner, specialist: str, coordinator: str) -> None:
    spawn(specialist, config_for(emu, instructions="Research the requested Erlang topic."))
    spawn(
        coordinator,
        config_for(
            emu,
            global_instruction="You are part of the Erlang documentation team.",
            instructions="Delegate research tasks to the specialist.",
            sub_agents={specialist: {"agent": specialist, "description": "Researches Erlang and OTP topics"}},
        ),
    )


def test_a_coordinator_calls_its_sub_agent_as_a_function(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(SCRIPT)
    specialist, coordinator = unique("SearchSpecialist"), unique("Coordinator")
    _pair(emu, spawn, specialist, coordinator)
    answer = prompt(coordinator, "Research supervision trees.", system=system, timeout=30)
    assert answer == "Coordinator summary: Research notes on Research supervision trees."
    declaration = emu.requests[0]["body"]["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == specialist and declaration["description"] == "Researches Erlang and OTP topics"
    system_text = json.dumps(emu.requests[0]["body"]["systemInstruction"])
    assert "documentation team" in system_text
    # The child ran with fresh history, its own instructions and the root's global instruction; the conversation
    # stayed with the parent.
    child_request = emu.requests[1]["body"]
    assert len(child_request["contents"]) == 1
    assert "documentation team" in json.dumps(child_request["systemInstruction"])
    assert "Research the requested" in json.dumps(child_request["systemInstruction"])
    assert agent_history(specialist, system=system) == []
    assert describe_agent(coordinator, system=system)["sub_agents"] == [specialist]


def test_agent_tool_invokes_its_agent_from_a_model_and_directly(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(SCRIPT)
    specialist = unique("SearchSpecialist")
    spawn(specialist, config_for(emu, instructions="Research the requested Erlang topic."))
    tool = AgentTool(specialist, description="Researches Erlang and OTP topics")
    user = spawn(unique("ToolUser"), config_for(emu, instructions="Delegate research tasks."), [tool])
    assert (
        prompt(user, "rest_for_one", system=system, timeout=30) == "Coordinator summary: Research notes on rest_for_one"
    )


def test_agent_tool_execute_works_outside_an_agent(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    emu.set_script(SCRIPT)
    specialist = unique("SearchSpecialist")
    spawn(specialist, config_for(emu, instructions="Research the requested Erlang topic."))
    import adk_actors.agents.api as api

    monkeypatch.setattr(api, "current_system", lambda: system)
    assert (
        AgentTool(specialist).execute({"prompt": "Explain rest_for_one."}) == "Research notes on Explain rest_for_one."
    )


def test_delegation_cycles_are_rejected_at_invocation_time(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False, "tool_declared": "Cyc*"},
                    "respond": {"function_calls": [{"name": "{tool}", "args": {"prompt": "{user_text}"}}]},
                },
                {"when": {"has_function_response": True}, "respond": {"text": "got {response_text}"}},
            ]
        }
    )
    a, b = unique("CycA"), unique("CycB")
    spawn(b, config_for(emu), [AgentTool(a)])
    spawn(a, config_for(emu), [AgentTool(b)])
    answer = prompt(a, "loop", system=system, timeout=30)
    assert "agent_cycle" in answer  # B's call back into A was refused; both agents answered


def test_invocation_time_depth_64_runs_and_depth_65_is_refused_before_the_provider(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    # What a delegating agent sends: the ancestry of an agent at depth 64 names 64 agents, root first.
    agent = spawn(unique("Deep"), config_for(emu))
    ancestry = tuple(f"Level{i}" for i in range(MAX_TREE_DEPTH))
    assert system.ask(agent.ref, Invoke(input="deep", ancestry=ancestry), 30) == "You said: deep"
    before = len(emu.requests)
    with pytest.raises(AgentError) as info:
        system.ask(agent.ref, Invoke(input="deeper", ancestry=(*ancestry, "Level64")), 30)
    assert info.value.reason == "tree_too_deep" and len(emu.requests) == before


def test_spawn_rejects_an_unresponsive_tree_and_duplicate_ownership(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    with pytest.raises(AgentError) as info:
        spawn_agent(unique("Orphan"), config_for(emu, sub_agents=[unique("NotSpawned")]), system=system)
    assert info.value.reason == "tree_unresponsive"
    leaf, middle = unique("Leaf"), unique("Middle")
    spawn(leaf, config_for(emu))
    spawn(middle, config_for(emu, sub_agents=[leaf]))
    with pytest.raises(AgentError) as info:
        spawn_agent(unique("Top"), config_for(emu, sub_agents=[middle, leaf]), system=system)
    assert info.value.reason == "duplicate_ownership"
    spawn(unique("Top"), config_for(emu, sub_agents=[middle]))


def _names_on_different_hosts(system: ActorSystemHandle) -> tuple[str, str]:
    hosts = system.settings.hosts
    while True:
        specialist, coordinator = unique("SearchSpecialist"), unique("Coordinator")
        if place(local_id(specialist), hosts) != place(local_id(coordinator), hosts):
            return specialist, coordinator


def test_a_sub_agent_whose_host_is_sigkilled_is_found_again_after_its_restart(
    fresh_system: ActorSystemHandle, emu: Emulator
) -> None:
    emu.set_script(SCRIPT)
    spawn, cleanup = make_spawner(fresh_system)
    try:
        specialist, coordinator = _names_on_different_hosts(fresh_system)
        _pair(emu, spawn, specialist, coordinator)
        assert "Research notes" in prompt(coordinator, "first question", system=fresh_system, timeout=30)
        host = host_name(place(local_id(specialist), fresh_system.settings.hosts))
        pid = fresh_system.ask(host, GetStatus())["pid"]
        os.kill(pid, signal.SIGKILL)
        answer = prompt(coordinator, "second question", system=fresh_system, timeout=30)
        assert answer == "Coordinator summary: Research notes on second question"
        assert fresh_system.ask(host, GetStatus())["pid"] != pid
        assert len(agent_history(coordinator, system=fresh_system)) == 8  # the conversation survived
    finally:
        cleanup()


def test_a_stopped_and_respawned_sub_agent_is_resolved_by_name(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(SCRIPT)
    specialist, coordinator = unique("SearchSpecialist"), unique("Coordinator")
    _pair(emu, spawn, specialist, coordinator)
    assert "Research notes" in prompt(coordinator, "first", system=system, timeout=30)
    stop_agent(specialist, system=system)
    spawn(specialist, config_for(emu, instructions="Research the requested Erlang topic."))
    assert prompt(coordinator, "second", system=system, timeout=30) == "Coordinator summary: Research notes on second"

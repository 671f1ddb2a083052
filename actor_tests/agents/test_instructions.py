"""Instruction templates from scoped state, and the root's global instruction across delegation."""

from __future__ import annotations

import json

import pytest

from adk_actors.agents import build_spec, invoke, prompt
from adk_actors.agents.instructions import check_template, render_template, template_keys
from adk_actors.emulator import Emulator
from adk_actors.errors import AgentError, ConfigError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.tools import FunctionTool

from .conftest import Spawner, config_for, unique
from .support import failing_provider, greeting_provider, team_provider, whoami

BASE = {"provider": "gemini", "api_key": "k", "base_url": "http://127.0.0.1:9"}


def test_placeholders_are_found_and_json_examples_are_left_alone() -> None:
    text = 'Hi {user:name} from {app:release}, step {step}; reply like {"a": 1} or { x }.'
    assert template_keys(text) == ["user:name", "app:release", "step"]
    state = {"user:name": "Ada", "app:release": "0.3", "step": {"n": 2}}
    assert render_template(text, state) == 'Hi Ada from 0.3, step {"n":2}; reply like {"a": 1} or { x }.'


def test_a_missing_key_fails_with_its_name_only() -> None:
    with pytest.raises(AgentError) as info:
        render_template("Hello {user:name}", {"other": "secret value"})
    assert info.value.reason == "missing_state_key" and info.value.details == {"key": "user:name"}
    assert "secret value" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{api_key}", "secret_state_key"),
        ("{user:token}", "secret_state_key"),
        ("{app:client_secret}", "secret_state_key"),
        ("see {artifact.reports/../x.txt}", "invalid_artifact_placeholder"),
    ],
)
def test_secret_like_keys_and_invalid_artifact_placeholders_are_rejected_at_spawn(text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_template(text, "instructions")
    assert info.value.reason == reason
    with pytest.raises(ConfigError) as info:
        build_spec("A", {**BASE, "global_instruction": text})
    assert info.value.reason == reason and info.value.details["key"] == "global_instruction"


def _system_text(request: dict) -> str:
    return json.dumps(request["body"].get("systemInstruction", {}))


def test_instructions_are_rendered_from_the_invocation_state(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    agent = spawn(unique("Templated"), config_for(emu, instructions="Answer {user:name} concisely."))
    assert invoke(agent, "hi", state={"user:name": "Ada"}, system=system) == "You said: hi"
    assert "Answer Ada concisely." in _system_text(emu.requests[-1])
    with pytest.raises(AgentError) as info:
        prompt(agent, "hi", system=system)  # the compatibility conversation has no scoped state
    assert info.value.reason == "missing_state_key"


def test_the_root_global_instruction_and_state_cross_delegation_and_the_childs_own_global_is_ignored(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(
        {
            "rules": [
                {
                    "when": {
                        "system_text_contains": "Coordinate",
                        "has_function_response": False,
                        "tool_declared": "Child*",
                    },
                    "respond": {"function_calls": [{"name": "{tool}", "args": {"prompt": "{user_text}"}}]},
                },
                {"when": {"has_function_response": True}, "respond": {"text": "done: {response_text}"}},
                {"when": {}, "respond": {"text": "child: {user_text}"}},
            ]
        }
    )
    child = unique("Child")
    spawn(child, config_for(emu, global_instruction="CHILD-GLOBAL", instructions="Help {user:name}."))
    root = spawn(
        unique("Root"),
        config_for(emu, global_instruction="Team of {app:team}.", instructions="Coordinate.", sub_agents=[child]),
    )
    assert invoke(root, "task", state={"user:name": "Ada", "app:team": "OTP"}, system=system) == "done: child: task"
    child_request = next(r for r in emu.requests if "Help Ada." in _system_text(r))
    assert "Team of OTP." in _system_text(child_request) and "CHILD-GLOBAL" not in _system_text(child_request)
    # Invoked on its own, the child is a root again and uses its own global instruction.
    invoke(child, "alone", state={"user:name": "Bo"}, system=system)
    assert "CHILD-GLOBAL" in _system_text(emu.requests[-1])


def test_tools_see_the_invocation_scope_and_state(system: ActorSystemHandle, emu: Emulator, spawn: Spawner) -> None:
    agent = spawn(unique("Scoped"), config_for(emu), [FunctionTool(whoami, name="get_weather")])
    answer = invoke(
        agent,
        "What is the weather in Oslo?",
        scope={"app_name": "a", "user_id": "u", "session_id": "s"},
        state={"user:name": "Ada"},
        system=system,
        timeout=30,
    )
    assert answer == "The weather in Oslo is agent_is_set: True, city: Oslo, session: s, user: Ada."


def test_dynamic_instruction_providers_run_in_workers_with_the_scope(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    name = unique("Dynamic")
    agent = spawn(name, config_for(emu, instructions=greeting_provider))
    invoke(agent, "hi", state={"user:name": "Ada", "api_key": "SECRET"}, system=system)
    assert f"Greet Ada on behalf of {name}." in _system_text(emu.requests[-1])
    broken = spawn(unique("Broken"), config_for(emu, instructions=failing_provider))
    with pytest.raises(AgentError) as info:
        invoke(broken, "hi", system=system)
    assert info.value.reason == "instruction_provider_failed"
    assert info.value.details == {"key": "instructions", "type": "KeyError"}
    odd = spawn(unique("Odd"), config_for(emu, instructions=lambda scope: 42))
    with pytest.raises(AgentError) as info:
        invoke(odd, "hi", system=system)
    assert info.value.reason == "invalid_instruction"


def test_a_dynamic_root_global_instruction_is_resolved_for_each_delegated_agent(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(
        {
            "rules": [
                {
                    "when": {
                        "system_text_contains": "Coordinate",
                        "has_function_response": False,
                        "tool_declared": "Kid*",
                    },
                    "respond": {"function_calls": [{"name": "{tool}", "args": {"prompt": "{user_text}"}}]},
                },
                {"when": {"has_function_response": True}, "respond": {"text": "done: {response_text}"}},
                {"when": {}, "respond": {"text": "child: {user_text}"}},
            ]
        }
    )
    child = unique("Kid")
    spawn(child, config_for(emu, instructions="Help."))
    root = spawn(
        unique("Root"),
        config_for(emu, global_instruction=team_provider, instructions="Coordinate.", sub_agents=[child]),
    )
    assert (
        invoke(root, "task", scope={"session_id": "s-7", "app_name": "a", "user_id": "u"}, system=system)
        == "done: child: task"
    )
    texts = [_system_text(r) for r in emu.requests]
    assert all("Team root for s-7." in t for t in texts) and len(texts) == 3

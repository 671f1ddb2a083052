"""The ``Agent`` value (google-adk's vocabulary over the dict config): validated at construction by ``build_spec``,
spawned by ``spawn_agent`` (sub-agent values first, rolled back on failure) and by ``Runner`` when not running."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from adk_actors import Agent, Runner, prompt, spawn_agent, stop_agent
from adk_actors.agents import build_spec, describe_agent
from adk_actors.emulator import Emulator
from adk_actors.errors import AdkError, AgentError, ConfigError, SchemaError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.tools import FunctionTool

from .conftest import unique
from .support import DELEGATION_RULES, get_weather

PROVIDER = {"provider": "gemini", "api_key": "test-key-SECRET", "base_url": "http://127.0.0.1:9"}
SCRIPT = {"rules": [*DELEGATION_RULES, {"when": {}, "respond": {"text": "You said: {user_text}"}}]}


def _provider(emu: Emulator) -> dict[str, Any]:
    return {"api_key": "test-key", "base_url": emu.base_url}


def _stop(system: ActorSystemHandle, *names: str) -> None:
    for name in names:
        try:
            stop_agent(name, system=system)
        except AdkError:
            pass  # never started, or stopped by the test


# ---- the value ----------------------------------------------------------------------------------------------------


def test_the_value_is_the_dict_config_in_google_adks_vocabulary() -> None:
    helper = Agent(name="Helper", description="Answers questions.", instruction="Be concise.")
    agent = Agent(
        name="Root",
        model="gemini-3.1-flash-lite",
        instruction="Route {topic?}.",
        global_instruction="You are a team.",
        description="The root.",
        tools=[FunctionTool(get_weather)],
        sub_agents=[helper, "Other"],
        output_key="answer",
        input_schema={"type": "object"},
        generate_content_config={"temperature": 0.2},
        include_contents="none",
        provider_config=PROVIDER,
    )
    assert agent.config() == {
        **PROVIDER,
        "model": "gemini-3.1-flash-lite",
        "instructions": "Route {topic?}.",
        "global_instruction": "You are a team.",
        "description": "The root.",
        "output_key": "answer",
        "input_schema": {"type": "object"},
        "generation_config": {"temperature": 0.2},
        "history_policy": "exclude",
        "sub_agents": {"Helper": {"agent": "Helper", "description": "Answers questions."}, "Other": {"agent": "Other"}},
    }
    assert isinstance(agent.tools, tuple) and isinstance(agent.sub_agents, tuple)
    # The same spec as the dict config gives (the one validator).
    assert (
        build_spec("Root", agent.config(), agent.tools).sub_agents
        == build_spec(
            "Root",
            {
                **PROVIDER,
                "sub_agents": {"Helper": {"agent": "Helper", "description": "Answers questions."}, "Other": "Other"},
            },
        ).sub_agents
    )
    assert Agent(name="A", sub_agents=["B", "C"]).config() == {"sub_agents": ["B", "C"]}


def test_the_value_is_frozen_picklable_and_hides_the_provider_settings() -> None:
    agent = Agent(
        name="Frozen", generate_content_config={"temperature": 0.5, "stop_sequences": ["x"]}, provider_config=PROVIDER
    )
    with pytest.raises(AttributeError):
        agent.name = "Other"  # type: ignore[misc]
    assert agent.generate_content_config is not None
    with pytest.raises(TypeError):
        agent.generate_content_config["temperature"] = 1.0  # type: ignore[index]
    assert pickle.loads(pickle.dumps(agent)) == agent
    assert "SECRET" not in repr(agent) and "provider_config" not in repr(agent)
    assert agent.config()["generation_config"] == {"temperature": 0.5, "stop_sequences": ["x"]}
    agent.config()["generation_config"]["temperature"] = 2.0  # a fresh copy each time
    assert agent.config()["generation_config"]["temperature"] == 0.5


@pytest.mark.parametrize(
    ("fields", "error", "reason", "key"),
    [
        ({"instruction": 3}, ConfigError, "invalid_value", "instruction"),
        (
            {"generate_content_config": {"temprature": 1}},
            ConfigError,
            "unknown_key",
            "generate_content_config.temprature",
        ),
        (
            {"generate_content_config": {"temperature": "hot"}},
            ConfigError,
            "invalid_value",
            "generate_content_config.temperature",
        ),
        ({"provider_config": {"api_kye": "k"}}, ConfigError, "unknown_key", "provider_config.api_kye"),
        ({"provider_config": {"base_url": 4}}, ConfigError, "invalid_value", "provider_config.base_url"),
        ({"provider_config": {"instructions": "x"}}, ConfigError, "misplaced_key", "provider_config.instructions"),
        ({"provider_config": {"session_id": "s"}}, ConfigError, "misplaced_key", "provider_config.session_id"),
        ({"include_contents": "all"}, ConfigError, "invalid_value", "include_contents"),
        ({"tools": "get_weather"}, ConfigError, "invalid_value", "tools"),
        ({"sub_agents": [5]}, ConfigError, "invalid_value", "sub_agents"),
        ({"output_key": ""}, ConfigError, "invalid_value", "output_key"),
        ({"output_schema": {"type": "nope"}}, SchemaError, "invalid_schema", "output_schema"),
        ({"description": 3}, ConfigError, "invalid_value", "description"),
    ],
)
def test_bad_fields_fail_at_construction_naming_the_field(
    fields: dict[str, Any], error: type[AdkError], reason: str, key: str
) -> None:
    with pytest.raises(error) as info:
        Agent(name="Bad", **fields)
    assert info.value.reason == reason and info.value.details["key"] == key


def test_a_misplaced_provider_key_names_the_field_to_use() -> None:
    with pytest.raises(ConfigError) as info:
        Agent(name="Bad", provider_config={"generation_config": {}})
    assert info.value.details == {"key": "provider_config.generation_config", "use": "generate_content_config"}


def test_the_tree_of_values_is_checked_at_construction() -> None:
    helper = Agent(name="Helper")
    with pytest.raises(AgentError) as info:
        Agent(name="Root", sub_agents=[Agent(name="Mid", sub_agents=[helper]), helper])
    assert info.value.reason == "duplicate_ownership" and info.value.details["name"] == "Helper"
    with pytest.raises(AgentError) as info:
        Agent(name="Root", sub_agents=[Agent(name="Mid", sub_agents=["Root"])])
    assert info.value.reason == "agent_cycle"
    with pytest.raises(AgentError) as info:
        Agent(name="Root", sub_agents=[Agent(name="Root")])
    assert info.value.reason == "self_reference"
    with pytest.raises(AgentError) as info:
        Agent(name="user")
    assert info.value.reason == "reserved_agent_name"


_names = st.one_of(st.sampled_from(["A", "_b", "Agent1", "user", "", "1x", "a-b", "x" * 65]), st.text(max_size=8))
_fields = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(st.none(), st.sampled_from(["gemini-3.1-flash-lite", "bad model", ""]), st.integers()),
        "instruction": st.one_of(st.none(), st.text(max_size=20), st.integers()),
        "description": st.one_of(st.text(max_size=10), st.integers()),
        "output_key": st.one_of(st.none(), st.text(max_size=5), st.integers()),
        "generate_content_config": st.one_of(
            st.none(),
            st.dictionaries(
                st.sampled_from(["temperature", "top_k", "seed", "bogus"]),
                st.one_of(st.integers(-3, 3), st.floats(-1, 3, allow_nan=False), st.text(max_size=3)),
                max_size=3,
            ),
        ),
        "output_schema": st.one_of(st.none(), st.sampled_from([{"type": "object"}, {"type": "nope"}, True, 3])),
        "sub_agents": st.lists(st.sampled_from(["Sub1", "Sub2", "user", "1x"]), max_size=3),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(name="A", fields={"description": 0})  # a falsy non-str description once skipped the value's check
@example(name="A", fields={"description": 0, "sub_agents": ["user"]})
@given(name=_names, fields=_fields)
def test_a_value_is_valid_exactly_when_its_dict_config_is(name: str, fields: dict[str, Any]) -> None:
    """One validator: the value fails with the error (type and reason) build_spec gives its dict config."""
    try:
        agent = Agent(name=name, provider_config=PROVIDER, **fields)
    except AdkError as err:
        expected: AdkError | None = err
    else:
        expected = None
        assert build_spec(name, agent.config(), agent.tools).name == name
    config = {
        **PROVIDER,
        **{
            {"instruction": "instructions", "generate_content_config": "generation_config"}.get(k, k): v
            for k, v in fields.items()
            if v is not None
        },
    }
    try:
        build_spec(name, config)
        if not config.get("sub_agents") or len(set(config["sub_agents"])) == len(config["sub_agents"]):
            assert expected is None, expected
    except AdkError as err:
        assert expected is not None, err
        assert (type(expected), expected.reason) == (type(err), err.reason)


# ---- spawn_agent and Runner ----------------------------------------------------------------------------------------


def test_spawn_agent_spawns_the_sub_agent_values_first_and_routes_by_their_description(
    system: ActorSystemHandle, emu: Emulator
) -> None:
    emu.set_script(SCRIPT)
    specialist, coordinator = unique("SearchSpecialist"), unique("Coordinator")
    try:
        helper = Agent(
            name=specialist,
            description="Researches Erlang and OTP topics",
            instruction="Research the requested Erlang topic.",
            provider_config=_provider(emu),
        )
        root = Agent(
            name=coordinator,
            instruction="Delegate research tasks to the specialist.",
            sub_agents=[helper],
            provider_config=_provider(emu),
        )
        ref = spawn_agent(root, system=system)
        assert ref.name == coordinator
        assert describe_agent(specialist, system=system)["sub_agents"] == []
        assert describe_agent(root, system=system)["sub_agents"] == [specialist]
        answer = prompt(root, "Research supervision trees.", system=system, timeout=30)
        assert answer == "Coordinator summary: Research notes on Research supervision trees."
        declaration = emu.requests[0]["body"]["tools"][0]["functionDeclarations"][0]
        assert declaration == {**declaration, "name": specialist, "description": "Researches Erlang and OTP topics"}
    finally:
        _stop(system, coordinator, specialist)


def test_a_failed_spawn_of_a_tree_stops_the_agents_it_started(system: ActorSystemHandle, emu: Emulator) -> None:
    first, second, root = unique("First"), unique("Second"), unique("Root")
    try:
        spawn_agent(second, _provider(emu), system=system)  # already running: the tree's second spawn fails
        tree = Agent(
            name=root,
            sub_agents=[
                Agent(name=first, provider_config=_provider(emu)),
                Agent(name=second, provider_config=_provider(emu)),
            ],
            provider_config=_provider(emu),
        )
        with pytest.raises(AgentError) as info:
            spawn_agent(tree, system=system)
        assert info.value.reason == "already_started" and info.value.details["name"] == second
        with pytest.raises(AgentError) as stopped:
            stop_agent(first, system=system)  # rolled back: no longer running
        assert stopped.value.reason == "not_found"
        assert describe_agent(second, system=system)["name"] == second  # not ours to stop
    finally:
        _stop(system, root, first, second)


def test_spawn_agent_with_a_value_takes_no_config_or_tools(system: ActorSystemHandle) -> None:
    agent = Agent(name=unique("NoConfig"), provider_config=PROVIDER)
    with pytest.raises(ConfigError) as info:
        spawn_agent(agent, PROVIDER, system=system)
    assert info.value.reason == "invalid_value" and info.value.details["key"] == "config"
    with pytest.raises(ConfigError) as info:
        spawn_agent(agent, tools=[FunctionTool(get_weather)], system=system)
    assert info.value.details["key"] == "tools"
    with pytest.raises(ConfigError) as info:
        spawn_agent(unique("NoConfig"), system=system)
    assert info.value.reason == "invalid_value" and info.value.details["key"] == "config"


def test_a_runner_spawns_a_value_that_is_not_running_and_reuses_one_that_is(
    system: ActorSystemHandle, emu: Emulator
) -> None:
    svc = ActorSessionService(system=system)
    name = unique("RunnerValue")
    agent = Agent(name=name, instruction="Be concise.", output_key="answer", provider_config=_provider(emu))
    try:
        runner = Runner(agent, "agent_value_app", svc, system=system)
        assert runner.agent_name == name and describe_agent(name, system=system)["name"] == name
        assert runner.run("u", "s1", "Hello") == "You said: Hello"
        session = svc.get_session(SessionRef(app_name="agent_value_app", user_id="u", session_id="s1"))
        assert session.state["answer"] == "You said: Hello"
        assert "Be concise." in json.dumps(emu.requests[-1]["body"]["systemInstruction"])
        again = Runner(agent, "agent_value_app", svc, system=system)  # running: used as it is
        assert again.run("u", "s2", "Hi") == "You said: Hi"
        assert pickle.loads(pickle.dumps(again)).agent_name == name
    finally:
        _stop(system, name)


def test_a_runner_with_an_invalid_value_option_spawns_nothing(system: ActorSystemHandle) -> None:
    name = unique("NotSpawned")
    agent = Agent(name=name, provider_config=PROVIDER)
    with pytest.raises(ConfigError):
        Runner(agent, "agent_value_app", ActorSessionService(system=system), system=system, max_llm_calls=-1)
    with pytest.raises(AgentError) as info:
        stop_agent(name, system=system)
    assert info.value.reason == "not_found"

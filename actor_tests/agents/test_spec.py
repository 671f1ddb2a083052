"""AgentSpec validation and tree checks: pure logic, no actor system."""

from __future__ import annotations

import pickle

import pytest

from adk_actors.agents import AgentRef, AgentTool, build_spec, check_agent_name, check_tree
from adk_actors.agents.spec import MAX_TREE_AGENTS, MAX_TREE_DEPTH, check_ancestry, compile_spec_catalog
from adk_actors.errors import AgentError, ConfigError, SchemaError, ToolError
from adk_actors.runtime.refs import LocalRef
from adk_actors.tools import FunctionTool

from .support import PlainProvider, explode, get_weather

BASE = {"provider": "gemini", "api_key": "test-key-SECRET", "base_url": "http://127.0.0.1:9"}


@pytest.mark.parametrize("name", ["WeatherAgent", "_a", "a1_b2", "A" * 64])
def test_valid_agent_names_pass(name: str) -> None:
    assert check_agent_name(name) == name


@pytest.mark.parametrize("name", ["", "1abc", "a-b", "a.b", "a b", "é", "A" * 65, 3, None])
def test_invalid_agent_names_fail_with_invalid_agent_name(name: object) -> None:
    with pytest.raises(AgentError) as info:
        build_spec(name, BASE)  # type: ignore[arg-type]
    assert info.value.reason == "invalid_agent_name"


def test_user_is_a_reserved_agent_name() -> None:
    with pytest.raises(AgentError) as info:
        build_spec("user", BASE)
    assert info.value.reason == "reserved_agent_name"


def test_unknown_top_level_and_nested_keys_are_rejected() -> None:
    with pytest.raises(ConfigError) as info:
        build_spec("A", {**BASE, "instructionz": "x"})
    assert info.value.reason == "unknown_key"
    with pytest.raises(ConfigError) as info:
        build_spec("A", {**BASE, "generation_config": {"temprature": 1}})
    assert info.value.reason == "unknown_key" and "temprature" in info.value.details["key"]
    with pytest.raises(ConfigError) as info:
        build_spec("A", {**BASE, "sub_agents": {"B": {"agent": "B", "pid": 1}}})
    assert info.value.details["key"] == "sub_agents.B.pid"


def test_agent_keys_are_validated() -> None:
    for key, value in [
        ("history_policy", "forget"),
        ("output_key", ""),
        ("description", 3),
        ("callbacks", "m"),
        ("callback_config", [1]),
    ]:
        with pytest.raises(ConfigError) as info:
            build_spec("A", {**BASE, key: value})
        assert info.value.reason == "invalid_value" and info.value.details["key"] == key


def test_callbacks_must_import_and_their_hooks_are_found_at_spawn() -> None:
    with pytest.raises(ConfigError) as info:
        build_spec("A", {**BASE, "callbacks": ["no_such_module_xyz"]})
    assert info.value.reason == "invalid_callback" and info.value.details == {"callback": "no_such_module_xyz"}
    spec = build_spec(
        "A",
        {
            **BASE,
            "callbacks": ["actor_tests.agents.callbacks_for_tests:Audit"],
            "callback_config": {"journal": "/tmp/x", "api_key": "SECRET"},
        },
    )
    assert spec.callback_hooks == ("before_model", "after_model", "before_tool", "after_tool")
    assert spec.callback_config == {"journal": "/tmp/x", "api_key": "[REDACTED]"}  # secret-named keys pruned


def test_invalid_input_or_output_schema_is_a_schema_error_naming_the_key() -> None:
    for key in ("input_schema", "output_schema"):
        with pytest.raises(SchemaError) as info:
            build_spec("A", {**BASE, key: {"type": "no-such-type"}})
        assert info.value.details["key"] == key


def test_duplicate_tool_names_are_rejected() -> None:
    with pytest.raises(ToolError) as info:
        build_spec("A", BASE, [FunctionTool(get_weather), FunctionTool(explode, name="get_weather")])
    assert info.value.reason == "duplicate_tool_name"


def test_a_tool_named_like_a_sub_agent_is_rejected() -> None:
    with pytest.raises(ToolError) as info:
        build_spec("A", {**BASE, "sub_agents": {"get_weather": {"agent": "get_weather"}}}, [FunctionTool(get_weather)])
    assert info.value.reason == "duplicate_tool_name" and info.value.details["source"] == "sub_agent"


def test_sub_agent_alias_must_equal_the_agent_name() -> None:
    ref = AgentRef("Other", LocalRef(0, "agent.Other"))
    with pytest.raises(AgentError) as info:
        build_spec("A", {**BASE, "sub_agents": {"Search": {"agent": ref, "description": "d"}}})
    assert info.value.reason == "alias_mismatch"


def test_an_agent_cannot_be_its_own_sub_agent() -> None:
    with pytest.raises(AgentError) as info:
        build_spec("A", {**BASE, "sub_agents": ["A"]})
    assert info.value.reason == "self_reference"


def test_spec_is_picklable_and_never_shows_the_api_key() -> None:
    spec = build_spec(
        "A",
        {**BASE, "sub_agents": {"B": {"agent": "B", "description": "helps"}}},
        [FunctionTool(get_weather, parallel_safe=True), AgentTool("C", description="see C")],
    )
    copy = pickle.loads(pickle.dumps(spec))
    assert copy.name == "A" and [t.name for t in copy.tools] == ["get_weather", "C"]
    assert "SECRET" not in repr(spec) and "SECRET" not in repr(spec.model_config)
    _catalog, declarations = compile_spec_catalog(copy)
    assert [d["name"] for d in declarations] == ["get_weather", "C", "B"]
    assert copy.tools[0].parallel_safe and copy.tools[1].agent == "C"
    assert "sub_agents" not in copy.model_config


def test_confirmation_flags_compile_to_always_never_or_dynamic() -> None:
    spec = build_spec(
        "A",
        BASE,
        [
            FunctionTool(get_weather, requires_confirmation=True),
            FunctionTool(explode),
            FunctionTool(get_weather, name="gated", requires_confirmation=lambda a, c: True),
        ],
    )
    assert [t.confirmation for t in spec.tools] == ["always", "never", "dynamic"]


def test_output_schema_requests_structured_output() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    spec = build_spec("A", {**BASE, "output_schema": schema})
    generation = spec.model_config["generation_config"]
    assert generation["response_mime_type"] == "application/json"
    assert generation["response_json_schema"]["required"] == ["answer"]


def test_structured_output_is_requested_only_from_a_capable_provider() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    spec = build_spec("A", {"provider": PlainProvider(), "output_schema": schema})
    assert "generation_config" not in spec.model_config  # PlainProvider declares no structured_output
    assert spec.output_schema["required"] == ["answer"]  # the answer is still validated after the call
    spec = build_spec("A", {"provider": PlainProvider(structured=True), "output_schema": schema})
    assert spec.model_config["generation_config"]["response_json_schema"]["required"] == ["answer"]


def _tree(edges: dict[str, list[str]]):
    return lambda name: edges.get(name, [])


def test_check_tree_counts_a_valid_tree() -> None:
    assert check_tree("R", ["A", "B"], _tree({"A": ["C"], "B": ["D"]})) == 5


@pytest.mark.parametrize(
    ("children", "edges", "reason"),
    [
        (["R"], {}, "self_reference"),
        (["A"], {"A": ["A"]}, "self_reference"),
        (["A"], {"A": ["B"], "B": ["R"]}, "agent_cycle"),
        (["A"], {"A": ["B"], "B": ["A"]}, "agent_cycle"),
        (["A", "B"], {"A": ["C"], "B": ["C"]}, "duplicate_ownership"),
    ],
)
def test_check_tree_rejects_bad_shapes(children: list[str], edges: dict[str, list[str]], reason: str) -> None:
    with pytest.raises(AgentError) as info:
        check_tree("R", children, _tree(edges))
    assert info.value.reason == reason


def test_check_tree_rejects_more_than_256_agents() -> None:
    wide = [f"a{i}" for i in range(MAX_TREE_AGENTS - 1)]
    assert check_tree("R", wide, _tree({})) == MAX_TREE_AGENTS
    with pytest.raises(AgentError) as info:
        check_tree("R", [*wide, "one_more"], _tree({}))
    assert info.value.reason == "too_many_agents"


def test_check_tree_rejects_depth_above_64() -> None:
    chain = {f"n{i}": [f"n{i + 1}"] for i in range(1, MAX_TREE_DEPTH)}
    assert check_tree("R", ["n1"], _tree(chain)) == MAX_TREE_DEPTH + 1
    chain[f"n{MAX_TREE_DEPTH}"] = ["too_deep"]
    with pytest.raises(AgentError) as info:
        check_tree("R", ["n1"], _tree(chain))
    assert info.value.reason == "tree_too_deep"


def test_invocation_time_depth_agrees_with_the_spawn_time_tree_check() -> None:
    # The chain R -> n1 -> ... -> n64 passes check_tree; n64 runs with the ancestry R, n1..n63 (depth 64).
    chain = ["R", *(f"n{i}" for i in range(1, MAX_TREE_DEPTH + 1))]
    check_ancestry(chain[-1], tuple(chain[:-1]))
    with pytest.raises(AgentError) as info:
        check_ancestry("too_deep", tuple(chain))  # depth 65, the depth check_tree refuses too
    assert info.value.reason == "tree_too_deep" and info.value.details == {"max": MAX_TREE_DEPTH}
    with pytest.raises(AgentError) as info:
        check_ancestry("n3", ("R", "n1", "n2", "n3", "n4"))
    assert info.value.reason == "agent_cycle"


def test_agent_tool_schema_matches_the_reference_shape() -> None:
    declaration = AgentTool.schema_for("SearchSpecialist", "Researches Erlang and OTP topics")
    assert declaration["name"] == "SearchSpecialist"
    assert declaration["parameters"]["required"] == ["prompt"]

"""The legacy graph builder: compile-time validation, deterministic in-process runs with a cycle bound, and the
function / tool / agent node helpers (agent nodes against the Gemini emulator and a real actor system)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from actor_tests.agents.conftest import Spawner, config_for, emu, spawn, unique
from actor_tests.samples_runner import run_sample
from adk_actors.emulator import Emulator
from adk_actors.errors import ConfigError, ToolError, WorkflowError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.tools import FunctionTool, ToolContext, long_running
from adk_actors.workflows.graph import END, CompiledGraph, Graph, agent_node, function_node, tool_node

__all__ = ["emu", "spawn"]  # fixtures of the agent tests, used here

ROOT = Path(__file__).resolve().parents[2]


def increment(state: dict[str, Any]) -> dict[str, Any]:
    return {"count": state.get("count", 0) + 1}


def counter_graph() -> Graph:
    graph = Graph()
    graph.add_node("counter", increment)
    graph.add_conditional_edge("counter", lambda state: "counter" if state["count"] < 3 else END)
    graph.set_entry_point("counter")
    return graph


def compile_error(graph: Graph) -> WorkflowError:
    with pytest.raises(WorkflowError) as info:
        graph.compile()
    return info.value


# ---- the README example and running ----------------------------------------------------------------------------------


def test_the_readme_counter_loops_until_its_conditional_edge_says_end() -> None:
    compiled = counter_graph().compile()
    assert isinstance(compiled, CompiledGraph)
    assert compiled.run({"count": 0}, max_steps=10) == {"count": 3}
    assert compiled.run({"count": 0, "other": "kept"}, max_steps=10) == {"count": 3, "other": "kept"}


def test_deterministic_edges_run_in_order_and_a_node_without_an_edge_is_terminal() -> None:
    trail: list[str] = []

    def visit(name: str) -> Any:
        def node(state: dict[str, Any]) -> dict[str, Any]:
            trail.append(name)
            return {"seen": [*state.get("seen", []), name]}

        return node

    graph = (
        Graph()
        .add_node("a", visit("a"))
        .add_node("b", visit("b"))
        .add_node("c", visit("c"))
        .add_edge("a", "b")
        .add_edge("b", "c")
        .set_entry_point("a")
    )
    initial: dict[str, Any] = {"seen": []}
    assert graph.compile().run(initial) == {"seen": ["a", "b", "c"]}
    assert initial == {"seen": []}  # the caller's state is never modified
    assert trail == ["a", "b", "c"]
    ended = Graph().add_node("a", visit("a")).add_node("b", visit("b")).add_edge("a", END).set_entry_point("a")
    assert ended.compile().run({})["seen"] == ["a"]


def test_max_steps_bounds_a_cycle() -> None:
    loop = Graph().add_node("spin", increment).add_edge("spin", "spin").set_entry_point("spin").compile()
    with pytest.raises(WorkflowError) as info:
        loop.run({}, max_steps=5)
    assert info.value.reason == "max_steps" and info.value.details == {"max_steps": 5, "node": "spin"}
    with pytest.raises(WorkflowError):
        counter_graph().compile().run({"count": 0}, max_steps=2)  # needs three steps
    assert counter_graph().compile().run({"count": 0}, max_steps=3) == {"count": 3}
    with pytest.raises(ConfigError):
        loop.run({}, max_steps=0)


def test_a_conditional_edge_choosing_an_undeclared_route_fails() -> None:
    graph = Graph().add_node("a", increment).add_node("b", increment).set_entry_point("a")
    graph.add_conditional_edge("a", lambda state: "nowhere")
    with pytest.raises(WorkflowError) as info:
        graph.compile().run({})
    assert info.value.reason == "undeclared_route" and info.value.details == {"node": "a", "route": "nowhere"}
    narrowed = Graph().add_node("a", increment).add_node("b", increment).set_entry_point("a")
    narrowed.add_conditional_edge("a", lambda state: "b", routes=["a", END])
    with pytest.raises(WorkflowError) as info:
        narrowed.compile().run({})
    assert info.value.reason == "undeclared_route"
    non_str = Graph().add_node("a", increment).set_entry_point("a")
    non_str.add_conditional_edge("a", lambda state: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(WorkflowError) as info:
        non_str.compile().run({})
    assert info.value.details == {"node": "a", "route_type": "int"}


def test_a_node_must_return_a_dict() -> None:
    graph = Graph().add_node("bad", lambda state: 7).set_entry_point("bad")  # type: ignore[arg-type,return-value]
    with pytest.raises(WorkflowError) as info:
        graph.compile().run({})
    assert info.value.reason == "invalid_node_result" and info.value.details["type"] == "int"


def test_node_exceptions_become_node_failed_and_adk_errors_pass_through() -> None:
    def broken(state: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("secret-detail")

    def refusing(state: dict[str, Any]) -> dict[str, Any]:
        raise ToolError(reason="quota")

    with pytest.raises(WorkflowError) as info:
        Graph().add_node("n", broken).set_entry_point("n").compile().run({})
    assert info.value.reason == "node_failed" and "secret-detail" not in str(info.value.to_dict())
    with pytest.raises(ToolError):
        Graph().add_node("n", refusing).set_entry_point("n").compile().run({})
    with pytest.raises(WorkflowError) as info:
        Graph().add_node("n", increment).set_entry_point("n").compile().run(["not", "a", "map"])  # type: ignore[arg-type]
    assert info.value.reason == "invalid_state"


def test_a_raising_node_leaves_its_stack_trace_in_the_log_not_in_the_error(caplog: pytest.LogCaptureFixture) -> None:
    def broken(state: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("detail-for-the-log")

    with caplog.at_level(logging.ERROR, logger="adk_actors.workflows"), pytest.raises(WorkflowError) as info:
        Graph().add_node("n", broken).set_entry_point("n").compile().run({})
    assert "detail-for-the-log" not in str(info.value.to_dict())
    [record] = [r for r in caplog.records if r.name == "adk_actors.workflows"]
    text = record.getMessage()
    assert "graph node raised" in text and "KeyError" in text and "in broken" in text and "Traceback" in text


# ---- compile errors --------------------------------------------------------------------------------------------------


def test_compile_requires_an_entry_point_that_exists() -> None:
    assert compile_error(Graph().add_node("a", increment)).reason == "no_entry_point"
    err = compile_error(Graph().add_node("a", increment).set_entry_point("b"))
    assert (err.reason, err.details) == ("unknown_node", {"node": "b", "role": "entry_point"})


def test_compile_rejects_edges_to_or_from_unknown_nodes() -> None:
    base = lambda: Graph().add_node("a", increment).set_entry_point("a")  # noqa: E731
    assert compile_error(base().add_edge("a", "ghost")).details == {"node": "ghost", "role": "edge_target"}
    assert compile_error(base().add_edge("ghost", "a")).details == {"node": "ghost", "role": "edge_source"}
    err = compile_error(base().add_conditional_edge("a", lambda s: END, routes=["ghost"]))
    assert (err.reason, err.details["role"]) == ("unknown_node", "route")


def test_compile_rejects_duplicate_reserved_and_invalid_nodes() -> None:
    err = compile_error(Graph().add_node("a", increment).add_node("a", increment).set_entry_point("a"))
    assert (err.reason, err.details) == ("duplicate_node", {"node": "a"})
    assert compile_error(Graph().add_node(END, increment).set_entry_point(END)).reason == "reserved_node"
    assert compile_error(Graph().add_node("a", "not callable").set_entry_point("a")).reason == "invalid_node"  # type: ignore[arg-type]
    assert compile_error(Graph().add_node("", increment).set_entry_point("")).reason == "invalid_node"


def test_compile_requires_deterministic_edges() -> None:
    two = Graph().add_node("a", increment).add_node("b", increment).add_node("c", increment).set_entry_point("a")
    err = compile_error(two.add_edge("a", "b").add_edge("a", "c"))
    assert (err.reason, err.details) == ("ambiguous_edge", {"node": "a"})
    mixed = Graph().add_node("a", increment).add_node("b", increment).set_entry_point("a")
    assert compile_error(mixed.add_edge("a", "b").add_conditional_edge("a", lambda s: END)).reason == "ambiguous_edge"
    bad_routes = Graph().add_node("a", increment).set_entry_point("a")
    assert compile_error(bad_routes.add_conditional_edge("a", lambda s: END, routes=[1])).reason == "invalid_routes"  # type: ignore[list-item]


# ---- node helpers ----------------------------------------------------------------------------------------------------


def test_function_node_passes_dict_nodes_through_or_stores_a_value_under_a_key() -> None:
    assert function_node(increment) is increment
    graph = Graph().add_node("len", function_node(lambda s: len(s["text"]), output_key="length")).set_entry_point("len")
    assert graph.compile().run({"text": "hello"}) == {"text": "hello", "length": 5}
    with pytest.raises(WorkflowError):
        function_node("nope")  # type: ignore[arg-type]


def lookup(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """Look up a city.

    Args:
        city: The city name.
    """
    tool_context.actions.set_state("looked_up", city)
    return {"city": city, "forecast": "sunny", "api_key": "sk-hidden-value", "seen_user": tool_context.state["user"]}


def test_tool_node_calls_a_tool_with_arguments_from_the_state() -> None:
    graph = Graph().add_node("weather", tool_node(FunctionTool(lookup))).set_entry_point("weather")
    final = graph.compile().run({"city": "Oslo", "user": "ada", "unrelated": 1})
    assert final["lookup"] == {"city": "Oslo", "forecast": "sunny", "api_key": "[REDACTED]", "seen_user": "ada"}
    assert final["looked_up"] == "Oslo"  # state the tool recorded through its context is merged
    keyed = (
        Graph()
        .add_node("w", tool_node(FunctionTool(lookup), args_key="args", output_key="weather"))
        .set_entry_point("w")
        .compile()
    )
    assert keyed.run({"args": {"city": "Rome"}, "user": "bo"})["weather"]["city"] == "Rome"


def test_tool_node_failures_are_structural() -> None:
    node = tool_node(FunctionTool(lookup))
    with pytest.raises(WorkflowError) as info:
        node({"user": "ada"})  # no city: the schema rejects the arguments
    assert info.value.reason == "tool_failed" and info.value.details["tool"] == "lookup"
    with pytest.raises(WorkflowError) as info:
        tool_node(FunctionTool(lookup), args_key="args")({})
    assert info.value.reason == "missing_state_key"


def test_tool_node_fails_closed_for_tools_that_need_a_runner() -> None:
    ran: list[str] = []

    def wipe() -> dict[str, Any]:
        """Wipe everything (an operator approves it first)."""
        ran.append("wipe")
        return {"wiped": True}

    def export() -> dict[str, Any]:
        """Export in the background."""
        ran.append("export")
        return long_running("op-1", "queued")

    for gate in (True, lambda args, context: True):
        with pytest.raises(WorkflowError) as info:
            tool_node(FunctionTool(wipe, requires_confirmation=gate))({})
        assert (info.value.reason, info.value.details) == ("tool_confirmation_requires_runner", {"tool": "wipe"})
    assert ran == []  # no approval channel: the gated tool never ran
    with pytest.raises(WorkflowError) as info:
        tool_node(FunctionTool(export))({})
    assert info.value.reason == "long_running_requires_runner"
    assert ran == ["export"]


AGENT_SCRIPT = {
    "rules": [
        {"when": {"system_text_contains": "French"}, "respond": {"text": "FR({user_text})"}},
        {"when": {}, "respond": {"text": "plain({user_text})"}},
    ]
}


def test_agent_node_asks_a_real_agent_with_its_own_instructions(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(AGENT_SCRIPT)
    translator = spawn(unique("GraphTranslator"), config_for(emu, instructions="Translate the input to French."))
    graph = (
        Graph()
        .add_node("translate", agent_node(translator, "input", "french", system=system, timeout=30))
        .add_node("shout", lambda state: {"loud": state["french"].upper()})
        .add_edge("translate", "shout")
        .set_entry_point("translate")
    )
    assert graph.compile().run({"input": "hello"}, max_steps=4) == {
        "input": "hello",
        "french": "FR(hello)",
        "loud": "FR(HELLO)",
    }
    with pytest.raises(WorkflowError) as info:
        graph.compile().run({}, max_steps=4)
    assert info.value.reason == "missing_state_key"


def test_agent_node_applies_the_agents_callbacks(system: ActorSystemHandle, emu: Emulator, spawn: Spawner) -> None:
    emu.set_script(AGENT_SCRIPT)
    agent = spawn(
        unique("GraphRewritten"), config_for(emu, callbacks=["actor_tests.agents.callbacks_for_tests:Rewrite"])
    )
    node = agent_node(agent, system=system, timeout=30)
    assert node({"input": "quiet"}) == {"output": "PLAIN(QUIET)"}


# ---- the sample ------------------------------------------------------------------------------------------------------


def test_the_legacy_graph_sample_runs() -> None:
    result = run_sample("workflow_legacy_graph.py")
    assert "count=3" in result.stdout

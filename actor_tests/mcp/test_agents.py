"""MCP tools in agents, end to end on the Gemini emulator: ``prompt`` and a ``Runner`` run call an MCP tool and the
model receives the MCP content exactly (``isError`` as ``mcp_tool_error``); name collisions and ``prefix``; a changed
server catalog fails the turn with ``tool_catalog_changed`` until ``refresh()``; a cancelled turn cancels the MCP
request on the server (``notifications/cancelled``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.agents.conftest import Spawner
from actor_tests.mcp.conftest import (
    config_for,
    function_responses,
    line_args,
    log_records,
    official_args,
    unique,
    until,
)
from adk_actors import FunctionTool, Runner, mcp, prompt, runs, spawn_agent
from adk_actors.emulator import Emulator
from adk_actors.errors import AdkError, AskTimeout, ToolError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService

pytestmark = pytest.mark.timeout(60)

APP = "mcp_tests"
USER = "u1"


def call_then_echo(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A script: the model calls ``name(args)`` once, then answers with the tool's response text."""
    return {
        "rules": [
            {"when": {"has_function_response": False}, "respond": {"function_calls": [{"name": name, "args": args}]}},
            {"when": {"has_function_response": True}, "respond": {"text": "done: {response_text}"}},
        ]
    }


@pytest.fixture(scope="module")
def official(system: ActorSystemHandle) -> Iterator[mcp.McpClient]:
    """One stdio connection to the official server for the module (its catalog is never changed here)."""
    client = mcp.connect("stdio", sys.executable, args=official_args(), system=system)
    yield client
    client.close()


def last_function_response(emu: Emulator) -> dict[str, Any]:
    responses = function_responses(emu.requests[-1])
    assert len(responses) == 1
    return responses[0]


def test_prompt_calls_an_mcp_tool_and_the_model_gets_its_content_exactly(
    emu: Emulator, spawn: Spawner, official: mcp.McpClient
) -> None:
    emu.set_script(call_then_echo("add", {"a": 2, "b": 3}))
    name = unique("McpPrompt")
    spawn(name, config_for(emu), [mcp.mcp_toolset(official)])
    assert prompt(name, "add two and three", timeout=30, system=official.system).startswith("done:")
    response = last_function_response(emu)
    assert response["name"] == "add"
    assert response["response"] == {"content": [{"type": "text", "text": "5"}], "structuredContent": {"result": 5}}


def test_an_agent_value_takes_an_mcp_toolset_like_any_tools(
    system: ActorSystemHandle, emu: Emulator, official: mcp.McpClient
) -> None:
    from adk_actors import Agent, stop_agent

    name = unique("McpValue")
    agent = Agent(name=name, tools=[mcp.mcp_toolset(official, prefix="calc_")], provider_config=config_for(emu))
    spawn_agent(agent, system=system)
    try:
        emu.set_script(call_then_echo("calc_add", {"a": 1, "b": 1}))
        assert prompt(name, "one plus one", timeout=30, system=system).startswith("done:")
        response = last_function_response(emu)
        assert response["name"] == "calc_add"  # the prefixed function name; the server's tool is "add"
        assert response["response"]["structuredContent"] == {"result": 2}
    finally:
        stop_agent(name, system=system)


def test_a_runner_run_calls_an_mcp_tool_and_stores_its_result(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, svc: ActorSessionService, official: mcp.McpClient
) -> None:
    emu.set_script(call_then_echo("add", {"a": 40, "b": 2}))
    name = unique("McpRunner")
    spawn(name, config_for(emu), [official.toolset()])
    sid = unique("s")
    Runner(name, APP, svc, system=system).run(USER, sid, "add please")
    response = last_function_response(emu)
    assert response["response"] == {"content": [{"type": "text", "text": "42"}], "structuredContent": {"result": 42}}
    from actor_tests.runner.conftest import read_events

    stored = [
        p["response"]
        for e in read_events(svc, APP, USER, sid)
        if e.content is not None
        for p in e.content.to_dict()["parts"]
        if p["type"] == "function_response"
    ]
    assert stored == [response["response"]]


def test_an_mcp_tool_error_reaches_the_model_as_mcp_tool_error_with_its_content(
    emu: Emulator, spawn: Spawner, official: mcp.McpClient
) -> None:
    emu.set_script(call_then_echo("fail", {}))
    name = unique("McpFail")
    spawn(name, config_for(emu), [mcp.mcp_toolset(official)])
    prompt(name, "fail please", timeout=30, system=official.system)
    direct = official.execute_tool("fail")
    assert last_function_response(emu)["response"] == {
        "error": {"reason": "mcp_tool_error", "content": direct["content"]}
    }
    assert direct["isError"] is True and direct["content"][0]["type"] == "text"


def test_a_name_collision_fails_spawn_and_a_prefix_avoids_it(
    emu: Emulator, spawn: Spawner, official: mcp.McpClient
) -> None:
    def add(a: int, b: int) -> int:
        """Local add."""
        return a - b

    with pytest.raises(ToolError) as caught:
        spawn(unique("McpClash"), config_for(emu), [mcp.mcp_toolset(official), FunctionTool(add)])
    assert caught.value.reason == "duplicate_tool_name"

    emu.set_script(call_then_echo("m_add", {"a": 1, "b": 2}))
    name = unique("McpPrefixed")
    spawn(name, config_for(emu), [mcp.mcp_toolset(official, prefix="m_"), FunctionTool(add)])
    prompt(name, "add", timeout=30, system=official.system)
    response = last_function_response(emu)
    assert response["name"] == "m_add" and response["response"]["structuredContent"] == {"result": 3}


def test_a_changed_catalog_fails_the_turn_until_refresh_and_a_new_snapshot(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(call_then_echo("search", {"query": "otp"}))
    with mcp.connect("stdio", sys.executable, args=line_args("list-changed"), system=system) as client:
        toolset = mcp.mcp_toolset(client)
        first = unique("McpCatalog")
        spawn(first, config_for(emu), [toolset])
        assert prompt(first, "search", timeout=30, system=system) == "done: text: found: otp, type: text"
        until(lambda: client.status()["catalog_changed"], 5, "the list_changed notification seen")

        with pytest.raises(AdkError) as caught:
            prompt(first, "search again", timeout=30, system=system)
        assert caught.value.reason == "tool_catalog_changed"

        fresh = toolset.refresh()
        assert [t.description for t in fresh.tools] == ["Search the new index."]
        second = unique("McpCatalog")
        spawn(second, config_for(emu), [fresh])
        assert prompt(second, "search once more", timeout=30, system=system) == "done: text: found: otp, type: text"
        with pytest.raises(AdkError) as stale:  # the first agent keeps its old snapshot
            prompt(first, "and again", timeout=30, system=system)
        assert stale.value.reason == "tool_catalog_changed"


def test_a_turn_that_times_out_cancels_the_mcp_request_on_the_server(
    make_system: Callable[..., ActorSystemHandle], emu: Emulator, tmp_path: Path
) -> None:
    node = make_system(agent_turn_timeout_ms=1500)
    log = tmp_path / "log.jsonl"
    emu.set_script(call_then_echo("search", {"query": "forever"}))
    with mcp.connect("stdio", sys.executable, args=line_args("hang", "--log", str(log)), system=node) as client:
        name = unique("McpTurnTimeout")
        spawn_agent(name, config_for(emu), [mcp.mcp_toolset(client)], system=node)
        with pytest.raises(AskTimeout) as caught:
            prompt(name, "search", timeout=30, system=node)
        assert caught.value.reason == "agent_turn_timeout"
        until(lambda: [r for r in log_records(log) if "cancelled" in r], 5, "notifications/cancelled on the server")
        until(lambda: client.status()["in_flight"] == 0, 5, "the request abandoned")


def test_a_cancelled_runner_run_cancels_the_mcp_request_on_the_server(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, svc: ActorSessionService, tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    emu.set_script(call_then_echo("search", {"query": "forever"}))
    with mcp.connect("stdio", sys.executable, args=line_args("hang", "--log", str(log)), system=system) as client:
        name = unique("McpRunCancel")
        spawn(name, config_for(emu), [mcp.mcp_toolset(client)])
        run_id = runs.start(Runner(name, APP, svc, system=system), USER, unique("s"), "search", system=system)
        until(lambda: client.status()["in_flight"] == 1, 10, "the MCP call in flight")
        assert log_records(log) == []
        assert isinstance(runs.cancel(run_id, system=system), runs.Cancelled)
        until(lambda: [r for r in log_records(log) if "cancelled" in r], 5, "notifications/cancelled on the server")
        until(lambda: client.status()["in_flight"] == 0, 5, "the request abandoned")

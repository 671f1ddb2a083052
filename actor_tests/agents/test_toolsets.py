"""Agents with toolsets against the real emulator: a dynamic toolset's catalog (a JSON file standing for a remote
MCP/OpenAPI backend) changes mid-session; the agent keeps its snapshot, fails closed with ``tool_catalog_changed``
until the toolset is refreshed and the agent replaced; names collide across tools, toolsets and sub-agents; runtime
policy runs before the backend is materialized."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actor_tests.runner.conftest import function_responses, read_events, svc  # noqa: F401 - fixture
from adk_actors import Runner, prompt, stop_agent
from adk_actors.emulator import Emulator
from adk_actors.errors import ToolError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.testing import CrossProcessCounter
from adk_actors.tools import FunctionTool, Toolset

from .conftest import Spawner, config_for, unique

LOOKUP = {
    "when": {"has_function_response": False},
    "respond": {"function_calls": [{"name": "lookup", "args": {"city": "Paris"}}]},
}
AFTER = {"when": {"has_function_response": True}, "respond": {"text": "Tool said: {response_text}"}}


def remote_catalog(path: Path, loads: CrossProcessCounter) -> Callable[[], list[Any]]:
    """A loader reading the backend's catalog from ``path`` (``{"lookup": 1 | 2}``; absent: removed) and counting
    its loads. Built as a closure so cloudpickle sends it to workers by value."""
    where, count = str(path), loads.path

    def load() -> list[Any]:
        CrossProcessCounter(count).incr()
        with open(where) as fh:
            catalog = json.load(fh)

        def lookup(city: str) -> dict:
            """Look a city up."""
            return {"city": city, "version": 1}

        def lookup_v2(city: str, units: str) -> dict:
            """Look a city up, in units."""
            return {"city": city, "units": units, "version": 2}

        versions = {1: FunctionTool(lookup), 2: FunctionTool(lookup_v2, name="lookup")}
        return [versions[catalog["lookup"]]] if "lookup" in catalog else []

    return load


@pytest.fixture
def backend(tmp_path: Path) -> tuple[Path, CrossProcessCounter]:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"lookup": 1}))
    return path, CrossProcessCounter(tmp_path / "loads")


def _declared(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for t in request["body"].get("tools", []) for d in t.get("functionDeclarations", [])]


def test_a_toolset_whose_catalog_changes_mid_session_fails_closed_until_refreshed(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, backend: tuple[Path, CrossProcessCounter]
) -> None:
    path, loads = backend
    emu.set_script({"rules": [LOOKUP, AFTER]})
    remote = Toolset.dynamic("remote", remote_catalog(path, loads))
    agent = spawn(unique("Toolsetter"), config_for(emu), [remote])

    assert prompt(agent, "weather?", system=system, timeout=30) == "Tool said: city: Paris, version: 1"
    [declared] = _declared(emu.requests[-2])
    assert declared["name"] == "lookup" and "units" not in json.dumps(declared)

    path.write_text(json.dumps({"lookup": 2}))  # the backend changed the operation's contract
    answer = prompt(agent, "again?", system=system, timeout=30)
    assert "tool_catalog_changed" in answer and "version" not in answer
    assert _declared(emu.requests[-2]) == [declared]  # the agent's snapshot is what the model sees
    [response] = function_responses(emu.requests[-1])[-1:]
    assert response["response"]["error"]["reason"] == "tool_catalog_changed"

    path.write_text(json.dumps({}))  # ... and then removed it
    assert "tool_catalog_changed" in prompt(agent, "once more?", system=system, timeout=30)

    path.write_text(json.dumps({"lookup": 2}))
    refreshed = remote.refresh()
    assert refreshed is not remote and refreshed.version != remote.version
    stop_agent(agent, system=system)
    replacement = spawn(unique("Toolsetter"), config_for(emu), [refreshed])
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "lookup", "args": {"city": "Paris", "units": "metric"}}]},
                },
                AFTER,
            ]
        }
    )
    assert prompt(replacement, "now?", system=system, timeout=30) == "Tool said: city: Paris, units: metric, version: 2"
    assert "units" in json.dumps(_declared(emu.requests[-2]))


def test_names_collide_across_tools_toolsets_and_sub_agents(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, backend: tuple[Path, CrossProcessCounter]
) -> None:
    path, loads = backend
    remote = Toolset.dynamic("remote", remote_catalog(path, loads))

    def lookup(city: str) -> dict:
        """A local lookup."""
        return {}

    with pytest.raises(ToolError) as info:
        spawn(unique("Clash"), config_for(emu), [FunctionTool(lookup), remote])
    assert info.value.reason == "duplicate_tool_name"
    assert info.value.details == {"tool": "lookup", "source": "toolset:remote", "first_source": "tool"}

    with pytest.raises(ToolError) as info:
        spawn(unique("Clash"), config_for(emu), [remote, Toolset.of("local", [FunctionTool(lookup)])])
    assert info.value.reason == "duplicate_tool_name" and info.value.details["first_source"] == "toolset:remote"

    with pytest.raises(ToolError) as info:
        spawn(unique("Clash"), config_for(emu, sub_agents={"lookup": {"agent": "lookup"}}), [remote])
    assert info.value.reason == "duplicate_tool_name" and info.value.details["source"] == "sub_agent"


def test_runtime_policy_runs_before_the_toolset_is_materialized(
    system: ActorSystemHandle,
    emu: Emulator,
    spawn: Spawner,
    svc: ActorSessionService,  # noqa: F811
    backend: tuple[Path, CrossProcessCounter],
) -> None:
    path, loads = backend
    emu.set_script({"rules": [LOOKUP, AFTER]})
    name = unique("Guarded")
    spawn(name, config_for(emu), [Toolset.dynamic("remote", remote_catalog(path, loads))])
    spawned = loads.value  # the snapshot was loaded at spawn, in this process
    runner = Runner(
        name,
        "toolset_tests",
        svc,
        system=system,
        runtime_policy={"id": "no-lookup", "agents": {"allow": "all"}, "tools": {"allow": []}},
    )
    sid = unique("s")
    output = runner.run("u1", sid, "weather?")
    assert isinstance(output, str) and "not_allowed" in output
    assert loads.value == spawned  # denied before the backend was ever asked
    [audit] = [e for e in read_events(svc, "toolset_tests", "u1", sid) if e.author == "system"]
    assert audit.actions.runtime_policy_decision is not None
    assert audit.actions.runtime_policy_decision["subject"] == "lookup"

    allowed = Runner(
        name,
        "toolset_tests",
        svc,
        system=system,
        runtime_policy={"id": "lookup", "agents": {"allow": "all"}, "tools": {"allow": "all"}},
    )
    assert allowed.run("u1", unique("s"), "weather?") == "Tool said: city: Paris, version: 1"
    assert loads.value > spawned  # an allowed call materializes the backend

"""Our client against our server, and a local agent delegating to a remote A2A agent across two nodes on 127.0.0.1:
node B serves its research agent with ``a2a_app``; on node A a Runner run's coordinator calls it as an
``AgentTool`` whose model is :class:`~adk_actors.a2a.A2aModel`. Also our client's streaming, multi-turn and
cancellation against our server."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actor_tests.agents.conftest import Spawner, config_for, unique
from actor_tests.agents.support import DELEGATION_RULES
from adk_actors import FunctionTool, Runner, a2a, spawn_agent, stop_agent
from adk_actors.agents import AgentTool
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.web import start_in_thread
from adk_actors.web.a2a_server import A2A_PATH, a2a_app, agent_card

pytestmark = pytest.mark.timeout(120)


def approve(change: str) -> dict[str, Any]:
    """Apply a change (needs approval)."""
    return {"applied": change}


@pytest.fixture
def node_b(make_system: Callable[..., ActorSystemHandle]) -> Iterator[tuple[ActorSystemHandle, str]]:
    """A second node serving a research agent (and a gated tool) over A2A; yields (node, base URL)."""
    system = make_system()
    with Emulator() as emu:
        emu.set_script(
            {
                "rules": [
                    {"when": {"user_text_contains": "change", "has_function_response": False},
                     "respond": {"function_calls": [{"name": "approve", "args": {"change": "{user_text}"}}]}},
                    {"when": {"has_function_response": True}, "respond": {"text": "done: {response_text}"}},
                    {"when": {}, "respond": {"text": "Research notes on {user_text}"}},
                ]
            }
        )  # fmt: skip
        name = f"Researcher_{uuid.uuid4().hex[:6]}"
        config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "test-key"}
        spawn_agent(name, config, [FunctionTool(approve, requires_confirmation=True)], system=system)
        runner = Runner(name, "node_b", ActorSessionService(system=system), system=system)
        app = a2a_app(system, runner=runner, card=None)
        with start_in_thread(app) as server:
            app.set_card(agent_card(name="Researcher", description="Researches topics", url=server.url + A2A_PATH))
            yield system, server.url
        stop_agent(name, system=system)


def test_a_runner_on_node_a_delegates_to_the_agent_of_node_b_over_a2a(
    system: ActorSystemHandle,
    node_b: tuple[ActorSystemHandle, str],
    emu: Emulator,
    spawn: Spawner,
    svc: ActorSessionService,
) -> None:
    _, url = node_b
    emu.set_script({"rules": DELEGATION_RULES})
    remote = unique("SearchRemote")
    spawn(remote, {"provider": a2a.A2aModel(url, allow_http_loopback=True), "description": "Researches topics"})
    coordinator = spawn(unique("Coordinator"), config_for(emu, instructions="Delegate research tasks."),
                        [AgentTool(remote)])  # fmt: skip
    answer = Runner(coordinator, "node_a", svc, system=system).run("u1", unique("s"), "supervision trees")
    assert answer == "Coordinator summary: Research notes on supervision trees"


def test_our_client_streams_resumes_an_input_required_task_and_lists_it(node_b: tuple[ActorSystemHandle, str]) -> None:
    _, url = node_b
    card = a2a.discover(url, allow_http_loopback=True)
    assert card.name == "Researcher" and card.streaming and card.rpc_url == url + A2A_PATH
    with a2a.A2aClient(card, allow_http_loopback=True) as client:
        events = list(client.stream("OTP"))
        kinds = [next(iter(e)) for e in events]
        assert kinds == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

        first = client.send("make a change")["task"]
        assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        second = client.send("yes", task_id=first["id"], context_id=first["contextId"])["task"]
        assert second["status"]["state"] == "TASK_STATE_COMPLETED"
        assert second["artifacts"][0]["parts"][0]["text"] == "done: make a change"
        listed = client.list(context_id=first["contextId"])
        assert [t["id"] for t in listed["tasks"]] == [first["id"]]

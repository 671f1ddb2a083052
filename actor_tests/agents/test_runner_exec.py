"""The agent under a Runner (the session part of ``agents/turn/engine.py``): ``history_policy`` reads the session's
events, and sub-agents' and ``AgentTool`` targets' ``output_key`` values are committed through the caller's
session."""

from __future__ import annotations

import pytest

from adk_actors import Runner
from adk_actors.agents import AgentTool
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.tools import FunctionTool

from .conftest import Spawner, config_for, unique
from .support import DELEGATION_RULES, get_weather

APP = "agent_runner_tests"
USER = "u1"


@pytest.fixture
def svc(system: ActorSystemHandle) -> ActorSessionService:
    return ActorSessionService(system=system)


def _contents(request: dict) -> list[dict]:
    return request["body"]["contents"]


def test_history_policy_exclude_under_a_runner_sends_only_the_current_invocations_events(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, svc: ActorSessionService
) -> None:
    forgetful = spawn(unique("Forgetful"), config_for(emu, history_policy="exclude"), [FunctionTool(get_weather)])
    runner = Runner(forgetful, APP, svc, system=system)
    sid = unique("s")
    assert runner.run(USER, sid, "one") == "You said: one"
    assert (
        runner.run(USER, sid, "What is the weather in Tokyo?")
        == "The weather in Tokyo is city: Tokyo, forecast: sunny."
    )
    # The second invocation's two model calls: its input, then its input, its call and the tool's answer.
    call, answer = emu.requests[-2:]
    assert [len(_contents(call)), len(_contents(answer))] == [1, 3]
    assert _contents(call)[0]["parts"][0]["text"] == "What is the weather in Tokyo?"
    assert len(svc.get_session(SessionRef(app_name=APP, user_id=USER, session_id=sid)).events) == 6  # all stored

    keeper = spawn(unique("Keeper"), config_for(emu))  # the default policy, for contrast
    runner = Runner(keeper, APP, svc, system=system)
    runner.run(USER, sid + "k", "one")
    assert runner.run(USER, sid + "k", "two") == "You said: two"
    assert len(_contents(emu.requests[-1])) == 3


SCRIPT = {"rules": DELEGATION_RULES}


@pytest.mark.parametrize("as_tool", [False, True], ids=["sub_agent", "agent_tool"])
def test_a_delegated_agents_output_key_is_committed_to_the_runners_session(
    as_tool: bool, system: ActorSystemHandle, emu: Emulator, spawn: Spawner, svc: ActorSessionService
) -> None:
    emu.set_script(SCRIPT)
    specialist = unique("SearchSpecialist")
    spawn(specialist, config_for(emu, instructions="Research the requested topic.", output_key="research"))
    delegation = {"sub_agents": [specialist]} if not as_tool else {}
    coordinator = spawn(
        unique("Coordinator"),
        config_for(emu, instructions="Delegate research tasks.", output_key="summary", **delegation),
        [AgentTool(specialist)] if as_tool else [],
    )
    sid = unique("s")
    answer = Runner(coordinator, APP, svc, system=system).run(USER, sid, "supervision trees")
    assert answer == "Coordinator summary: Research notes on supervision trees"
    session = svc.get_session(SessionRef(app_name=APP, user_id=USER, session_id=sid))
    assert session.state["research"] == "Research notes on supervision trees"
    assert session.state["summary"] == answer
    # The child's value went in with the round's tool event, the coordinator's own with the final event.
    deltas = [(e.author, dict(e.actions.state_delta)) for e in session.events if e.actions.state_delta]
    assert deltas == [
        (coordinator.name, {"research": "Research notes on supervision trees"}),
        (coordinator.name, {"summary": answer}),
    ]

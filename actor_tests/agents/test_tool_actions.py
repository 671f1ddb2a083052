"""Tool control actions against the real emulator and a real actor system: ``escalate`` and ``transfer_to_agent``
reach the Runner's tool event and are honoured (a loop ends, a sub-agent answers the turn), and a tool that calls
``invoke`` stays inside its invocation's agent ancestry."""

from __future__ import annotations

from typing import Any

import pytest

from actor_tests.runner.conftest import read_events, svc  # noqa: F401 - fixture
from adk_actors import PolicyDenied, Runner, loop, prompt
from adk_actors.agents import agent_history
from adk_actors.emulator import Emulator
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.tools import FunctionTool, ToolContext

from .conftest import Spawner, config_for, unique

AFTER = {"when": {"has_function_response": True}, "respond": {"text": "Tool said: {response_text}"}}
ECHO = {"when": {}, "respond": {"text": "You said: {user_text}"}}


def _calls(name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "when": {"tool_declared": name, "has_function_response": False},
        "respond": {"function_calls": [{"name": name, "args": args or {}}]},
    }


def exit_loop_tool() -> FunctionTool:
    def exit_loop(tool_context: ToolContext) -> dict:
        """Stop the loop: the draft is good."""
        tool_context.actions.escalate = True
        return {"done": True}

    return FunctionTool(exit_loop)


def hand_off_tool(target: str) -> FunctionTool:
    def hand_off(tool_context: ToolContext) -> dict:
        """Hand the conversation to the specialist."""
        tool_context.actions.transfer_to_agent = target
        return {"handed_to": target}

    return FunctionTool(hand_off)


def reenter_tool() -> FunctionTool:
    def reenter(tool_context: ToolContext) -> dict:
        """Ask the calling agent again, through the facade."""
        from adk_actors import invoke

        return {"nested": invoke(tool_context.agent_name, "nested", timeout=20)}

    return FunctionTool(reenter)


def test_an_escalating_reviewer_ends_the_loop(system: ActorSystemHandle, emu: Emulator, spawn: Spawner) -> None:
    emu.set_script({"rules": [_calls("exit_loop"), AFTER, ECHO]})
    writer = spawn(unique("Writer"), config_for(emu))
    reviewer = spawn(unique("Reviewer"), config_for(emu), [exit_loop_tool()])
    assert loop(writer, reviewer, "a poem", 3, system=system, timeout=30) == "You said: a poem"
    assert len(agent_history(writer, system=system)) == 2  # one draft: no revision after the escalation


def test_escalate_and_transfer_reach_the_runners_tool_event(
    system: ActorSystemHandle,
    emu: Emulator,
    spawn: Spawner,
    svc: ActorSessionService,  # noqa: F811 - the fixture
) -> None:
    specialist = unique("Specialist")
    spawn(specialist, config_for(emu))
    emu.set_script({"rules": [_calls("exit_loop"), _calls("hand_off"), AFTER, ECHO]})
    reviewer = unique("Reviewer")
    spawn(reviewer, config_for(emu), [exit_loop_tool()])
    sid = unique("s")
    assert Runner(reviewer, "actions", svc, system=system).run("u1", sid, "review") == "Tool said: True"
    [tool_event] = [
        e
        for e in read_events(svc, "actions", "u1", sid)
        if e.content is not None and any(p.type == "function_response" for p in e.content.parts)
    ]
    assert tool_event.actions.escalate is True and tool_event.actions.transfer_to_agent is None

    coordinator = unique("Coordinator")
    spawn(coordinator, config_for(emu, sub_agents={specialist: {"agent": specialist}}), [hand_off_tool(specialist)])
    sid = unique("s")
    assert Runner(coordinator, "actions", svc, system=system).run("u1", sid, "help me") == "You said: help me"
    events = read_events(svc, "actions", "u1", sid)
    [tool_event] = [
        e for e in events if e.content is not None and any(p.type == "function_response" for p in e.content.parts)
    ]
    assert tool_event.actions.transfer_to_agent == specialist and tool_event.actions.escalate is False
    assert events[-1].is_final and events[-1].author == specialist and events[-1].text() == "You said: help me"


def test_a_transferred_answer_meets_the_runners_output_policy(
    system: ActorSystemHandle,
    emu: Emulator,
    spawn: Spawner,
    svc: ActorSessionService,  # noqa: F811 - the fixture
) -> None:
    specialist = unique("Specialist")
    spawn(specialist, config_for(emu))
    emu.set_script({"rules": [_calls("hand_off"), AFTER, ECHO]})
    coordinator = unique("Coordinator")
    spawn(coordinator, config_for(emu, sub_agents={specialist: {"agent": specialist}}), [hand_off_tool(specialist)])
    text = "q" * 40  # the input and the tool's result fit the budget; the specialist's echo does not
    policy = {"id": "small-output", "agents": {"allow": "all"}, "tools": {"allow": "all"}, "max_content_bytes": 45}
    runner = Runner(coordinator, "actions", svc, runtime_policy=policy, system=system)
    sid = unique("s")
    with pytest.raises(PolicyDenied) as info:
        runner.run("u1", sid, text)
    assert info.value.reason == "content_budget_exceeded"
    events = read_events(svc, "actions", "u1", sid)
    assert not any(e.is_final for e in events)
    assert "You said" not in str([e.to_dict() for e in events]), "the denied answer was stored"


def test_transfer_to_agent_hands_the_turn_to_the_sub_agent(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    specialist = unique("Specialist")
    spawn(specialist, config_for(emu))
    emu.set_script({"rules": [_calls("hand_off"), AFTER, ECHO]})
    coordinator = spawn(
        unique("Coordinator"),
        config_for(emu, sub_agents={specialist: {"agent": specialist}}),
        [hand_off_tool(specialist)],
    )
    assert prompt(coordinator, "help me", system=system, timeout=30) == "You said: help me"
    assert agent_history(coordinator, system=system)[-1]["role"] == "model"

    stranger = spawn(unique("Stranger"), config_for(emu), [hand_off_tool(specialist)])  # not its sub-agent
    answer = prompt(stranger, "help me", system=system, timeout=30)
    assert "invalid_transfer_target" in answer and "handed_to" not in answer


def test_a_tool_that_invokes_its_own_agent_cannot_reset_cycle_protection(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner
) -> None:
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"user_text_equals": "go", "has_function_response": False},
                    "respond": {"function_calls": [{"name": "reenter", "args": {}}]},
                },
                AFTER,
                ECHO,
            ]
        }
    )
    agent = spawn(unique("Reentrant"), config_for(emu), [reenter_tool()])
    answer = prompt(agent, "go", system=system, timeout=40)
    assert "agent_cycle" in answer and "nested" not in answer


@pytest.mark.parametrize("ancestry", [["A"] * 66, [""], [5], "A"])
def test_the_tool_context_bounds_its_ancestry(ancestry: Any) -> None:
    from adk_actors.errors import ToolError

    with pytest.raises(ToolError) as info:
        ToolContext(invocation_id="i", agent_name="A", ancestry=ancestry)
    assert info.value.reason == "invalid_context" and info.value.details["field"] == "ancestry"


def test_the_tool_context_names_the_call_id_and_keeps_its_ancestry_private() -> None:
    context = ToolContext(invocation_id="i", agent_name="B", function_call_id="c1", ancestry=("A", "B"))
    assert context.call_id == "c1" and context.ancestry == ("A", "B")
    assert context.redacted().ancestry == () and context.redacted().call_id == "c1"

"""Agents: the agent spec (an ``Agent`` value or the dict config), the agent actor, ``AgentTool`` and the facade
(spawn, prompt, delegate, invoke, the sequential / parallel / loop patterns). See ``docs/AGENTS.md``."""

from adk_actors.agents.agent import Agent
from adk_actors.agents.agent_tool import AgentTool
from adk_actors.agents.api import (
    AgentRef,
    agent_history,
    delegate,
    describe_agent,
    ensure_agent,
    invoke,
    is_approved,
    loop,
    parallel,
    prompt,
    sequential,
    spawn_agent,
    stop_agent,
)
from adk_actors.agents.spec import AgentSpec, SubAgent, ToolSpec, build_spec, check_agent_name, check_tree

__all__ = [
    "Agent",
    "AgentRef",
    "AgentSpec",
    "AgentTool",
    "SubAgent",
    "ToolSpec",
    "agent_history",
    "build_spec",
    "check_agent_name",
    "check_tree",
    "delegate",
    "describe_agent",
    "ensure_agent",
    "invoke",
    "is_approved",
    "loop",
    "parallel",
    "prompt",
    "sequential",
    "spawn_agent",
    "stop_agent",
]

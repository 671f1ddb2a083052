"""``AgentTool``: an agent offered to a model as a function ``{"prompt": str}``.

Inside an agent's catalog the agent actor calls the target asynchronously by registered name (fresh invocation
history, so a restarted target is found); called directly, :meth:`AgentTool.execute` invokes it through the facade.
"""

from __future__ import annotations

from typing import Any

from adk_actors.agents.spec import AGENT_TOOL_SCHEMA, check_agent_name

__all__ = ["AgentTool"]


class AgentTool:
    """A tool that delegates to an agent.

    Attributes:
        name: The function name (default: the agent's name).
        description: What the agent does, for the model.
        agent: The target agent's registered name.
    """

    parallel_safe = True

    def __init__(self, agent: Any, *, name: str | None = None, description: str = "") -> None:
        """Wrap ``agent`` (an ``AgentRef`` or a registered agent name).

        Raises:
            AgentError: reason ``invalid_agent_name`` / ``reserved_agent_name``.
        """
        self.agent = check_agent_name(getattr(agent, "name", agent), field_name="agent")
        self.name = check_agent_name(name if name is not None else self.agent, field_name="name")
        self.description = description

    @staticmethod
    def schema_for(name: str, description: str = "") -> dict[str, Any]:
        """The function declaration of an agent tool (the reference's ``adk_agent_tool:schema/1``)."""
        return {"name": name, "description": description, "parameters": dict(AGENT_TOOL_SCHEMA)}

    def schema(self) -> dict[str, Any]:
        """The argument schema ``{"prompt": str}``."""
        return {"type": "object", "properties": dict(AGENT_TOOL_SCHEMA["properties"]), "required": ["prompt"]}

    def execute(self, args: dict[str, Any], context: Any = None) -> str | dict[str, Any]:
        """Invoke the agent with ``args["prompt"]`` (fresh history) and return its output.

        Raises:
            AdkError: whatever the invocation raises.
        """
        from adk_actors.agents.api import invoke

        output: str | dict[str, Any] = invoke(self.agent, args["prompt"])
        return output

    def __repr__(self) -> str:
        return f"AgentTool(name={self.name!r}, agent={self.agent!r})"

"""What an agent carries for an MCP tool, kept free of the ``mcp`` SDK: agents' specs travel through the node's
supervisors (which keep permanent specs), and unpickling them there must not import the SDK."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adk_actors.tools.remote import RemoteBinding

__all__ = ["McpBinding", "McpToolCall"]


@dataclass(frozen=True, slots=True, kw_only=True)
class McpToolCall:
    """An agent's call of an MCP tool from a toolset snapshot; answered with the function-response part (a dict),
    or failed with ``tool_catalog_changed`` when the tool changed since the snapshot."""

    tool: str
    """The MCP tool name."""
    function: str
    """The function name the model called (the tool name, or the toolset's prefixed name)."""
    args: dict[str, Any] = field(repr=False)
    call_id: str | None
    digest: str
    """The digest of the tool's MCP declaration in the snapshot the model was shown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpBinding(RemoteBinding):
    """An MCP tool's calls go to its connection actor."""

    def request(self, function: str, args: dict[str, Any], call_id: str | None) -> McpToolCall:
        return McpToolCall(tool=self.tool, function=function, args=args, call_id=call_id, digest=self.digest)

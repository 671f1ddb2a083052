"""Live tool execution in the worker pool: the session's allowlisted tool calls run here, never in its host.

``run_live_tool`` is the worker job of one call: it finds the tool by its exact name among the session's
configured tools (objects following the ``Tool`` protocol, or importable ``"pkg.module:name"`` paths), validates
the model's arguments against the tool's schema and runs it with a ``ToolContext`` naming the Live session and the
provider's call id. Its JSON-safe result becomes the ``functionResponse``; a failure becomes an error response
with a reason only (never the exception text).
"""

from __future__ import annotations

import importlib
from typing import Any

import cloudpickle

from adk_actors.errors import ToolError
from adk_actors.tools.base import invoke_tool_sync
from adk_actors.tools.catalog import tool_declaration
from adk_actors.tools.context import ToolContext

__all__ = ["pack_tools", "resolve_tool", "run_live_tool"]


def pack_tools(tools: tuple[Any, ...]) -> tuple[Any, ...]:
    """The session's tools as they cross processes: importable paths as they are, objects by value (cloudpickle,
    as an agent's tools travel), so a tool defined in a script's ``__main__`` runs in a worker too.

    Raises:
        ToolError: ``unpicklable_callable`` (the tool cannot be sent to another process).
    """
    packed: list[Any] = []
    for tool in tools:
        if isinstance(tool, str | bytes):
            packed.append(tool)
            continue
        try:
            packed.append(cloudpickle.dumps(tool))
        except Exception:
            raise ToolError(
                "the tool cannot be sent to another process",
                reason="unpicklable_callable",
                details={"tool": str(getattr(tool, "name", type(tool).__name__))[:128]},
            ) from None
    return tuple(packed)


def resolve_tool(tool: Any) -> Any:
    """A tool object from a tool, its cloudpickled bytes or an importable ``"pkg.module:name"`` path.

    Raises:
        ToolError: ``unknown_tool`` (the path does not import).
    """
    if isinstance(tool, bytes):
        return cloudpickle.loads(tool)
    if not isinstance(tool, str):
        return tool
    module, _, attr = tool.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError):
        raise ToolError("a Live tool path does not import", reason="unknown_tool", details={"tool": tool}) from None


def run_live_tool(tools: list[Any], name: str, args: dict[str, Any], session_id: str, call_id: str) -> Any:
    """Run the Live session's tool ``name`` on ``args`` (a worker job).

    Raises:
        ToolError: ``unknown_tool``; SchemaError: invalid arguments; whatever the tool raises.
    """
    for candidate in tools:
        tool = resolve_tool(candidate)
        if getattr(tool, "name", None) == name:
            break
    else:
        raise ToolError("no such Live tool", reason="unknown_tool", details={"tool": name})
    _, compiled = tool_declaration(tool, source="live")
    checked = compiled.validate(args)
    context = ToolContext(
        invocation_id=f"live:{session_id}", agent_name="live", function_call_id=call_id, session_id=session_id
    )
    return invoke_tool_sync(tool, checked, context)

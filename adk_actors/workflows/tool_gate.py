"""Tools called by workflows fail closed where they would need a Runner.

A workflow has no durable channel to ask a human and no continuation to resume a suspended call, so a tool whose
confirmation gate asks for approval never runs (``tool_confirmation_requires_runner``), and a tool that answers
with :func:`~adk_actors.tools.long_running` is refused (``long_running_requires_runner``) rather than taken as
its output. Used by typed ``tool`` nodes (in a worker) and by the legacy ``tool_node`` helper.
"""

from __future__ import annotations

from typing import Any

from adk_actors.errors import ToolError
from adk_actors.tools import ToolContext, confirmation_for, invoke_tool_sync
from adk_actors.tools.suspension import requires_runner, suspension_of

__all__ = ["CONFIRMATION_REASON", "LONG_RUNNING_REASON", "invoke_without_runner"]

CONFIRMATION_REASON = "tool_confirmation_requires_runner"
LONG_RUNNING_REASON = "long_running_requires_runner"


def invoke_without_runner(tool: Any, args: dict[str, Any], context: ToolContext) -> Any:
    """Run a ``Tool`` with validated ``args`` unless it needs a Runner; return its raw result.

    Raises:
        ToolError: ``tool_confirmation_requires_runner`` (the gate asked for approval: nothing ran),
            ``long_running_requires_runner`` / ``credential_requires_runner`` (the tool suspended), or the
            gate's own ``invalid_confirmation`` /
            ``confirmation_failed`` (a broken gate never lets a call through).
        Exception: whatever the tool raises.
    """
    name = str(getattr(tool, "name", "?"))[:64]
    if confirmation_for(tool, args, context).required:
        raise ToolError(
            "the tool needs confirmation, which needs a runner", reason=CONFIRMATION_REASON, details={"tool": name}
        )
    result = invoke_tool_sync(tool, args, context)
    suspension = suspension_of(result)
    if suspension is not None:
        raise requires_runner(suspension, name)
    return result

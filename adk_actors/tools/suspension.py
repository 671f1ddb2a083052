"""Long-running tool suspension: a tool returns :func:`long_running` to pause the invocation without a blocked worker.

Under a Runner the invocation pauses with ``actions.pause.reason == "long_running"``; the application reports
progress with ``Runner.update_long_running`` and finishes the call with ``Runner.resume`` (one terminal response
whose ``operation_id`` matches and whose ``status`` is ``completed``, ``failed`` or ``cancelled``). On every
other path (``prompt``, ``invoke``, delegation) there is no durable resume channel, so the call fails closed with
``long_running_requires_runner``.
"""

from __future__ import annotations

from typing import Any

from adk_actors.errors import ToolError

__all__ = ["SUSPENSION_KEY", "TERMINAL_STATUSES", "long_running", "suspension_of"]

SUSPENSION_KEY = "adk_suspension"
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
_MAX_ID_CHARS = 128
_MAX_MESSAGE_CHARS = 1024


def long_running(operation_id: str, message: str = "") -> dict[str, Any]:
    """The result a tool returns to suspend: ``operation_id`` names the external work, ``message`` is shown.

    Raises:
        ToolError: reason ``invalid_suspension`` for an empty or oversized id or message.
    """
    if not isinstance(operation_id, str) or not operation_id or len(operation_id) > _MAX_ID_CHARS:
        raise ToolError(
            "a long-running operation id is a non-empty short string",
            reason="invalid_suspension",
            details={"field": "operation_id"},
        )
    if not isinstance(message, str) or len(message) > _MAX_MESSAGE_CHARS:
        raise ToolError(
            "a long-running message is a short string", reason="invalid_suspension", details={"field": "message"}
        )
    return {SUSPENSION_KEY: "long_running", "operation_id": operation_id, "message": message}


def suspension_of(response: Any) -> dict[str, str] | None:
    """The suspension a function-response object asks for (``{"operation_id", "message"}``), or ``None``."""
    if not isinstance(response, dict) or response.get(SUSPENSION_KEY) != "long_running":
        return None
    operation_id, message = response.get("operation_id"), response.get("message", "")
    if not isinstance(operation_id, str) or not operation_id or not isinstance(message, str):
        return None
    return {"operation_id": operation_id[:_MAX_ID_CHARS], "message": message[:_MAX_MESSAGE_CHARS]}

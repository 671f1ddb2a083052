"""The ``Tool`` protocol, its optional declarations (confirmation, parallel safety, inline) and invocation.

A tool is any object with ``name``, ``description``, ``schema()`` and ``execute(args, context)``; ``execute``
may be a plain function or an ``async def`` (then it returns an awaitable). Optional members, read through the
helpers below so missing ones take their defaults:

- ``requires_confirmation: bool`` — a static human-approval gate (default ``False``);
- ``require_confirmation(args, context)`` — an argument-dependent gate that wins over the static attribute and
  returns ``False``, ``True`` or a bounded map ``{"required": bool, "hint": str}``;
- ``parallel_safe: bool`` — whether calls may run concurrently with neighbours (default ``False``);
- ``inline: bool`` — whether the runtime may run the tool inside the agent's process (default ``False``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from adk_actors.errors import ToolError
from adk_actors.tools.context import ToolContext

__all__ = [
    "MAX_HINT_CHARS",
    "Confirmation",
    "Tool",
    "confirmation_for",
    "invoke_tool",
    "invoke_tool_sync",
    "is_inline",
    "is_parallel_safe",
]

MAX_HINT_CHARS = 1024


@runtime_checkable
class Tool(Protocol):
    """A function the model may call."""

    @property
    def name(self) -> str:
        """The function name the model sees."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        ...

    def schema(self) -> dict[str, Any] | bool:
        """The JSON Schema of the arguments (object or boolean schema)."""
        ...

    def execute(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Run the tool on validated ``args``; return a JSON-safe result or an awaitable of one."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirmation:
    """Whether a call needs human approval before it runs, with an optional hint for the approver."""

    required: bool
    """Whether the call pauses for approval."""
    hint: str | None = None
    """A short, bounded hint shown to the approver."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"required": bool}`` plus ``"hint"`` when set."""
        return {"required": self.required} if self.hint is None else {"required": self.required, "hint": self.hint}


def _invalid_confirmation(detail: str) -> ToolError:
    return ToolError("invalid confirmation declaration", reason="invalid_confirmation", details={"rule": detail})


def _normalize_confirmation(raw: Any) -> Confirmation:
    if isinstance(raw, bool):
        return Confirmation(required=raw)
    if isinstance(raw, dict):
        if not set(raw) <= {"required", "hint"} or "required" not in raw:
            raise _invalid_confirmation("keys")
        required, hint = raw["required"], raw.get("hint")
        if not isinstance(required, bool):
            raise _invalid_confirmation("required")
        if hint is not None and (not isinstance(hint, str) or len(hint) > MAX_HINT_CHARS or "\x00" in hint):
            raise _invalid_confirmation("hint")
        return Confirmation(required=required, hint=hint)
    raise _invalid_confirmation("type")


def confirmation_for(tool: Any, args: dict[str, Any], context: ToolContext) -> Confirmation:
    """Evaluate a tool's confirmation gate for one validated call.

    ``require_confirmation(args, context)`` wins over the static ``requires_confirmation`` attribute.

    Raises:
        ToolError: reason ``invalid_confirmation`` (bad declaration) or ``confirmation_failed`` (the gate raised;
            ``details["type"]`` is the exception class name).
    """
    gate = getattr(tool, "require_confirmation", None)
    if callable(gate):
        try:
            raw = gate(args, context)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(
                "confirmation gate failed", reason="confirmation_failed", details={"type": type(exc).__name__}
            ) from None
        if inspect.isawaitable(raw):
            if isinstance(raw, Coroutine):
                raw.close()
            raise _invalid_confirmation("async")
        return _normalize_confirmation(raw)
    return _normalize_confirmation(getattr(tool, "requires_confirmation", False))


def is_parallel_safe(tool: Any) -> bool:
    """The tool's ``parallel_safe`` flag (``False`` when absent or not a bool)."""
    return getattr(tool, "parallel_safe", False) is True


def is_inline(tool: Any) -> bool:
    """The tool's ``inline`` flag (``False`` when absent or not a bool)."""
    return getattr(tool, "inline", False) is True


async def invoke_tool(tool: Tool, args: dict[str, Any], context: ToolContext) -> Any:
    """Run ``tool.execute`` and await its result when it is awaitable.

    Raises:
        Exception: whatever the tool raises (see :func:`adk_actors.tools.call_tool` for the model-facing path).
    """
    result = tool.execute(args, context)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _await(value: Awaitable[Any]) -> Any:
    return await value


def invoke_tool_sync(tool: Tool, args: dict[str, Any], context: ToolContext) -> Any:
    """Run ``tool.execute`` to completion from synchronous code (an ``async def`` tool runs in a new loop).

    Raises:
        ToolError: reason ``event_loop_running`` when an async tool is called from inside a running loop.
        Exception: whatever the tool raises.
    """
    result = tool.execute(args, context)
    if not inspect.isawaitable(result):
        return result
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(result))
    if isinstance(result, Coroutine):
        result.close()
    raise ToolError(
        "an async tool cannot be run synchronously inside a running event loop",
        reason="event_loop_running",
        details={"tool": getattr(tool, "name", "?")},
    )

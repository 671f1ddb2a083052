"""Tool results and failures as model-visible function responses.

A tool's result leaves the trust boundary here (it goes to the model provider and into session history), so it
is secret-pruned. A failure becomes ``{"error": {"reason", "type"}}`` — never exception text, arguments or
stack traces — so the model can react without learning anything it should not. The exception text and stack trace
of a tool that raised go to the log instead, scrubbed (:func:`adk_actors.logs.log_crash`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from adk_actors.content.parts import FunctionCallPart, FunctionResponsePart
from adk_actors.errors import AdkError, ToolError, ValidationError
from adk_actors.logs import log_crash
from adk_actors.schema import compile_schema
from adk_actors.secrets import prune_secrets
from adk_actors.tools.base import Tool, invoke_tool, invoke_tool_sync
from adk_actors.tools.context import ToolContext

__all__ = ["call_tool", "call_tool_sync", "failed_function_response", "result_payload", "tool_result_response"]

_REASON_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")


def failed_function_response(name: str, call_id: str | None, error: BaseException) -> FunctionResponsePart:
    """A function response telling the model the call failed: ``{"error": {"reason": ..., "type": ...}}``.

    An ``AdkError`` keeps its reason tag; any other exception is reported as reason ``tool_exception``. Only the
    exception's class name is included, never its message.

    Raises:
        ContentError: ``name`` or ``call_id`` is invalid.
    """
    if isinstance(error, AdkError) and _REASON_RE.fullmatch(error.reason):
        reason = error.reason
    elif isinstance(error, AdkError):
        reason = "tool_error"
    else:
        reason = "tool_exception"
    return FunctionResponsePart(
        name=name, id=call_id, response={"error": {"reason": reason, "type": type(error).__name__[:128]}}
    )


def result_payload(result: Any) -> dict[str, Any]:
    """Shape a tool result as a function-response object, secret-pruned.

    A dict is used as is; a dataclass instance becomes its fields; anything else is wrapped as
    ``{"result": value}``.

    Raises:
        ToolError: reason ``invalid_tool_result`` when the result is not JSON-safe.
    """
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        result = dataclasses.asdict(result)
    if isinstance(result, Mapping):
        payload: Any = dict(result)
    else:
        payload = {"result": result}
    pruned = prune_secrets(payload)
    if not isinstance(pruned, dict):
        raise ToolError("tool result is not JSON-safe", reason="invalid_tool_result")
    return pruned


def tool_result_response(name: str, call_id: str | None, result: Any) -> FunctionResponsePart:
    """The function response carrying a successful tool result (secret-pruned, bounded).

    Raises:
        ToolError: reason ``invalid_tool_result`` (not JSON-safe) or ``limit_exceeded`` (too large).
    """
    payload = result_payload(result)
    try:
        return FunctionResponsePart(name=name, id=call_id, response=payload)
    except ValidationError as exc:
        reason = "limit_exceeded" if exc.reason == "limit_exceeded" else "invalid_tool_result"
        raise ToolError(
            "tool result cannot be returned to the model", reason=reason, details={"rule": exc.reason}
        ) from None


def _schema_validate(tool: Tool, call: FunctionCallPart) -> dict[str, Any]:
    validated: dict[str, Any] = compile_schema(tool.schema()).validate(call.args)
    return validated


def _finish(tool: Tool, call: FunctionCallPart, result: Any) -> FunctionResponsePart:
    try:
        return tool_result_response(call.name, call.id, result)
    except ToolError as exc:
        return failed_function_response(call.name, call.id, exc)


def _raised(call: FunctionCallPart, exc: Exception) -> FunctionResponsePart:
    """A failed call's response. An exception that is not an ``AdkError`` (a bug or an unexpected failure in the
    tool, not a refusal it meant) also leaves a crash report in the log: type, scrubbed message, stack trace."""
    if not isinstance(exc, AdkError):
        log_crash("adk_actors.tools", "tool raised", exc, tool=call.name, call_id=call.id or "")
    return failed_function_response(call.name, call.id, exc)


async def call_tool(tool: Tool, call: FunctionCallPart, context: ToolContext) -> FunctionResponsePart:
    """Validate a call's arguments, run the tool and return the model-visible response; failures become failed
    function responses instead of exceptions.

    Policy and confirmation are the caller's job and happen before this. ``asyncio.CancelledError`` and other
    ``BaseException``s propagate.

    Raises:
        ContentError: only if ``call`` itself is malformed (it never is when built by this package).
    """
    try:
        args = _schema_validate(tool, call)
        result = await invoke_tool(tool, args, context)
    except Exception as exc:
        return _raised(call, exc)
    return _finish(tool, call, result)


def call_tool_sync(tool: Tool, call: FunctionCallPart, context: ToolContext) -> FunctionResponsePart:
    """Synchronous :func:`call_tool` (an ``async def`` tool runs in a fresh event loop).

    Raises:
        ContentError: only if ``call`` itself is malformed.
    """
    try:
        args = _schema_validate(tool, call)
        result = invoke_tool_sync(tool, args, context)
    except Exception as exc:
        return _raised(call, exc)
    return _finish(tool, call, result)

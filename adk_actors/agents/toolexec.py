"""Tool execution as a worker job: load the tool, check its gate, validate, run, shape the function response.

:func:`execute_tool` runs in a worker process (or inline in the agent's host for ``inline=True`` tools). It never
raises for a tool's own failure: exceptions and ``AdkError``s become failed function responses carrying only a
reason tag and an exception class name.
"""

from __future__ import annotations

from typing import Any

import cloudpickle

from adk_actors.agents.callbacks import run_hook
from adk_actors.content.json_values import copy_json
from adk_actors.content.parts import FunctionCallPart
from adk_actors.errors import AdkError, ToolError
from adk_actors.logs import log_crash
from adk_actors.models.outbound import TRACEPARENT
from adk_actors.tools import (
    ToolContext,
    call_tool_sync,
    confirmation_for,
    failed_function_response,
    tool_result_response,
)
from adk_actors.tools.context import running
from adk_actors.tools.suspension import requires_runner, suspension_of

__all__ = ["ACTIONS_KEY", "CONFIRMATION_REASON", "LONG_RUNNING_REASON", "STATE_DELTA_KEY", "check_gate", "execute_tool"]

CONFIRMATION_REASON = "tool_confirmation_requires_runner"
LONG_RUNNING_REASON = "long_running_requires_runner"


def check_gate(payload: bytes, args: dict[str, Any], call_id: str | None, context: dict[str, Any]) -> dict[str, Any]:
    """Evaluate a tool's argument-dependent confirmation gate (a worker job under a Runner).

    Returns ``{"required": bool, "hint": str}``, or ``{"error": reason}`` when the gate is malformed or raised
    (the Runner then fails the call closed: a broken gate never lets a call through).
    """
    try:
        tool = cloudpickle.loads(payload)
        gate = confirmation_for(tool, args, ToolContext(function_call_id=call_id, **context))
        return {"required": gate.required, "hint": gate.hint or ""}
    except AdkError as err:
        return {"error": err.reason}
    except Exception:
        return {"error": "confirmation_failed"}


STATE_DELTA_KEY = "adk_state_delta"
ACTIONS_KEY = "adk_actions"


def _with_delta(part: dict[str, Any], delta: dict[str, Any], control: dict[str, Any]) -> dict[str, Any]:
    """The function response plus what the tool recorded through ``tool_context.actions``: the state it wrote
    (the Runner stores it with the round's tool event; other paths have no session and drop it) and its control
    actions (``escalate``, ``transfer_to_agent``), which the agent honours on every path."""
    extra = {**({STATE_DELTA_KEY: delta} if delta else {}), **({ACTIONS_KEY: control} if control else {})}
    return {**part, **extra}


def execute_tool(
    payload: bytes,
    name: str,
    args: dict[str, Any],
    call_id: str | None,
    context: dict[str, Any],
    callbacks: list[str | bytes] | None = None,
    runner: bool = False,
) -> dict[str, Any]:
    """Run one validated tool call and return its function-response part as a dict.

    Args:
        payload: The tool object, cloudpickled.
        name: The called function name.
        args: The call's arguments (already validated by the agent).
        call_id: The provider's call id (echoed in the response).
        context: ``ToolContext`` fields (``invocation_id``, ``agent_name``, ``app_name``, ``user_id``,
            ``session_id``, ``state``: the invocation's read-only state snapshot).
        callbacks: Callback names whose ``before_tool`` / ``after_tool`` hooks wrap the call.
        runner: Under a Runner, which has evaluated the confirmation gate before this job (and resumes an approved
            call here): the gate is not evaluated again, and a :func:`~adk_actors.tools.long_running` result
            comes back as ``{"type": "suspension", "operation_id", "message"}``. Off a Runner both fail closed.
    """
    try:
        tool = cloudpickle.loads(payload)
        ctx = ToolContext(function_call_id=call_id, **context)
        if not runner and confirmation_for(tool, args, ctx).required:
            error: BaseException = ToolError(
                "the tool needs confirmation, which needs a runner", reason=CONFIRMATION_REASON
            )
            return failed_function_response(name, call_id, error).to_dict()
        private = ("state", "ancestry", "artifacts", "memory")
        view = {**{k: v for k, v in context.items() if k not in private}, "function_call_id": call_id}
        if callbacks:
            decision = run_hook(callbacks, "before_tool", [name, copy_json(args)[0], dict(view)])
            if decision["action"] == "halt":
                return tool_result_response(name, call_id, decision["value"]).to_dict()
            if decision["action"] == "replace" and isinstance(decision["value"], dict):
                args = decision["value"]
        marker = TRACEPARENT.set(ctx.traceparent)  # our HTTP clients the tool uses continue the call's trace
        try:
            with running(ctx):
                part = call_tool_sync(tool, FunctionCallPart(name=name, args=args, id=call_id), ctx)
        finally:
            TRACEPARENT.reset(marker)
        delta = dict(ctx.actions.state_delta)
        control = ctx.actions.control()
        suspension = suspension_of(part.response)
        if suspension is not None:
            if runner:
                return {"type": "suspension", **suspension}
            return failed_function_response(name, call_id, requires_runner(suspension, name)).to_dict()
        if callbacks:
            decision = run_hook(
                callbacks, "after_tool", [name, copy_json(args)[0], dict(view), copy_json(part.response)[0]]
            )
            if decision["action"] == "replace":
                return _with_delta(tool_result_response(name, call_id, decision["value"]).to_dict(), delta, control)
        return _with_delta(part.to_dict(), delta, control)
    except AdkError as err:
        return failed_function_response(name, call_id, err).to_dict()
    except Exception as exc:  # not the tool's own failure (call_tool_sync reports that): loading, context, hooks
        log_crash("adk_actors.tools", "tool job raised", exc, tool=name, call_id=call_id or "")
        return failed_function_response(name, call_id, exc).to_dict()

"""The request handlers of the MCP server: tools as stable runs, resources and prompts as bounded callbacks.

:class:`McpHandlers` holds what one :func:`~adk_actors.web.mcp_server.mcp_app` serves and answers the SDK's low-level
``Server``: ``tools/list``, ``tools/call`` (each call a stable run the node owns, awaited on the
:class:`~adk_actors.web.offload.Offload` pool and cancelled with ``runs.cancel`` whenever the call ends without its
outcome: a ``notifications/cancelled``, the session ending, the time bound), ``resources/list``/``read`` and
``prompts/list``/``get``. Tool failures are ``isError`` results ``{"error": {"reason": ...}}``; protocol failures are
``MCPError``s with ``data.reason``. Nothing here raises anything else to the SDK, which would put an exception's
text on the wire.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from adk_actors import runs
from adk_actors.errors import AdkError, AskTimeout
from adk_actors.logs import log_crash
from adk_actors.runs.logic import Cancelled, Completed, Failed, Paused
from adk_actors.runs.tool_body import ToolCallBody
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.web.mcp_spec import AGENT_SCHEMA, McpLimits, McpPrompt, McpResource, ToolEntry
from adk_actors.web.offload import Offload

__all__ = ["McpHandlers"]

_WAIT_SLICE_S = 1.0
"""How long one blocking wait for a run's outcome lasts before the waiter looks at the deadline again."""
_CANCEL_S = 5.0
"""Bound of one ``runs.cancel`` of a call that ended without its outcome."""
_TIMEOUT_SLACK_S = 10.0
"""How much longer than ``call_timeout_s`` the server waits for a run (its body times out first and says why)."""


# --- results --------------------------------------------------------------------------------------------------


def _failure(reason: str) -> types.CallToolResult:
    text = json.dumps({"error": {"reason": reason}})
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _rpc_error(code: int, message: str, reason: str) -> MCPError:
    return MCPError(code=code, message=message, data={"reason": reason})


def _agent_text(output: Any) -> str | None:
    if isinstance(output, str):
        return output
    if isinstance(output, Mapping):
        parts = output.get("parts")
        if isinstance(parts, list):
            return "".join(p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return None


def _outcome_result(entry: ToolEntry, outcome: Any, max_bytes: int) -> types.CallToolResult:
    """The ``CallToolResult`` of a run's terminal outcome."""
    if isinstance(outcome, Cancelled):
        return _failure("cancelled")
    if isinstance(outcome, Failed):
        return _failure(outcome.reason)
    if isinstance(outcome, Paused):
        return _failure("paused")  # an agent waiting for a confirmation MCP has no way to give
    if not isinstance(outcome, Completed):
        return _failure("unknown_outcome")
    structured: dict[str, Any] | None = None
    if entry.agent:
        text = _agent_text(outcome.output)
        if text is None:
            return _failure("invalid_agent_output")
    else:
        value = outcome.output
        if not isinstance(value, Mapping) or not isinstance(value.get("ok"), bool):
            return _failure("invalid_tool_result")
        if not value["ok"]:
            error = value.get("error")
            reason = error.get("reason") if isinstance(error, Mapping) else None
            return _failure(reason if isinstance(reason, str) else "tool_error")
        structured = dict(value.get("result") or {})
        only = structured.get("result")
        if len(structured) != 1 or "result" not in structured:
            text = json.dumps(structured)
        else:  # a scalar result reads as itself, as the official server writes it
            text = only if isinstance(only, str) else json.dumps(only)
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        return _failure("result_too_large")
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured, is_error=False
    )


def _prompt_message(raw: Any) -> Any:
    if isinstance(raw, Mapping) and isinstance(raw.get("content"), str):
        return {**raw, "content": {"type": "text", "text": raw["content"]}}
    return raw


# --- the MCP handlers -----------------------------------------------------------------------------------------


class _Calls:
    """A counter of tool calls in flight on the whole server, with a fixed limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        with self._lock:
            if self.used >= self.limit:
                return False
            self.used += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.used = max(0, self.used - 1)


class McpHandlers:
    """The request handlers of the SDK's low-level ``Server`` for one :func:`mcp_app`."""

    def __init__(
        self,
        system: ActorSystemHandle,
        *,
        tools: dict[str, ToolEntry],
        resources: dict[str, McpResource],
        prompts: dict[str, McpPrompt],
        limits: McpLimits,
        offload: Offload,
        sessions: Any,
        app_name: str,
        user_id: str,
    ) -> None:
        self.system = system
        self.tools = tools
        self.resources = resources
        self.prompts = prompts
        self.limits = limits
        self.offload = offload
        self.calls = _Calls(limits.max_concurrent_calls)
        self._sessions = sessions
        self.app_name = app_name
        self.user_id = user_id
        self.started: list[str] = []
        """Run ids of the calls started, newest last (at most 256 kept; for diagnostics and tests)."""

    # tools

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        listed = [
            types.Tool(name=e.name, description=e.description or None, input_schema=e.schema)
            for e in self.tools.values()
        ]
        return types.ListToolsResult(tools=listed)

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        entry = self.tools.get(params.name)
        if entry is None:
            raise _rpc_error(types.INVALID_PARAMS, "Unknown tool", "unknown_tool")
        arguments = dict(params.arguments or {})
        try:
            body = self._body(entry, arguments)
        except AdkError as err:
            return _failure(err.reason)
        if not self.calls.try_acquire():
            return _failure("server_busy")
        try:
            return await self._run(entry, body)
        finally:
            self.calls.release()

    def _body(self, entry: ToolEntry, arguments: dict[str, Any]) -> Any:
        """What to start for one call (validated here, so a bad call starts nothing)."""
        from adk_actors.schema import compile_schema

        if entry.agent:
            compile_schema(dict(AGENT_SCHEMA)).validate(arguments)
            return arguments["prompt"]
        compile_schema(entry.schema).validate(arguments)
        return ToolCallBody(tool=entry.tool, args=arguments, timeout_s=self.limits.call_timeout_s)

    def _start(self, entry: ToolEntry, body: Any) -> str:
        """Start the call's run (blocking; on the offload pool)."""
        if not entry.agent:
            return runs.start(body, system=self.system)
        from adk_actors.runner import Runner

        if self._sessions is None:
            from adk_actors.node import session_service

            self._sessions = session_service(system=self.system)
        session = self._sessions.create_session(app_name=self.app_name, user_id=self.user_id)
        runner = Runner(
            entry.agent,
            self.app_name,
            self._sessions,
            system=self.system,
            run_timeout=int(self.limits.call_timeout_s * 1000),
        )
        return runs.start(runner, self.user_id, session.id, body, system=self.system)

    def _wait_slice(self, run_id: str) -> Any:
        try:
            return runs.wait(run_id, _WAIT_SLICE_S, system=self.system)
        except AskTimeout:
            return None

    def _cancel(self, run_id: str, reason: str) -> None:
        try:
            runs.cancel(run_id, reason, system=self.system, timeout=_CANCEL_S)
        except AdkError:
            pass  # already gone: nothing left to stop

    async def _run(self, entry: ToolEntry, body: Any) -> types.CallToolResult:
        try:
            # Shielded: a call cancelled while its run is being started still learns the run id, and so cancels it.
            with anyio.CancelScope(shield=True):
                run_id = await self.offload.call(self._start, entry, body)
        except AdkError as err:
            return _failure(err.reason)
        self.started = [*self.started[-255:], run_id]
        deadline = time.monotonic() + self.limits.call_timeout_s + _TIMEOUT_SLACK_S
        settled = False
        try:
            while True:
                outcome = await self.offload.call(self._wait_slice, run_id)
                if outcome is not None:
                    settled = True
                    return _outcome_result(entry, outcome, self.limits.max_result_bytes)
                if time.monotonic() > deadline:
                    return _failure("call_timeout")
        except AdkError as err:
            return _failure(err.reason)
        finally:
            if not settled:
                # The client cancelled, the session ended, the call timed out or the wait failed: the run must not
                # outlive the call that started it.
                with anyio.CancelScope(shield=True):
                    with contextlib.suppress(Exception):
                        await self.offload.call(self._cancel, run_id, "mcp_call_ended")

    # resources

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        listed = [
            types.Resource(uri=r.uri, name=r.name, mime_type=r.mime_type, description=r.description or None)
            for r in self.resources.values()
        ]
        return types.ListResourcesResult(resources=listed)

    async def _callback(self, fn: Callable[..., Any], *args: Any, what: str) -> Any:
        try:
            return await asyncio.wait_for(self.offload.call(fn, *args), self.limits.callback_timeout_s)
        except TimeoutError:
            raise _rpc_error(types.INTERNAL_ERROR, f"the {what} callback timed out", "callback_timeout") from None
        except AdkError as err:
            raise _rpc_error(types.INTERNAL_ERROR, f"the {what} callback failed", err.reason) from None
        except Exception as exc:
            log_crash("adk_actors.web", "mcp_callback_failed", exc, callback=what)
            raise _rpc_error(types.INTERNAL_ERROR, f"the {what} callback failed", "callback_failed") from None

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        resource = self.resources.get(str(params.uri))
        if resource is None:
            raise _rpc_error(-32002, "Resource not found", "resource_not_found")
        value = await self._callback(resource.read, what="resource")
        if isinstance(value, str):
            size = len(value.encode("utf-8", "surrogatepass"))
            contents: Any = types.TextResourceContents(uri=resource.uri, mime_type=resource.mime_type, text=value)
        elif isinstance(value, bytes | bytearray):
            size = len(value)
            blob = base64.b64encode(bytes(value)).decode("ascii")
            contents = types.BlobResourceContents(uri=resource.uri, mime_type=resource.mime_type, blob=blob)
        else:
            raise _rpc_error(types.INTERNAL_ERROR, "a resource reads as str or bytes", "invalid_resource_content")
        if size > self.limits.max_result_bytes:
            raise _rpc_error(types.INTERNAL_ERROR, "the resource is too large", "result_too_large")
        return types.ReadResourceResult(contents=[contents])

    # prompts

    async def list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        listed = [
            types.Prompt(
                name=p.name,
                description=p.description or None,
                arguments=[
                    types.PromptArgument(name=a["name"], required=a["required"], description=a["description"] or None)
                    for a in p.arguments
                ],
            )
            for p in self.prompts.values()
        ]
        return types.ListPromptsResult(prompts=listed)

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        prompt = self.prompts.get(params.name)
        if prompt is None:
            raise _rpc_error(types.INVALID_PARAMS, "Unknown prompt", "unknown_prompt")
        given = dict(params.arguments or {})
        declared = {a["name"] for a in prompt.arguments}
        if any(name not in declared for name in given):
            raise _rpc_error(types.INVALID_PARAMS, "the prompt has no such argument", "unknown_argument")
        for arg in prompt.arguments:
            if arg["required"] and arg["name"] not in given:
                raise _rpc_error(types.INVALID_PARAMS, "a required prompt argument is missing", "missing_argument")
        raw = await self._callback(prompt.get, given, what="prompt")
        shaped = dict(raw) if isinstance(raw, Mapping) else {"messages": raw}
        if not isinstance(shaped.get("messages"), list) or not set(shaped) <= {"messages", "description"}:
            raise _rpc_error(types.INTERNAL_ERROR, "a prompt returns its messages", "invalid_prompt_result")
        shaped["messages"] = [_prompt_message(m) for m in shaped["messages"]]
        try:
            result = types.GetPromptResult.model_validate(shaped)
        except Exception:
            raise _rpc_error(types.INTERNAL_ERROR, "a prompt returns its messages", "invalid_prompt_result") from None
        if len(result.model_dump_json(by_alias=True).encode()) > self.limits.max_result_bytes:
            raise _rpc_error(types.INTERNAL_ERROR, "the prompt is too large", "result_too_large")
        return result

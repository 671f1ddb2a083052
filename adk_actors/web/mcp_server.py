"""The MCP server: chosen tools, agents, resources and prompts of a node over MCP 2025-11-25 Streamable HTTP.

:func:`mcp_app` builds the surface as a plain ASGI app serving the MCP endpoint (``/mcp``): mount it in your own
Starlette/FastAPI service (enter :meth:`McpApp.lifespan` in yours) or serve it with
:func:`~adk_actors.web.serve.start_in_thread` / :func:`~adk_actors.web.serve.run_server`. The protocol machinery
(JSON-RPC, the ``initialize`` handshake, sessions, SSE answers to POST, cancellation) is the official ``mcp`` SDK's
low-level ``Server`` behind its ``StreamableHTTPSessionManager``; this module chooses its bounds and puts our edge in
front of it (descriptors and bounds: :mod:`~adk_actors.web.mcp_spec`; the handlers:
:mod:`~adk_actors.web.mcp_handlers`). The server is a facade client: it holds no domain data, and every tool call is
a stable run the node owns (:class:`~adk_actors.runs.tool_body.ToolCallBody` in the worker pool for a tool, one
Runner invocation in a fresh session for an agent), awaited off the event loop and cancelled (``runs.cancel``) when
the client sends ``notifications/cancelled``, deletes its session, drops the connection before its answer (SSE mode),
or the session ends while the call runs.

What a request meets, outermost first:

1. a ``Host`` that is not loopback (``127.0.0.0/8``, ``localhost``, ``[::1]``) or one of ``allowed_hosts`` — 421
   ``misdirected_host`` (DNS-rebinding protection); an ``Origin`` listed in ``allowed_origins`` is accepted here;
2. the :class:`~adk_actors.web.edge.EdgeGuard`: header bounds (431), a credential in the query (400), the bearer
   token (401 ``unauthorized``, the same for a missing and a wrong token; compared as SHA-256 digests in constant
   time), any other foreign ``Origin`` (403 ``cross_origin``), the body bound (413 ``body_too_large``);
3. the endpoint: ``GET`` (the optional server-to-client stream) and other methods — 405 (no standalone stream, so
   nothing to resume: the reference's choice); an ``MCP-Protocol-Version`` header other than ``2025-11-25`` /
   ``2025-06-18`` — 400 ``unsupported_protocol_version`` (this is what makes the official client's ``server/discover``
   probe of 2026-07-28 fall back to the handshake at once); a body that is not ``application/json`` (415), not one
   strict JSON value (400, JSON-RPC -32700) or not one JSON-RPC 2.0 message (400, -32600; batches included); a
   request without ``MCP-Session-Id`` that is not ``initialize`` (400 ``missing_session``); more than
   ``max_inflight_per_session`` requests of one session at once (429 ``too_many_requests``);
4. the SDK's session manager: an unknown or ended session — 404; more than ``max_sessions`` sessions — 503 (a new
   session is refused, open ones are unaffected); a session idle for ``session_ttl_s`` ends (then 404). Each session
   is bound to its principal (the SHA-256 of the bearer token that opened it): another principal gets the 404 of an
   unknown session. ``DELETE`` ends a session.

Version negotiation: ``initialize`` asking for 2025-11-25 or 2025-06-18 gets that version; any other requested
version is answered with 2025-11-25. Refusals of steps 3–4 are JSON-RPC error bodies whose ``error`` also carries
the edge's ``reason`` where we made them; messages are fixed and nothing from the request is echoed.

Bounds (:class:`McpLimits`): sessions, session idle TTL, in-flight requests per session, tool calls in flight on
the whole server (one more is answered ``isError`` with reason ``server_busy``), request body bytes, result bytes
(a tool or agent result, a resource, a prompt: over it, ``result_too_large``), the time of one tool call
(``call_timeout``: the run is cancelled) and of one resource or prompt callback (``callback_timeout``). The SDK
bounds each request's queued SSE messages (16) and answers every POST with its own SSE stream that ends with the
response.

Tool failures are results with ``isError: true`` and one text block ``{"error": {"reason": ...}}`` (the tool's reason
tag or the run's failure reason; never exception text, secrets or tracebacks). Protocol failures (unknown tool,
resource or prompt, a missing prompt argument, a failing callback) are JSON-RPC errors with ``data.reason``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import fields
from typing import Any

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from adk_actors.errors import ConfigError
from adk_actors.logs import log_crash
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.web.edge import (
    DevToken,
    EdgeGuard,
    EdgeLimits,
    error_response,
    host_header_name,
    is_loopback_name,
    strict_json,
)
from adk_actors.web.mcp_handlers import McpHandlers
from adk_actors.web.mcp_spec import (
    MAX_ITEMS,
    MCP_LIMIT_BOUNDS,
    McpLimits,
    McpPrompt,
    McpResource,
    check_hosts,
    check_items,
    check_origins,
    check_text,
    config_error,
    prompt_specs,
    resource_specs,
    tool_entries,
)
from adk_actors.web.offload import Offload

__all__ = [
    "LATEST_VERSION",
    "MCP_LIMIT_BOUNDS",
    "MCP_PATH",
    "SUPPORTED_VERSIONS",
    "McpApp",
    "McpLimits",
    "McpPrompt",
    "McpResource",
    "mcp_app",
]

MCP_PATH = "/mcp"
"""The default path of the MCP endpoint."""
LATEST_VERSION = "2025-11-25"
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18")
"""The protocol revisions served; ``initialize`` asking for anything else is answered with :data:`LATEST_VERSION`."""
_CANCEL_S = 5.0
"""Bound of delivering a cancellation for a client that went away."""


# --- the HTTP front -------------------------------------------------------------------------------------------

_MESSAGES: Mapping[str, str] = {
    "unsupported_protocol_version": "unsupported MCP-Protocol-Version (this server speaks 2025-11-25 and 2025-06-18)",
    "invalid_json": "the body is not valid JSON",
    "invalid_message": "the body must be one JSON-RPC 2.0 message",
    "missing_session": "an MCP-Session-Id header is required (initialize first)",
    "too_many_requests": "too many requests in flight on this session",
    "unsupported_media_type": "the body must be application/json",
    "method_not_allowed": "this endpoint takes POST and DELETE (no server-to-client stream)",
}


def _rpc_refusal(
    status: int, reason: str, *, code: int = types.INVALID_REQUEST, headers: Mapping[str, str] | None = None
) -> Response:
    """A refusal as a JSON-RPC error without id whose ``error`` is also the edge's error object."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": _MESSAGES[reason], "reason": reason}}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def _message_kind(message: Any) -> str | None:
    """``"request"``, ``"notification"`` or ``"response"`` for one well-formed JSON-RPC 2.0 message, else ``None``."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    has_id = "id" in message
    ident = message.get("id")
    if has_id and (isinstance(ident, bool) or not isinstance(ident, str | int)):
        return None
    if "method" in message:
        method = message["method"]
        params = message.get("params", {})
        if not isinstance(method, str) or not 0 < len(method) <= 256 or not isinstance(params, dict):
            return None
        if set(message) - {"jsonrpc", "id", "method", "params"}:
            return None
        return "request" if has_id else "notification"
    if has_id and (("result" in message) != ("error" in message)):
        return "response"
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that first hands out the already-read ``body``, then waits on the real one (for a disconnect)."""
    pending = True

    async def replayed() -> Any:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _principal(headers: Headers) -> AuthenticatedUser:
    """The SDK's user for the bearer token the guard accepted: its SHA-256, never the token itself."""
    raw = headers.get("authorization", "").strip().split(" ")[-1]
    digest = hashlib.sha256(raw.encode("latin-1")).hexdigest()
    return AuthenticatedUser(AccessToken(token=digest, client_id=f"bearer-sha256:{digest}", scopes=[]))


class _Endpoint:
    """The MCP endpoint in front of the SDK's session manager (step 3 of the module docstring)."""

    def __init__(self, manager: StreamableHTTPSessionManager, limits: McpLimits) -> None:
        self.manager = manager
        self.limits = limits
        self.inflight: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method", "")
        headers = Headers(scope=scope)
        if method not in ("POST", "DELETE"):
            await _rpc_refusal(405, "method_not_allowed", headers={"allow": "POST, DELETE"})(scope, receive, send)
            return
        version = headers.getlist("mcp-protocol-version")
        if len(version) > 1 or (version and version[0] not in SUPPORTED_VERSIONS):
            await _rpc_refusal(400, "unsupported_protocol_version")(scope, receive, send)
            return
        scope = {**scope, "user": _principal(headers)}
        if method == "DELETE":
            await self.manager.handle_request(scope, receive, send)
            return
        session = headers.get("mcp-session-id")
        media = headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != "application/json":
            await _rpc_refusal(415, "unsupported_media_type")(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.limits.max_body_bytes:
                await error_response(413, "body_too_large", max_bytes=self.limits.max_body_bytes)(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        try:
            parsed = strict_json(bytes(body))
        except (ValueError, RecursionError):
            await _rpc_refusal(400, "invalid_json", code=types.PARSE_ERROR)(scope, receive, send)
            return
        kind = _message_kind(parsed)
        if kind is None:
            await _rpc_refusal(400, "invalid_message")(scope, receive, send)
            return
        if session is None:
            if kind != "request" or parsed["method"] != "initialize":
                await _rpc_refusal(400, "missing_session")(scope, receive, send)
                return
            params = parsed.get("params") or {}
            if params.get("protocolVersion") not in SUPPORTED_VERSIONS:
                # Negotiation: a version we do not speak is answered with our latest (the SDK would otherwise
                # accept the older handshake revisions it knows).
                parsed["params"] = {**params, "protocolVersion": LATEST_VERSION}
                body = bytearray(json.dumps(parsed).encode("utf-8"))
        if kind != "request" or session is None:
            await self.manager.handle_request(scope, _replay(bytes(body), receive), send)
            return
        if self.inflight.get(session, 0) >= self.limits.max_inflight_per_session:
            await _rpc_refusal(429, "too_many_requests")(scope, receive, send)
            return
        self.inflight[session] = self.inflight.get(session, 0) + 1
        answered = False

        async def watched(message: Message) -> None:
            nonlocal answered
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True

        try:
            await self.manager.handle_request(scope, _replay(bytes(body), receive), watched)
        finally:
            left = self.inflight.pop(session, 1) - 1
            if left > 0:
                self.inflight[session] = left
            if not answered:
                # The client went away before its answer: a dropped connection is not a cancellation in MCP, but
                # the work it asked for must not outlive it, so the session is told as if the client had cancelled.
                with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_S):
                    await self._cancel_request(scope, parsed["id"])

    async def _cancel_request(self, scope: Scope, request_id: Any) -> None:
        """Deliver ``notifications/cancelled`` for ``request_id`` to the session of ``scope`` (answer discarded)."""
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "client disconnected"},
        }
        body = json.dumps(note).encode("utf-8")
        kept = [(k, v) for k, v in scope["headers"] if k.lower() not in (b"content-length", b"accept")]
        headers = [*kept, (b"accept", b"application/json, text/event-stream"), (b"content-length", b"%d" % len(body))]
        delivered = False

        async def receive() -> Message:
            nonlocal delivered
            if delivered:
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def discard(message: Message) -> None:
            return None

        await self.manager.handle_request({**scope, "headers": headers}, receive, discard)


def _route_path(scope: Scope) -> str:
    """The request's path inside this app (without the prefix of a ``Mount`` it sits in)."""
    full, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    return full[len(root) :] if root and full.startswith(root) else full


class McpApp:
    """The ASGI app :func:`mcp_app` returns: the MCP endpoint behind the edge.

    Served on its own, the ASGI lifespan starts and stops the session manager. Mounted in another app, enter
    :meth:`lifespan` in that app's lifespan (``Starlette(..., lifespan=lambda app: mcp.lifespan())``).
    """

    def __init__(
        self,
        guard: EdgeGuard,
        manager: StreamableHTTPSessionManager,
        handlers: McpHandlers,
        offload: Offload,
        *,
        allowed_hosts: frozenset[str],
        allowed_origins: frozenset[str],
        owns_offload: bool,
    ) -> None:
        self.guard = guard
        self.session_manager = manager
        """The SDK's session manager (sessions, idle expiry, the session bound)."""
        self.handlers = handlers
        self.offload = offload
        self.allowed_hosts = allowed_hosts
        self.allowed_origins = allowed_origins
        self._owns_offload = owns_offload
        self._running = False

    @property
    def started_runs(self) -> list[str]:
        """The run ids of the latest tool calls (at most 256), oldest first."""
        return list(self.handlers.started)

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the session manager (once; a nested entry does nothing) and close the pool afterwards."""
        if self._running:
            yield
            return
        self._running = True
        try:
            async with self.session_manager.run():
                yield
        finally:
            if self._owns_offload:
                await asyncio.get_running_loop().run_in_executor(None, self.offload.close)

    def _host_ok(self, headers: Headers) -> bool:
        hosts = headers.getlist("host")
        if len(hosts) != 1:
            return False
        name = host_header_name(hosts[0])
        return bool(name) and (is_loopback_name(name) or name in self.allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})  # MCP has no WebSocket transport
            return
        headers = Headers(scope=scope)
        if not self._host_ok(headers):
            await error_response(421, "misdirected_host", message="the Host header names no server of this edge")(
                scope, receive, send
            )
            return
        origins = headers.getlist("origin")
        if len(origins) == 1 and origins[0].lower() in self.allowed_origins:
            # Accepted here; the guard's own check would refuse an origin other than the server's own.
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() != b"origin"]}
        await self.guard(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":  # pragma: no cover - the ASGI server always starts first
            return
        try:
            async with self.lifespan():
                await send({"type": "lifespan.startup.complete"})
                await receive()  # lifespan.shutdown
        except Exception as exc:
            log_crash("adk_actors.web", "mcp_lifespan_failed", exc)
            await send({"type": "lifespan.shutdown.failed", "message": "the MCP server failed"})
            return
        await send({"type": "lifespan.shutdown.complete"})


def mcp_app(
    system: ActorSystemHandle,
    *,
    token: DevToken | str,
    tools: Sequence[Any] = (),
    agents: Sequence[Any] = (),
    resources: Sequence[Any] = (),
    prompts: Sequence[Any] = (),
    limits: McpLimits | None = None,
    allowed_origins: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
    server_name: str = "adk_actors",
    server_version: str | None = None,
    instructions: str | None = None,
    path: str = MCP_PATH,
    json_response: bool = False,
    app_name: str = "mcp",
    user_id: str = "mcp",
    sessions: Any = None,
    offload: Offload | None = None,
    edge_limits: EdgeLimits | None = None,
) -> McpApp:
    """An MCP 2025-11-25 Streamable HTTP server at ``path`` for ``system``, as an ASGI app (see the module docstring).

    Args:
        system: the node (attached or owned).
        token: the bearer token every request must carry (a :class:`DevToken`, or the raw token: at least 16 bytes
            of visible ASCII; only its SHA-256 is kept).
        tools: tool values (e.g. :class:`~adk_actors.tools.FunctionTool`; picklable, they run in the worker pool).
        agents: registered agent names or ``AgentRef``s; each is a tool taking ``{"prompt": str}`` and returning the
            agent's answer text (one Runner invocation in a fresh session of ``app_name``/``user_id``).
        resources: :class:`McpResource` values or mappings with the same keys.
        prompts: :class:`McpPrompt` values or mappings with the same keys.
        limits: the server's bounds (default :class:`McpLimits`).
        allowed_origins: browser origins (``scheme://host[:port]``) accepted besides the server's own.
        allowed_hosts: ``Host`` names accepted besides loopback (for a deliberate non-loopback bind).
        server_name, server_version, instructions: what ``initialize`` reports.
        path: the endpoint's path.
        json_response: answer each POST with one JSON body instead of an SSE stream.
        app_name, user_id: where agent calls keep their sessions.
        sessions: the session service of agent calls (default: the node's).
        offload: the thread pool for facade calls and callbacks (default: one sized for ``max_concurrent_calls``,
            closed with the app).
        edge_limits: the guard's header bounds (its body bound is ``limits.max_body_bytes``).

    Raises:
        ConfigError: a descriptor or setting is invalid — reasons ``invalid_descriptor``, ``invalid_tool_name``,
            ``invalid_tool_schema``, ``unpicklable_tool``, ``duplicate_name``, ``invalid_uri``,
            ``invalid_mime_type``, ``invalid_prompt_name``, ``unknown_key``, ``too_many``, ``invalid_value``, and
            ``weak_token`` / ``invalid_token`` / ``missing_token`` for the token (never shown).
    """
    if token is None:
        raise ConfigError("the MCP server needs a bearer token", reason="missing_token")
    bearer = token if isinstance(token, DevToken) else DevToken(token)
    limits = limits if limits is not None else McpLimits()
    if not isinstance(limits, McpLimits):
        raise config_error("limits must be McpLimits", "invalid_value", key="limits")
    if not isinstance(path, str) or not re.fullmatch(r"/[A-Za-z0-9_./-]{0,127}", path):
        raise config_error("path is an absolute URL path", "invalid_value", key="path")
    for key, value in (("server_name", server_name), ("app_name", app_name), ("user_id", user_id)):
        check_text(value, key, max_chars=128, allow_empty=False)
    if not isinstance(json_response, bool):
        raise config_error("json_response must be a bool", "invalid_value", key="json_response")
    entries = tool_entries(check_items(tools, "tools"), check_items(agents, "agents"))
    if len(entries) > MAX_ITEMS:
        raise config_error(f"at most {MAX_ITEMS} tools and agents", "too_many", key="tools", maximum=MAX_ITEMS)
    found_resources = resource_specs(check_items(resources, "resources"))
    found_prompts = prompt_specs(check_items(prompts, "prompts"))
    hosts, origins = check_hosts(allowed_hosts), check_origins(allowed_origins)
    if server_version is None:
        from adk_actors import __version__ as server_version
    version = check_text(server_version, "server_version", max_chars=64, allow_empty=False)
    if instructions is not None:
        check_text(instructions, "instructions", max_chars=16_384)
    base = edge_limits or EdgeLimits()
    if not isinstance(base, EdgeLimits):
        raise config_error("edge_limits must be EdgeLimits", "invalid_value", key="edge_limits")
    guard_limits = EdgeLimits(
        **{f.name: getattr(base, f.name) for f in fields(EdgeLimits) if f.name != "max_body_bytes"},
        max_body_bytes=limits.max_body_bytes,
    )
    pool = offload or Offload(max_workers=min(256, limits.max_concurrent_calls + 16), max_pending=1024)
    handlers = McpHandlers(
        system,
        tools=entries,
        resources=found_resources,
        prompts=found_prompts,
        limits=limits,
        offload=pool,
        sessions=sessions,
        app_name=app_name,
        user_id=user_id,
    )
    server: Server[Any] = Server(
        server_name,
        version=version,
        instructions=instructions,
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        on_list_resources=handlers.list_resources,
        on_read_resource=handlers.read_resource,
        on_list_prompts=handlers.list_prompts,
        on_get_prompt=handlers.get_prompt,
    )
    manager = StreamableHTTPSessionManager(
        server,
        json_response=json_response,
        # Host and Origin are checked in front (McpApp, EdgeGuard) with our error shape.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=limits.session_ttl_s,
        max_request_body_size=limits.max_body_bytes,
        max_sessions=limits.max_sessions,
    )
    endpoint = _Endpoint(manager, limits)

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _route_path(scope) == path:
            await endpoint(scope, receive, send)
            return
        await error_response(404, "not_found")(scope, receive, send)

    guard = EdgeGuard(route, token=bearer, limits=guard_limits)
    return McpApp(
        guard,
        manager,
        handlers,
        pool,
        allowed_hosts=hosts,
        allowed_origins=origins,
        owns_offload=offload is None,
    )

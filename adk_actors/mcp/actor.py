"""The MCP connection actor: one tier-2 actor per client connection (``temporary``, as in the reference).

Independent connections share no mailbox and no failure domain. The actor owns the connection (and, for stdio,
its server process): it drives the SDK session on the host's MCP loop through the host's I/O threads
(``io_call``), so every request has the caller's deadline and is cancelled (``notifications/cancelled``) when the
deadline passes. When the connection closes — ``close()``, the server exiting or breaking the protocol, the actor
stopping or crashing — the server process is stopped; when the whole host process dies, the kernel kills it
(``PR_SET_PDEATHSIG``). A connection that is closed stops its actor: a ``temporary`` child is never restarted, so a
connection never silently comes back as a different session.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from adk_actors.errors import AdkError, AskTimeout, McpError, ToolError
from adk_actors.mcp import loop
from adk_actors.mcp.core import Connection, connection_label, declaration_digest
from adk_actors.mcp.messages import AwaitReady, ConnectArgs, McpClose, McpRequest, McpStatus, McpToolCall
from adk_actors.mcp.results import function_response
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer
from adk_actors.tools.remote import CancelRemoteCall

__all__ = ["McpConnectionActor"]


async def _open(conn: Connection) -> dict[str, Any]:
    return await conn.open()


async def _request(conn: Connection, op: str, params: dict[str, Any], timeout: float) -> Any:
    return await conn.request(op, params, timeout)


async def _close(conn: Connection) -> None:
    await conn.close()


async def _ended(conn: Connection) -> str:
    return await conn.wait_closed()


_OPEN, _REQUEST, _CLOSE, _ENDED = (loop.on_loop(f) for f in (_open, _request, _close, _ended))
_WATCH_S = 365 * 86400.0
"""The deadline of the watch on the session's end (a completion: it holds no thread, only a timer)."""


class McpConnectionActor(GenServer):
    """Owns one MCP client connection."""

    def init(self, args: Any) -> Any:
        if not isinstance(args, ConnectArgs):
            raise McpError("an MCP connection needs ConnectArgs", reason="invalid_request")
        self.args = args
        self.conn = Connection(args.options)
        self.init_result: dict[str, Any] | None = None
        self.waiting: list[CallCtx] = []
        self.in_flight = 0
        self.calls = 0
        self.digests: dict[str, str] = {}
        self.closing = False
        self.label = args.options.name
        self._exit_reason: str | None = None
        self.requests: dict[str, int] = {}
        """In-flight requests: the asker's call id -> the I/O call (so ``CancelRemoteCall`` can cancel it)."""
        deadline = time.monotonic() + args.options.connect_timeout_s + 1.0
        self.io_call(
            _OPEN,  # type: ignore[arg-type]
            (self.conn,),
            deadline,
            self._opened,
        )
        return None

    # ---- handshake ----------------------------------------------------------------------------------------------
    def _opened(self, value: Any, error: AdkError | None) -> None:
        if error is not None:
            if isinstance(error, AskTimeout):
                error = McpError(
                    "the MCP handshake passed its deadline", reason="mcp_timeout", details={"op": "initialize"}
                )
            for ctx in self.waiting:
                self.fail(ctx, error)
            self.waiting = []
            self.stop("mcp_connect_failed")
            return
        self.init_result = value
        self.label = connection_label(self.conn.options, value)
        self.io_call(_ENDED, (self.conn,), time.monotonic() + _WATCH_S, self._ended)  # type: ignore[arg-type]
        for ctx in self.waiting:
            self.reply(ctx, value)
        self.waiting = []

    def _ended(self, value: Any, error: AdkError | None) -> None:
        """The session ended: by ``close()`` (the close handler stops us), or on its own — the server exited, broke
        the protocol or sent an oversize message — and then this actor stops (its server is already stopped)."""
        if not self.closing and self._exit_reason is None:
            self._exit_reason = str(value) if error is None else "mcp_connection_closed"
            self.stop(self._exit_reason)

    # ---- calls --------------------------------------------------------------------------------------------------
    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, AwaitReady):
            if self.init_result is None:
                self.waiting.append(ctx)
                return DEFERRED
            return self.init_result
        if isinstance(request, McpStatus):
            return self.full_status()
        if isinstance(request, McpClose):
            self._close(ctx)
            return DEFERRED
        if isinstance(request, McpToolCall):
            self._tool_call(request, ctx)
            return DEFERRED
        if isinstance(request, McpRequest):
            self._start(request.op, request.params, request.timeout_s, ctx, None)
            return DEFERRED
        return super().handle_call(request, ctx)

    def _usable(self, op: str) -> None:
        if self.init_result is None or self.closing:
            raise McpError("the MCP connection is not open", reason="mcp_connection_closed", details={"op": op})
        if self.in_flight >= self.args.max_in_flight:
            raise McpError(
                "too many MCP requests in flight on this connection",
                reason="mcp_overloaded",
                details={"max_in_flight": self.args.max_in_flight},
            )

    def _tool_call(self, request: McpToolCall, ctx: CallCtx) -> None:
        if self.conn.catalog_changed or self.digests.get(request.tool) != request.digest:
            raise ToolError(
                "the MCP server's tool catalog changed since the snapshot: refresh() the toolset",
                reason="tool_catalog_changed",
                details={"tool": request.function[:128], "toolset": self.label},
            )

        def shaped(raw: dict[str, Any]) -> dict[str, Any]:
            return function_response(request.function, request.call_id, raw)

        self._start("call_tool", {"name": request.tool, "arguments": request.args}, None, ctx, shaped)

    def _start(self, op: str, params: dict[str, Any], timeout: float | None, ctx: CallCtx, shape: Any) -> None:
        self._usable(op)
        remaining = ctx.deadline - time.monotonic()
        limit = self.conn.options.request_timeout_s if timeout is None else timeout
        limit = max(0.001, min(limit, remaining))
        self.in_flight += 1
        self.calls += 1

        def done(value: Any, error: AdkError | None) -> None:
            self.in_flight -= 1
            self.requests.pop(ctx.call_id, None)
            if error is None and op == "list_tools":
                self.digests = {t.get("name", ""): declaration_digest(t) for t in value if isinstance(t, dict)}
            if error is None and shape is not None:
                try:
                    value = shape(value)
                except AdkError as err:
                    value, error = None, err
            if isinstance(error, AskTimeout):
                error = McpError("the MCP request passed its deadline", reason="mcp_timeout", details={"op": op})
            if error is not None:
                self.fail(ctx, error)
            else:
                self.reply(ctx, value)
            if self.conn.closed and not self.closing and self._exit_reason is None:
                self._exit_reason = "mcp_connection_closed"
                self.stop(self._exit_reason)

        io_id = self.io_call(
            _REQUEST,  # type: ignore[arg-type]
            (self.conn, op, params, limit),
            time.monotonic() + limit + 0.5,
            done,
        )
        self.requests[ctx.call_id] = io_id

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, CancelRemoteCall):
            io_id = self.requests.get(message.call_id)
            if io_id is not None:
                self.cancel_io(io_id)  # the SDK sends notifications/cancelled for the abandoned request
            return
        super().handle_info(message, sender)

    def _close(self, ctx: CallCtx) -> None:
        self.closing = True

        def closed(_value: Any, _error: AdkError | None) -> None:
            self.reply(ctx, "closed")
            self.stop("normal")

        self.io_call(
            _CLOSE,  # type: ignore[arg-type]
            (self.conn,),
            time.monotonic() + 15.0,
            closed,
        )

    # ---- introspection and exit ---------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        o = self.conn.options
        init = self.init_result or {}
        info = self.conn.info
        return {
            "kind": "mcp_connection",
            "connection_id": self.args.connection_id,
            "name": self.label,
            "transport": o.transport,
            "url": o.url if o.transport == "http" else "",
            "server_pid": info.pid if info is not None else 0,
            "protocol_version": init.get("protocolVersion", ""),
            "server_info": init.get("serverInfo", {}),
            "state": "closing" if self.closing else "open" if self.init_result is not None else "connecting",
            "tools": sorted(self.digests),
            "catalog_changed": self.conn.catalog_changed,
            "in_flight": self.in_flight,
            "calls": self.calls,
        }

    def terminate(self, reason: str) -> None:
        if not self.conn.closed:
            # Not blocking the host: the loop thread runs the shutdown sequence (stdin closed, SIGTERM, SIGKILL).
            asyncio.run_coroutine_threadsafe(self.conn.close(), loop.event_loop())

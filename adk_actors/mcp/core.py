"""One MCP client connection on the MCP loop: options, the handshake, requests with deadlines, the catalog.

:class:`Connection` is plain asyncio code driven by its owning actor (``adk_actors.mcp.actor``) through
:func:`adk_actors.mcp.loop.run`. An owner task enters the transport and the SDK's ``ClientSession`` (anyio scopes
must be left by the task that entered them) and holds them until :meth:`Connection.close`. Requests run in their own
tasks; a request abandoned at its deadline or by a cancel makes the SDK send ``notifications/cancelled``.

Server-initiated requests: ``ping`` is answered; sampling, elicitation and roots are refused with a JSON-RPC error
(we declare none of those capabilities). ``notifications/tools/list_changed`` marks the catalog changed: the next
call against the old snapshot fails with ``tool_catalog_changed`` until a toolset ``refresh()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from adk_actors.errors import ConfigError, McpError
from adk_actors.mcp.http import check_url, http_transport
from adk_actors.mcp.stdio import StdioProcess, stdio_transport
from adk_actors.secrets import Secret

__all__ = [
    "CONNECT_OPTIONS",
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSIONS",
    "ClientOptions",
    "Connection",
    "check_options",
    "connection_label",
    "declaration_digest",
]

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18")
"""The handshake versions we accept from a server (we propose the first)."""
MAX_MESSAGE_BYTES = (1024, 64 * 1024 * 1024)
"""Bounds of ``max_message_bytes``."""
MAX_TOOLS = 1024
"""At most this many tools (and resources, prompts) are listed from one server; more fails the listing."""
MAX_PAGES = 64
CONNECT_OPTIONS = frozenset(
    {
        "args",
        "env",
        "cwd",
        "token",
        "allow_http_loopback",
        "max_message_bytes",
        "request_timeout_s",
        "connect_timeout_s",
        "name",
    }
)
"""The options ``connect`` takes (``args``/``env``/``cwd`` for stdio, ``token``/``allow_http_loopback`` for http)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientOptions:
    """A validated connection request (see :func:`adk_actors.mcp.connect`)."""

    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str = ""
    token: Secret | None = field(default=None, repr=False)
    allow_http_loopback: bool = False
    max_message_bytes: int = 4 * 1024 * 1024
    request_timeout_s: float = 30.0
    connect_timeout_s: float = 10.0
    name: str = ""
    """A label for status and errors (default: the command's base name or the URL's host)."""
    name_given: bool = False
    """Whether the caller chose :attr:`name` (otherwise the server's name labels the connection once known)."""


def _positive(value: Any, key: str, high: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not math.isfinite(value))
        or value <= 0
    ):
        raise ConfigError(f"{key} must be a positive number", reason="invalid_value", details={"key": key})
    if value > high:
        raise ConfigError(f"{key} is at most {high}", reason="invalid_value", details={"key": key})
    return float(value)


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"{key} must be a list of str", reason="invalid_value", details={"key": key})
    items = tuple(value)
    if len(items) > 256 or not all(isinstance(a, str) and "\x00" not in a and len(a) <= 4096 for a in items):
        raise ConfigError(f"{key} must be at most 256 str without NUL", reason="invalid_value", details={"key": key})
    return items


def check_options(transport: Any, target: Any, **options: Any) -> ClientOptions:
    """Validate ``connect``'s arguments.

    Raises:
        ConfigError: ``invalid_value`` or ``unknown_option``.
        McpError: ``unsupported_transport`` (``"sse"`` is the deprecated HTTP+SSE transport: use Streamable HTTP),
            ``invalid_url``, ``insecure_url``.
    """
    unknown = sorted(set(options) - CONNECT_OPTIONS)
    if unknown:
        raise ConfigError("unknown connect option", reason="unknown_option", details={"option": unknown[0][:64]})
    if transport == "sse":
        raise McpError(
            "the HTTP+SSE transport is deprecated: use Streamable HTTP ('http')",
            reason="unsupported_transport",
            details={"transport": "sse"},
        )
    if transport not in ("stdio", "http"):
        raise McpError(
            "transport must be 'stdio' or 'http'",
            reason="unsupported_transport",
            details={"allowed": ["stdio", "http"]},
        )
    size = options.get("max_message_bytes", 4 * 1024 * 1024)
    if isinstance(size, bool) or not isinstance(size, int) or not MAX_MESSAGE_BYTES[0] <= size <= MAX_MESSAGE_BYTES[1]:
        raise ConfigError(
            "max_message_bytes must be an int in [1 KiB, 64 MiB]",
            reason="invalid_value",
            details={"key": "max_message_bytes"},
        )
    name = options.get("name", "")
    if not isinstance(name, str) or len(name) > 128:
        raise ConfigError(
            "name must be a str of at most 128 characters", reason="invalid_value", details={"key": "name"}
        )
    common: dict[str, Any] = {
        "max_message_bytes": size,
        "request_timeout_s": _positive(options.get("request_timeout_s", 30.0), "request_timeout_s", 3600.0),
        "connect_timeout_s": _positive(options.get("connect_timeout_s", 10.0), "connect_timeout_s", 600.0),
    }
    if transport == "stdio":
        if not isinstance(target, str) or not target or "\x00" in target or len(target) > 4096:
            raise ConfigError(
                "the stdio command must be a non-empty str", reason="invalid_value", details={"key": "command"}
            )
        env = options.get("env") or {}
        if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and "\x00" not in k + v and "=" not in k for k, v in env.items()
        ):
            raise ConfigError("env must map str to str", reason="invalid_value", details={"key": "env"})
        cwd = options.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or "\x00" in cwd):
            raise ConfigError("cwd must be a str", reason="invalid_value", details={"key": "cwd"})
        for key in ("token", "allow_http_loopback"):
            if key in options:
                raise ConfigError(f"{key} goes with the http transport", reason="invalid_value", details={"key": key})
        return ClientOptions(
            transport="stdio",
            command=target,
            args=_strings(options.get("args", ()), "args"),
            env=dict(env),
            cwd=cwd,
            name=name or target.rsplit("/", 1)[-1][:128],
            name_given=bool(name),
            **common,
        )
    for key in ("args", "env", "cwd"):
        if key in options:
            raise ConfigError(f"{key} goes with the stdio transport", reason="invalid_value", details={"key": key})
    loopback = options.get("allow_http_loopback", False)
    if not isinstance(loopback, bool):
        raise ConfigError(
            "allow_http_loopback must be a bool", reason="invalid_value", details={"key": "allow_http_loopback"}
        )
    url = check_url(target, allow_http_loopback=loopback)
    token = options.get("token")
    if token is not None and not isinstance(token, Secret):
        if not isinstance(token, str) or not token or any(c in token for c in "\r\n\x00"):
            raise ConfigError(
                "token must be a non-empty str or Secret", reason="invalid_value", details={"key": "token"}
            )
        token = Secret(token)
    from urllib.parse import urlsplit

    return ClientOptions(
        transport="http",
        url=url,
        token=token,
        allow_http_loopback=loopback,
        name=name or (urlsplit(url).hostname or "mcp")[:128],
        name_given=bool(name),
        **common,
    )


def connection_label(options: ClientOptions, initialize: Mapping[str, Any]) -> str:
    """The connection's label: the caller's ``name``, else the server's name, else the default from the target;
    printable, at most 128 characters (it names the toolset and appears in status and errors)."""
    server = initialize.get("serverInfo") if isinstance(initialize, Mapping) else None
    server_name = server.get("name") if isinstance(server, Mapping) else None
    text = options.name if options.name_given or not isinstance(server_name, str) else server_name
    cleaned = "".join(c if c.isprintable() else "_" for c in text)[:128]
    return cleaned or "mcp"


def declaration_digest(tool: dict[str, Any]) -> str:
    """SHA-256 of an MCP tool's declaration as the model sees it (name, description, input schema)."""
    import hashlib

    from adk_actors.content.canonical import canonical_dumps

    shown = {k: tool.get(k) for k in ("name", "description", "inputSchema")}
    return hashlib.sha256(canonical_dumps(shown).encode("utf-8")).hexdigest()


def _mcp_failure(exc: BaseException, info: StdioProcess | None, what: str) -> McpError:
    """Our error for an SDK or transport failure: structural, never the server's message (it may echo input)."""
    if isinstance(exc, McpError):
        return exc
    if info is not None and info.failure is not None:
        return McpError(f"the MCP connection was closed ({info.failure})", reason=info.failure, details={"op": what})
    cause = exc
    group = getattr(exc, "exceptions", None)
    if group:
        inner = [e for e in group if isinstance(e, McpError)]
        if inner:
            return inner[0]
        cause = group[0]
    if isinstance(cause, MCPError):
        if cause.code == mcp_types.CONNECTION_CLOSED:
            return McpError("the MCP connection is closed", reason="mcp_connection_closed", details={"op": what})
        if cause.code == mcp_types.REQUEST_TIMEOUT:
            return McpError("the MCP request passed its deadline", reason="mcp_timeout", details={"op": what})
        return McpError(
            "the MCP server answered with an error", reason="mcp_server_error", details={"op": what, "code": cause.code}
        )
    if isinstance(cause, TimeoutError | asyncio.TimeoutError):
        return McpError("the MCP request passed its deadline", reason="mcp_timeout", details={"op": what})
    return McpError(
        "the MCP request failed",
        reason="mcp_protocol_error",
        details={"op": what, "exception_type": type(cause).__name__},
    )


def _dump(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return out


class Connection:
    """An open MCP client session (use from the MCP loop only)."""

    def __init__(self, options: ClientOptions) -> None:
        self.options = options
        self.session: ClientSession | None = None
        self.info = StdioProcess() if options.transport == "stdio" else None
        self.initialize: dict[str, Any] = {}
        self.catalog_changed = False
        """Set by ``notifications/tools/list_changed``; cleared by a new tool listing."""
        self.closed = False
        self._close = asyncio.Event()
        self._ended = asyncio.Event()
        """Set when the transport ended on its own (the server exited, broke the protocol or hung up)."""
        self._owner: asyncio.Task[None] | None = None

    # ---- lifecycle ----------------------------------------------------------------------------------------------
    async def open(self) -> dict[str, Any]:
        """Start the transport and perform the initialize handshake; returns the ``InitializeResult``.

        Raises:
            McpError: ``mcp_spawn_failed``, ``mcp_timeout``, ``mcp_connection_closed``, ``unsupported_protocol_version``
                or ``mcp_protocol_error``; nothing stays running.
        """
        ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.get_running_loop().create_task(self._own(ready))
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self.options.connect_timeout_s)
        except BaseException as exc:
            await self.close()
            if isinstance(exc, asyncio.TimeoutError | TimeoutError):
                raise McpError(
                    "the MCP handshake passed its deadline", reason="mcp_timeout", details={"op": "initialize"}
                ) from None
            raise

    def _transport(self) -> Any:
        o = self.options
        if o.transport == "stdio":
            assert self.info is not None
            return stdio_transport(
                o.command,
                o.args,
                env=o.env,
                cwd=o.cwd,
                max_message_bytes=o.max_message_bytes,
                info=self.info,
                on_end=self._ended.set,
            )
        return http_transport(
            o.url, token=o.token, max_message_bytes=o.max_message_bytes, connect_timeout_s=o.connect_timeout_s
        )

    async def _own(self, ready: asyncio.Future[dict[str, Any]]) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = ClientSession(
                    read,
                    write,
                    read_timeout_seconds=self.options.request_timeout_s,
                    message_handler=self._on_message,
                    client_info=mcp_types.Implementation(name="adk_actors", version="0.1"),
                )
                await stack.enter_async_context(session)
                result = await session.initialize()
                if result.protocol_version not in PROTOCOL_VERSIONS:
                    raise McpError(
                        "the MCP server chose a protocol version we do not support",
                        reason="unsupported_protocol_version",
                        details={"version": str(result.protocol_version)[:32]},
                    )
                self.session = session
                self.initialize = _dump(result)
                if not ready.done():
                    ready.set_result(self.initialize)
                await self._until_closed()
        except BaseException as exc:  # the owner's failure is the handshake's answer (or ends the session)
            if not ready.done():
                ready.set_exception(_mcp_failure(exc, self.info, "initialize"))
            if not isinstance(exc, Exception):
                raise
        finally:
            self.closed = True
            self.session = None

    async def _until_closed(self) -> None:
        closing = asyncio.ensure_future(self._close.wait())
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            await asyncio.wait((closing, ended), return_when=asyncio.FIRST_COMPLETED)
        finally:
            closing.cancel()
            ended.cancel()

    async def wait_closed(self) -> str:
        """Wait until the session has ended (by :meth:`close` or on its own); returns the reason (``closed``,
        ``mcp_connection_closed``, ``mcp_protocol_error``, ``mcp_message_too_large``)."""
        owner = self._owner
        if owner is not None:
            await asyncio.wait((owner,))
        if self._close.is_set():
            return "closed"
        if self.info is not None and self.info.failure is not None:
            return self.info.failure
        return "mcp_connection_closed"

    async def close(self) -> None:
        """End the session (stdio: stop the server process; http: DELETE the session). Idempotent."""
        self._close.set()
        owner = self._owner
        if owner is not None and not owner.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(owner), 10.0)
            if not owner.done():
                owner.cancel()
                with contextlib.suppress(BaseException):
                    await owner
        self.closed = True

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.catalog_changed = True

    # ---- requests -----------------------------------------------------------------------------------------------
    def _live(self, what: str) -> ClientSession:
        if self.session is None or self.closed:
            if self.info is not None and self.info.failure is not None:
                raise McpError(
                    f"the MCP connection was closed ({self.info.failure})",
                    reason=self.info.failure,
                    details={"op": what},
                )
            raise McpError("the MCP connection is closed", reason="mcp_connection_closed", details={"op": what})
        return self.session

    async def request(self, op: str, params: dict[str, Any], timeout: float | None) -> Any:
        """Run one client operation: ``list_tools``, ``call_tool``, ``list_resources``, ``read_resource``,
        ``list_prompts``, ``get_prompt`` or ``ping``.

        Raises:
            McpError: ``mcp_timeout``, ``mcp_connection_closed``, ``mcp_server_error``, ``mcp_message_too_large``,
                ``mcp_protocol_error``, ``too_many_items``.
        """
        session = self._live(op)
        limit = self.options.request_timeout_s if timeout is None else timeout
        try:  # the caller's deadline cancels this task; the SDK's read timeout bounds the wait on its own
            return await self._request(session, op, params, limit)
        except McpError:
            raise
        except Exception as exc:
            if self.session is None or self.closed:
                raise _mcp_failure(MCPError(mcp_types.CONNECTION_CLOSED, "closed"), self.info, op) from None
            raise _mcp_failure(exc, self.info, op) from None

    async def _request(self, session: ClientSession, op: str, params: dict[str, Any], limit: float) -> Any:
        if op == "call_tool":
            result = await session.call_tool(params["name"], params["arguments"], read_timeout_seconds=limit)
            return _dump(result)
        if op == "read_resource":
            return _dump(await session.read_resource(params["uri"]))
        if op == "get_prompt":
            return _dump(await session.get_prompt(params["name"], params.get("arguments") or None))
        if op == "ping":
            await session.send_ping()
            return {}
        if op in ("list_tools", "list_resources", "list_prompts"):
            changed_before = self.catalog_changed
            items = await self._pages(session, op)
            if op == "list_tools" and changed_before:
                self.catalog_changed = False
            return items
        raise McpError("unknown MCP operation", reason="invalid_request", details={"op": op[:64]})

    async def _pages(self, session: ClientSession, op: str) -> list[dict[str, Any]]:
        key = op.removeprefix("list_")
        method = getattr(session, op)
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = _dump(await method(params=params))
            out.extend(page.get(key, []))
            if len(out) > MAX_TOOLS:
                raise McpError(
                    f"the server lists more than {MAX_TOOLS} {key}", reason="too_many_items", details={"op": op}
                )
            cursor = page.get("nextCursor")
            if not cursor:
                return out
        raise McpError("the server's listing has too many pages", reason="too_many_items", details={"op": op})

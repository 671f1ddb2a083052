"""The MCP client facade: :func:`connect` and the :class:`McpClient` handle.

::

    import sys
    from adk_actors import mcp

    client = mcp.connect("stdio", sys.executable, args=["-m", "my_server"])
    tools = client.list_tools()
    result = client.execute_tool("search", {"query": "otp"})   # {"content": [...], "isError": False, ...}
    client.close()

A handle is a small picklable value (it may be passed to other processes); the connection itself is an actor on
one of the node's hosts, and every call is an ask with a deadline.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from adk_actors.errors import ActorCrashed, AdkError, McpError, NameNotFound
from adk_actors.mcp.core import check_options, connection_label
from adk_actors.mcp.messages import AwaitReady, ConnectArgs, McpClose, McpRequest, McpStatus
from adk_actors.mcp.results import call_result
from adk_actors.runtime.refs import LocalRef
from adk_actors.runtime.system import ActorSystemHandle, current_system

__all__ = ["CONNECTION_ACTOR", "McpClient", "connect", "connection_ids", "connection_ref"]

CONNECTION_ACTOR = "adk_actors.mcp.actor.McpConnectionActor"
_GRACE_S = 2.0
"""How much longer an ask waits than the request's own timeout (the actor answers ``mcp_timeout`` first)."""


def _system(system: ActorSystemHandle | None) -> ActorSystemHandle:
    return system if system is not None else current_system()


@dataclass(frozen=True, slots=True)
class McpClient:
    """A connected MCP server (a handle to its connection actor)."""

    ref: LocalRef
    """The connection actor."""
    name: str
    """The connection's label (for status, errors and toolset names)."""
    transport: str
    protocol_version: str
    server_info: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    instructions: str = ""
    request_timeout_s: float = 30.0
    system: ActorSystemHandle | None = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if k != "system"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "system", None)

    def _ask(self, request: Any, timeout: float | None) -> Any:
        handle = _system(self.system)
        limit = (self.request_timeout_s if timeout is None else timeout) + _GRACE_S
        try:
            return handle.ask(self.ref, request, limit)
        except (ActorCrashed, NameNotFound) as err:
            raise McpError(
                "the MCP connection is closed", reason="mcp_connection_closed", details={"connection": self.name}
            ) from err
        except AdkError as err:
            if err.reason in ("noproc", "not_found"):
                raise McpError(
                    "the MCP connection is closed", reason="mcp_connection_closed", details={"connection": self.name}
                ) from None
            raise

    def _op(self, op: str, params: dict[str, Any], timeout: float | None) -> Any:
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise McpError("timeout must be a positive number of seconds", reason="invalid_value")
        return self._ask(McpRequest(op=op, params=params, timeout_s=timeout), timeout)

    def list_tools(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """Every tool of the server (all pages; at most 1,024). Listing also clears a pending catalog change.

        Raises:
            McpError: ``mcp_timeout``, ``mcp_connection_closed``, ``mcp_server_error``, ``too_many_items``, ...
        """
        tools: list[dict[str, Any]] = self._op("list_tools", {}, timeout)
        return tools

    def execute_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Call a tool; returns ``{"content": [...], "structuredContent"?: {...}, "isError": bool}``.

        A tool's own failure is a result with ``isError: True``, not an exception.

        Raises:
            McpError: ``invalid_value`` (bad name or arguments), ``mcp_timeout`` (the request was cancelled on the
                server with ``notifications/cancelled``), ``mcp_connection_closed``, ``mcp_server_error``, ...
        """
        if not isinstance(name, str) or not 0 < len(name) <= 128:
            raise McpError("a tool name is a str of 1-128 characters", reason="invalid_value", details={"key": "name"})
        if arguments is not None and not isinstance(arguments, dict):
            raise McpError("arguments must be a dict", reason="invalid_value", details={"key": "arguments"})
        raw = self._op("call_tool", {"name": name, "arguments": arguments or {}}, timeout)
        return call_result(raw)

    def list_resources(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """Every resource of the server (all pages)."""
        resources: list[dict[str, Any]] = self._op("list_resources", {}, timeout)
        return resources

    def read_resource(self, uri: str, *, timeout: float | None = None) -> dict[str, Any]:
        """``{"contents": [{"uri", "mimeType"?, "text" | "blob"}]}``."""
        if not isinstance(uri, str) or not 0 < len(uri) <= 4096:
            raise McpError(
                "a resource uri is a str of 1-4096 characters", reason="invalid_value", details={"key": "uri"}
            )
        raw = self._op("read_resource", {"uri": uri}, timeout)
        return {"contents": raw.get("contents", [])}

    def list_prompts(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """Every prompt of the server (all pages)."""
        prompts: list[dict[str, Any]] = self._op("list_prompts", {}, timeout)
        return prompts

    def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """``{"description"?, "messages": [{"role", "content"}]}``."""
        if not isinstance(name, str) or not 0 < len(name) <= 256:
            raise McpError(
                "a prompt name is a str of 1-256 characters", reason="invalid_value", details={"key": "name"}
            )
        if arguments is not None and (
            not isinstance(arguments, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in arguments.items())
        ):
            raise McpError("prompt arguments map str to str", reason="invalid_value", details={"key": "arguments"})
        raw = self._op("get_prompt", {"name": name, "arguments": arguments or {}}, timeout)
        return {k: raw[k] for k in ("description", "messages") if k in raw}

    def ping(self, *, timeout: float | None = None) -> None:
        """Send ``ping`` and wait for the answer."""
        self._op("ping", {}, timeout)

    def status(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The connection actor's status (transport, server, tools, in-flight requests; never a token)."""
        status: dict[str, Any] = self._ask(McpStatus(), timeout)
        return status

    def close(self, *, timeout: float | None = None) -> None:
        """Close the session (stdio: the server process is stopped) and stop the connection actor. Idempotent."""
        try:
            self._ask(McpClose(), 15.0 if timeout is None else timeout)
        except McpError as err:
            if err.reason != "mcp_connection_closed":
                raise

    def toolset(self, *, name: str | None = None, prefix: str = "", requires_confirmation: bool = False) -> Any:
        """This server's tools as a :class:`~adk_actors.tools.Toolset` snapshot (see :func:`mcp_toolset`)."""
        from adk_actors.mcp.toolset import mcp_toolset

        return mcp_toolset(self, name=name, prefix=prefix, requires_confirmation=requires_confirmation)

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    transport: str,
    target: str,
    *,
    system: ActorSystemHandle | None = None,
    max_in_flight: int = 64,
    **options: Any,
) -> McpClient:
    """Connect to an MCP server and perform the initialize handshake before returning.

    Args:
        transport: ``"stdio"`` (``target`` is the command; options ``args``, ``env``, ``cwd``) or ``"http"``
            (``target`` is the Streamable HTTP endpoint URL; options ``token``, ``allow_http_loopback``).
        target: The command or the URL.
        system: The actor system (default: the current one).
        max_in_flight: Requests this connection runs at once; more are refused with ``mcp_overloaded``.
        options: ``max_message_bytes`` (default 4 MiB; 1 KiB-64 MiB), ``request_timeout_s`` (default 30),
            ``connect_timeout_s`` (default 10), ``name``, and the transport's options above.

    Raises:
        ConfigError: ``invalid_value``, ``unknown_option``.
        McpError: ``unsupported_transport``, ``invalid_url``, ``insecure_url``, ``mcp_spawn_failed``,
            ``mcp_timeout``, ``mcp_connection_closed``, ``unsupported_protocol_version``, ``mcp_protocol_error``,
            ``mcp_message_too_large``; no connection, actor or server process is left behind.
    """
    opts = check_options(transport, target, **options)
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or not 1 <= max_in_flight <= 4096:
        raise McpError(
            "max_in_flight must be an int in [1, 4096]", reason="invalid_value", details={"key": "max_in_flight"}
        )
    handle = _system(system)
    connection_id = f"mcp-{uuid.uuid4().hex}"
    args = ConnectArgs(connection_id=connection_id, options=opts, max_in_flight=max_in_flight)
    started = time.monotonic()
    ref: LocalRef = handle.spawn(CONNECTION_ACTOR, args, id=connection_id, restart="temporary")
    remaining = opts.connect_timeout_s + _GRACE_S - (time.monotonic() - started)
    try:
        init: dict[str, Any] = handle.ask(ref, AwaitReady(), max(0.5, remaining))
    except AdkError as err:
        try:
            handle.stop_inner(ref, 5.0)
        except AdkError:
            pass  # it stopped itself after a failed handshake
        if isinstance(err, McpError):
            raise
        raise McpError(
            "the MCP handshake did not complete", reason="mcp_connect_failed", details={"cause": err.reason}
        ) from None
    server_info = dict(init.get("serverInfo") or {})
    return McpClient(
        ref=ref,
        name=connection_label(opts, init),
        transport=opts.transport,
        protocol_version=str(init.get("protocolVersion", "")),
        server_info=server_info,
        capabilities=dict(init.get("capabilities") or {}),
        instructions=str(init.get("instructions") or "")[:4096],
        request_timeout_s=opts.request_timeout_s,
        system=system,
    )


def connection_ids(
    system: ActorSystemHandle | None = None, timeout: float = 5.0, limit: int = 1000
) -> list[tuple[int, str]]:
    """``(host_id, connection_id)`` of the MCP connection actors running on the node's hosts (at most ``limit`` per
    host; a host that does not answer within ``timeout`` is left out)."""
    from adk_actors.runtime.host import FindInner
    from adk_actors.runtime.refs import host_name

    handle = _system(system)
    out: list[tuple[int, str]] = []
    for host_id in range(handle.settings.hosts):
        try:
            ids: list[str] = handle.ask(host_name(host_id), FindInner(actor=CONNECTION_ACTOR, limit=limit), timeout)
        except AdkError:
            continue
        out.extend((host_id, cid) for cid in ids)
    return out


def connection_ref(connection_id: str, system: ActorSystemHandle | None = None) -> LocalRef:
    """Where the connection ``connection_id`` lives (connections are placed by their id, like any inner actor)."""
    from adk_actors.runtime.refs import place

    return LocalRef(place(connection_id, _system(system).settings.hosts), connection_id)

"""Messages of an MCP connection actor (frozen, picklable)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adk_actors.mcp.binding import McpToolCall
from adk_actors.mcp.core import ClientOptions

__all__ = ["AwaitReady", "ConnectArgs", "McpClose", "McpRequest", "McpStatus", "McpToolCall"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectArgs:
    connection_id: str
    options: ClientOptions
    max_in_flight: int = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitReady:
    """Answered with the ``InitializeResult`` once the handshake is done (or the handshake's error)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpRequest:
    """One client operation (see :meth:`adk_actors.mcp.core.Connection.request`)."""

    op: str
    params: dict[str, Any] = field(default_factory=dict, repr=False)
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class McpClose:
    """Close the connection and stop the actor."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpStatus:
    """Answered with the connection's status (JSON-safe, no secrets)."""

"""MCP clients: connections to MCP servers (stdio and Streamable HTTP) and their tools as agent toolsets.

::

    from adk_actors import mcp

    client = mcp.connect("http", "https://tools.example/mcp", token=my_token)
    agent = spawn_agent("helper", model=..., tools=[mcp.mcp_toolset(client)])

The names below load lazily: importing ``adk_actors.mcp`` (or unpickling an agent's MCP binding in a supervisor)
does not import the ``mcp`` SDK until a connection is made. The server side (``mcp_app``) is an edge:
:mod:`adk_actors.web.mcp_server`. See docs/MCP.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adk_actors.mcp.api import McpClient, connect, connection_ids
    from adk_actors.mcp.binding import McpBinding
    from adk_actors.mcp.core import PROTOCOL_VERSIONS
    from adk_actors.mcp.results import call_result, function_response
    from adk_actors.mcp.toolset import McpTool, mcp_toolset

_WHERE = {
    "PROTOCOL_VERSIONS": "core",
    "McpBinding": "binding",
    "McpClient": "api",
    "McpTool": "toolset",
    "call_result": "results",
    "connect": "api",
    "connection_ids": "api",
    "function_response": "results",
    "mcp_toolset": "toolset",
}

__all__ = [
    "PROTOCOL_VERSIONS",
    "McpBinding",
    "McpClient",
    "McpTool",
    "call_result",
    "connect",
    "connection_ids",
    "function_response",
    "mcp_toolset",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'adk_actors.mcp' has no attribute {name!r}")
    try:
        loaded = importlib.import_module(f"adk_actors.mcp.{module}")
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the installation
        if exc.name in ("mcp", "mcp_types", "httpx2", "anyio"):
            raise ImportError("adk_actors.mcp needs the 'mcp' extra: pip install 'adk_actors[mcp]'") from exc
        raise
    return getattr(loaded, name)


def __dir__() -> list[str]:
    return sorted(__all__)

"""The HTTP edge: the reusable layer under every HTTP surface (``/dev/v1`` and its console, later MCP and A2A).

* :mod:`~adk_actors.web.edge` — :class:`EdgeLimits`, :class:`DevToken`, the :class:`EdgeGuard` ASGI guard, the
  one error shape (:func:`error_response`, :func:`status_for`, the exception handlers), :func:`read_json` and
  :func:`edge_app`;
* :mod:`~adk_actors.web.offload` — :class:`Offload`: blocking facade calls and subscriptions off the event loop;
* :mod:`~adk_actors.web.sse` — SSE encoding, ``Last-Event-ID`` parsing and the bounded :class:`SseStream`;
* :mod:`~adk_actors.web.serve` — :func:`check_bind`, :func:`run_server` and :func:`start_in_thread` (uvicorn);
* :mod:`~adk_actors.web.mcp_server` — :func:`mcp_app`, the MCP Streamable HTTP server (``McpLimits``,
  ``McpResource``, ``McpPrompt``); loaded on first use, it needs the ``mcp`` extra;
* :mod:`~adk_actors.web.a2a_server` — :func:`a2a_app`, the A2A 1.0 JSON-RPC server (:func:`agent_card`,
  ``A2aLimits``), and :mod:`~adk_actors.web.legacy_a2a` — :func:`legacy_a2a_app`, the legacy ``/a2a/prompt``.

An edge is a facade client: it holds no domain state, and the work a request starts belongs to the node. It needs
the ``web`` extra (Starlette and uvicorn).
"""

from __future__ import annotations

from typing import Any

try:
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("adk_actors.web needs the 'web' extra: pip install 'adk_actors[web]'") from exc

from adk_actors.web.edge import (
    DevToken,
    EdgeGuard,
    EdgeLimits,
    StreamSlots,
    adk_error_handler,
    edge_app,
    error_for,
    error_response,
    exception_handlers,
    read_json,
    status_for,
)
from adk_actors.web.offload import BlockingIterator, Offload
from adk_actors.web.serve import ServerThread, check_bind, run_server, start_in_thread
from adk_actors.web.sse import SseEvent, SseStream, encode_event, parse_last_event_id

_MCP_NAMES = {
    "McpApp": "adk_actors.web.mcp_server",
    "mcp_app": "adk_actors.web.mcp_server",
    "McpLimits": "adk_actors.web.mcp_spec",
    "McpPrompt": "adk_actors.web.mcp_spec",
    "McpResource": "adk_actors.web.mcp_spec",
    "A2aApp": "adk_actors.web.a2a_server",
    "A2aLimits": "adk_actors.web.a2a_server",
    "a2a_app": "adk_actors.web.a2a_server",
    "agent_card": "adk_actors.web.a2a_server",
    "legacy_a2a_app": "adk_actors.web.legacy_a2a",
}


def __getattr__(name: str) -> Any:
    """The MCP and A2A servers' names, imported on first use (``adk_actors.web`` works without the ``mcp`` extra)."""
    module = _MCP_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'adk_actors.web' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "A2aApp",
    "A2aLimits",
    "BlockingIterator",
    "DevToken",
    "EdgeGuard",
    "EdgeLimits",
    "McpApp",
    "McpLimits",
    "McpPrompt",
    "McpResource",
    "Offload",
    "ServerThread",
    "SseEvent",
    "SseStream",
    "StreamSlots",
    "a2a_app",
    "adk_error_handler",
    "agent_card",
    "check_bind",
    "edge_app",
    "encode_event",
    "error_for",
    "error_response",
    "exception_handlers",
    "legacy_a2a_app",
    "mcp_app",
    "parse_last_event_id",
    "read_json",
    "run_server",
    "start_in_thread",
    "status_for",
]

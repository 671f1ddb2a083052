"""Helpers for the MCP server tests: tools run in the worker pool, a served ``mcp_app``, and the official client.

* :func:`serve_mcp`: ``mcp_app`` over the shared node served by uvicorn on 127.0.0.1 (``start_in_thread``), with the
  module's tools, the dev agent, a resource and a prompt; a :class:`McpServer` (``.url``, ``.app``, ``.http``),
  stopped on exit.
* :func:`official_client`: the official ``mcp.Client`` for a served URL, carrying the bearer token.

Tool functions live at module level so they pickle by reference into the worker processes.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from adk_actors import FunctionTool
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.web import ServerThread, start_in_thread
from adk_actors.web.mcp_server import McpApp, McpLimits, McpPrompt, McpResource, mcp_app

TOKEN = "mcp-test-" + secrets.token_hex(16)
"""This session's bearer token (random, so a leak check cannot pass by accident)."""
NOTE = "Supervise every long-lived process."


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def fail() -> str:
    """Always raises (the call answers isError)."""
    raise ValueError("secret internal detail " + TOKEN)


def sleepy(seconds: float) -> str:
    """Sleep, then answer (a call to cancel)."""
    time.sleep(seconds)
    return "woke"


def big(size: int) -> str:
    """A result of ``size`` characters."""
    return "x" * size


TOOLS = (FunctionTool(add), FunctionTool(fail), FunctionTool(sleepy), FunctionTool(big))


def read_note() -> str:
    return NOTE


def explain(arguments: dict[str, str]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": {"type": "text", "text": "Explain " + arguments["topic"]}}]}


def read_logo() -> bytes:
    return bytes(range(256))


RESOURCES = (
    McpResource(uri="memo://otp", name="otp-note", mime_type="text/plain", read=read_note),
    {"uri": "memo://logo", "name": "logo", "mime_type": "application/octet-stream", "read": read_logo},
)
PROMPTS = (McpPrompt(name="explain", arguments=({"name": "topic", "required": True},), get=explain),)


@dataclass
class McpServer:
    """One served ``mcp_app`` and what a test needs to drive and check it."""

    app: McpApp
    server: ServerThread
    http: httpx.Client
    """Raw HTTP with the token (base URL: the server)."""
    system: ActorSystemHandle

    @property
    def url(self) -> str:
        return self.server.url + "/mcp"


@contextlib.contextmanager
def serve_mcp(
    system: ActorSystemHandle, agents: tuple[str, ...] = (), *, limits: McpLimits | None = None, **options: Any
) -> Iterator[McpServer]:
    """``mcp_app`` for ``system`` served on 127.0.0.1; stopped (and its pool closed) on exit."""
    app = mcp_app(
        system,
        token=TOKEN,
        tools=TOOLS,
        agents=agents,
        resources=RESOURCES,
        prompts=PROMPTS,
        limits=limits,
        **options,
    )
    server = start_in_thread(app, "127.0.0.1", 0)
    http = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30.0, trust_env=False
    )
    try:
        yield McpServer(app, server, http, system)
    finally:
        http.close()
        assert server.stop(), "the MCP server thread outlived its test"


@contextlib.asynccontextmanager
async def official_client(url: str, *, mode: str = "legacy", token: str = TOKEN) -> AsyncIterator[Client]:
    """The official client connected to ``url`` (``mode="auto"`` probes with ``server/discover`` first)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            yield client


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
"""A raw ``initialize`` request."""
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

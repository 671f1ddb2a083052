"""The official MCP server (mcp 2.3.0 ``MCPServer``) as a peer for the client tests.

Usage: ``python official.py stdio [--log FILE]`` or ``python official.py http PORT [--log FILE]`` (endpoint ``/mcp``).

Tools: ``add(a, b)`` (structured result), ``fail()`` (always raises, so the result has ``isError: true``),
``slow(seconds)`` (sleeps; appends ``cancelled`` to the log when the client cancels it) and ``change_catalog()``
(adds the tool ``extra`` and sends ``notifications/tools/list_changed``). A resource ``memo://hello``, a template
``greet://{name}`` and a prompt ``review(code)``.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("official-peer", version="0.0.1")
_log_path = ""


def _log(line: str) -> None:
    if _log_path:
        with open(_log_path, "a") as fh:
            fh.write(line + "\n")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("boom")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep for some seconds."""
    _log("started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _log("cancelled")
        raise
    return "slept"


def extra() -> str:
    """A tool added at run time."""
    return "extra"


@server.tool()
async def change_catalog(ctx: Context) -> str:
    """Add the tool ``extra`` and announce the changed catalog."""
    server.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "changed"


@server.resource("memo://hello", mime_type="text/plain")
def hello() -> str:
    return "hello world"


@server.resource("greet://{name}")
def greet(name: str) -> str:
    return f"hi {name}"


@server.prompt()
def review(code: str) -> str:
    """Review some code."""
    return f"Please review:\n{code}"


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--log" in argv:
        at = argv.index("--log")
        _log_path = argv[at + 1]
        del argv[at : at + 2]
    if argv[0] == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))

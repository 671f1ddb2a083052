"""An MCP server written with the official SDK, for benchmarks and samples: ``get_weather(city)``.

``python -m adk_actors.devtools.mcp_peer stdio`` or ``python -m adk_actors.devtools.mcp_peer http PORT`` (Streamable
HTTP on 127.0.0.1:PORT at ``/mcp``).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather-peer", version="1.0")


@server.tool()
def get_weather(city: str) -> dict[str, str]:
    """Get the weather for a city."""
    return {"city": city, "forecast": "sunny"}


@contextlib.contextmanager
def serving_http(start_timeout_s: float = 30.0) -> Iterator[tuple[str, int]]:
    """This server over Streamable HTTP in a process of its own on a free 127.0.0.1 port: yields ``(url, pid)``;
    the process is stopped (terminated, killed if it lingers) when the block ends."""
    from adk_actors.runtime.system import port_listening
    from adk_actors.testing import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "adk_actors.devtools.mcp_peer", "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + start_timeout_s
        while not port_listening(port, timeout=0.2):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the MCP peer did not start listening")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str]) -> None:
    if argv and argv[0] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])

"""An MCP server written with the official SDK, for benchmarks and samples: ``get_weather(city)``.

``python -m adk_actors.devtools.mcp_peer stdio`` or ``python -m adk_actors.devtools.mcp_peer http PORT`` (Streamable
HTTP on 127.0.0.1:PORT at ``/mcp``).
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather-peer", version="1.0")


@server.tool()
def get_weather(city: str) -> dict[str, str]:
    """Get the weather for a city."""
    return {"city": city, "forecast": "sunny"}


def main(argv: list[str]) -> None:
    if argv and argv[0] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])

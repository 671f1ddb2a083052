"""An MCP server built with the official ``mcp`` SDK, the peer of the developer-tooling tests.

Run as ``python mcp_peer.py stdio`` (newline-delimited JSON-RPC on stdin/stdout) or ``python mcp_peer.py http
PORT`` (Streamable HTTP on ``http://127.0.0.1:PORT/mcp``). Its tools:

* ``add(a, b)``: a one-line description;
* ``summarize(text)``: a description of several lines (the CLI prints only the first);
* ``fail()``: always raises, which the SDK turns into a result with ``isError: true``.

:func:`http_peer` (for the tests) runs it over HTTP in a subprocess and stops it on exit.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

from mcp.server.mcpserver import MCPServer

SERVER_NAME = "devtools-peer"
SERVER_VERSION = "1.2.3"

server = MCPServer(SERVER_NAME, version=SERVER_VERSION)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def summarize(text: str) -> str:
    """Shorten a text to its first sentence.

    The rest of this description is detail a listing shows only in full (JSON) form.
    """
    return text.split(".", 1)[0]


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the peer's tool failed on purpose")


@contextlib.contextmanager
def http_peer(timeout: float = 20.0) -> Iterator[str]:
    """This server over Streamable HTTP in a subprocess on a free loopback port; yields its endpoint URL once it
    accepts connections, and stops it (SIGTERM, then SIGKILL) on exit."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, __file__, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, f"the HTTP peer exited with {proc.returncode}"
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the HTTP peer did not start listening"
            threading.Event().wait(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str]) -> None:
    if argv[:1] == ["stdio"]:
        server.run()
    elif len(argv) == 2 and argv[0] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        raise SystemExit("usage: mcp_peer.py stdio | http PORT")


if __name__ == "__main__":
    main(sys.argv[1:])

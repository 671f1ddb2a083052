"""A served edge answers on a reused keep-alive connection without the 40 ms Nagle/delayed-ACK stall: the accepted
sockets have TCP_NODELAY (asyncio sets it only when the listening socket says IPPROTO_TCP)."""

from __future__ import annotations

import socket
import statistics
import time

from starlette.responses import JSONResponse
from starlette.routing import Route

from adk_actors.web.edge import edge_app
from adk_actors.web.serve import start_in_thread


async def _ping(request: object) -> JSONResponse:
    return JSONResponse({"ok": True})


def _gap_ms(sock: socket.socket) -> float:
    """Milliseconds between the first bytes of one answer (its headers) and its end (the body)."""
    sock.sendall(b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    buf, first = b"", 0.0
    while not buf.endswith(b'{"ok":true}'):
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        first = first or time.perf_counter()
        buf += chunk
    return (time.perf_counter() - first) * 1000


def test_answers_on_a_reused_connection_are_not_held_back_by_nagle() -> None:
    app = edge_app([Route("/ping", _ping)], token=None, public=lambda path: True)
    with start_in_thread(app) as server, socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        gaps = [_gap_ms(sock) for _ in range(7)]  # the first answer may ride the quick-ACK start; the rest reuse
    assert statistics.median(gaps[1:]) < 20.0, gaps  # with Nagle on the server: about 40 ms each

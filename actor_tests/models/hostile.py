"""Hostile HTTP peers on 127.0.0.1 for provider tests: a server that drips bytes, stays silent or never ends.

These are misbehaving *peers*, not stand-ins for the provider: the real provider talks to them over real TCP. Each
server serves on its own thread and :meth:`HostilePeer.close` (or leaving the ``with`` block) closes the listener and
every accepted socket and joins the thread, so nothing outlives the test.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Iterator
from typing import Literal

Mode = Literal["silent", "drip_headers", "drip_body", "endless_body", "endless_sse", "big_body", "canned"]

_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


class HostilePeer:
    """Accepts connections and answers every request the way ``mode`` says:

    * ``silent``: reads the request and never answers;
    * ``drip_headers``: sends the status line and then one header byte every ``interval`` seconds;
    * ``drip_body``: valid headers (``Content-Length`` 1 MiB), then one body byte every ``interval`` seconds;
    * ``endless_body``: chunked JSON-looking body that never ends, as fast as the client reads;
    * ``endless_sse``: ``text/event-stream`` with a comment line every ``interval`` seconds, forever;
    * ``big_body``: a complete, valid JSON answer of ``size`` bytes with ``Content-Length``;
    * ``canned``: ``body`` (bytes, sent as they are) with ``content_type``, then the connection is closed.
    """

    def __init__(
        self,
        mode: Mode,
        *,
        interval: float = 0.2,
        size: int = 0,
        body: bytes = b"",
        content_type: str = "application/json",
    ) -> None:
        self.mode, self.interval, self.size = mode, interval, size
        self.body, self.content_type = body, content_type
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stop_r, self._stop_w = socket.socketpair()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name=f"hostile-{mode}", daemon=True)
        self._acceptor.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> HostilePeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop_w.send(b"x")
        self._acceptor.join(10)
        for thread in list(self._threads):
            thread.join(10)
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.close()
        self._listener.close()
        self._stop_r.close()
        self._stop_w.close()

    def _stopped(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._stop_r], [], [], timeout)
        return bool(ready)

    def _accept(self) -> None:
        while True:
            ready, _, _ = select.select([self._listener, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            conn, _addr = self._listener.accept()
            self.accepted += 1
            with self._lock:
                self._conns.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), name="hostile-conn", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _read_request(self, conn: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            ready, _, _ = select.select([conn, self._stop_r], [], [])
            if self._stop_r in ready:
                return False
            chunk = conn.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            body += chunk
        return True

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if not self._read_request(conn):
                return
            if self.mode == "silent":
                self._stopped(None)  # type: ignore[arg-type]
            elif self.mode == "drip_headers":
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                while not self._stopped(self.interval):
                    conn.sendall(b"X")
            elif self.mode == "drip_body":
                conn.sendall(_HEAD + b"Content-Length: 1048576\r\n\r\n")
                while not self._stopped(self.interval):
                    conn.sendall(b" ")
            elif self.mode == "endless_body":
                conn.sendall(_HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
                piece = b" " * 65536
                chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
                conn.sendall(b"1\r\n[\r\n")
                while not self._stopped(0):
                    conn.sendall(chunk)
            elif self.mode == "endless_sse":
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                )
                while not self._stopped(self.interval):
                    conn.sendall(b"3\r\n:\r\n\r\n")
            elif self.mode == "canned":
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n\r\n" % (self.content_type.encode(), len(self.body)) + self.body
                )
            elif self.mode == "big_body":
                text = b"x" * max(0, self.size - 100)
                body = (
                    b'{"candidates":[{"content":{"role":"model","parts":[{"text":"'
                    + text
                    + b'"}]},"finishReason":"STOP"}]}'
                )
                conn.sendall(_HEAD + b"Content-Length: %d\r\n\r\n" % len(body))
                conn.sendall(body)
                self._stopped(None)  # type: ignore[arg-type]


@contextlib.contextmanager
def hostile(mode: Mode, **kwargs: object) -> Iterator[HostilePeer]:
    peer = HostilePeer(mode, **kwargs)  # type: ignore[arg-type]
    try:
        yield peer
    finally:
        peer.close()

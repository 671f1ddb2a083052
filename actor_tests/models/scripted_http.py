"""A keep-alive HTTP/1.1 peer on 127.0.0.1 whose answers a test writes byte by byte, and which reports what it saw.

Tests of the provider's transport need what the emulator does not show: which TCP connection carried a request,
when the client shut a socket down, the exact request headers, gzip answers, redirects, a stream held open between
events. Every connection is served on its own thread; leaving the ``with`` block closes the listener and every
accepted socket and joins the threads.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class Seen:
    """One request as the peer received it."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lowercased."""
    body: bytes
    conn: int
    """Which accepted connection (0, 1, ...) carried it."""


@dataclass(slots=True)
class Exchange:
    """What a handler gets: the request, its socket, and ``hold(timeout)``: wait until the client shuts its side
    down or closes (True), the peer stops (True) or ``timeout`` passes (False; ``None`` waits without limit)."""

    request: Seen
    sock: socket.socket
    hold: Callable[[float | None], bool]
    keep_alive: bool = field(default=True)
    """Set to False to close the connection after the answer."""


Handler = Callable[[Exchange], None]


class ScriptedPeer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Seen] = []
        self.accepted = 0
        self.ended: set[int] = set()
        """Connections the client shut down or closed (the peer read EOF or a reset), or the peer closed."""
        self._cond = threading.Condition()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stop_r, self._stop_w = socket.socketpair()
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="scripted-peer", daemon=True)
        self._acceptor.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait until ``predicate()`` (checked under the peer's lock whenever something happens) or ``timeout``."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def close(self) -> None:
        self._stop_w.send(b"x")
        self._acceptor.join(10)
        for thread in list(self._threads):
            thread.join(10)
        with self._cond:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.close()
        self._listener.close()
        self._stop_r.close()
        self._stop_w.close()
        assert not self._acceptor.is_alive() and not any(t.is_alive() for t in self._threads)

    def _hold(self, conn: socket.socket, timeout: float | None) -> bool:
        ready, _, _ = select.select([conn, self._stop_r], [], [], timeout)
        if self._stop_r in ready:
            return True
        if conn in ready:
            try:
                return conn.recv(65536, socket.MSG_PEEK) == b""
            except OSError:
                return True
        return False

    def _note(self, fn: Callable[[], None]) -> None:
        with self._cond:
            fn()
            self._cond.notify_all()

    def _accept(self) -> None:
        while True:
            ready, _, _ = select.select([self._listener, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            conn, _addr = self._listener.accept()
            with self._cond:
                index = self.accepted
                self.accepted += 1
                self._conns.append(conn)
                self._cond.notify_all()
            thread = threading.Thread(target=self._serve, args=(conn, index), name="scripted-conn", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _recv(self, conn: socket.socket) -> bytes:
        ready, _, _ = select.select([conn, self._stop_r], [], [])
        if self._stop_r in ready:
            return b""
        return conn.recv(65536)

    def _read_request(self, conn: socket.socket, index: int, buffered: bytes) -> tuple[Seen | None, bytes]:
        data = buffered
        while b"\r\n\r\n" not in data:
            chunk = self._recv(conn)
            if not chunk:
                return None, b""
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            chunk = self._recv(conn)
            if not chunk:
                return None, b""
            rest += chunk
        seen = Seen(method=method, path=path, headers=headers, body=rest[:length], conn=index)
        return seen, rest[length:]

    def _serve(self, conn: socket.socket, index: int) -> None:
        buffered = b""
        with contextlib.suppress(OSError):
            while True:
                seen, buffered = self._read_request(conn, index, buffered)
                if seen is None:
                    break
                self._note(lambda s=seen: self.requests.append(s))  # type: ignore[misc]
                exchange = Exchange(request=seen, sock=conn, hold=lambda t, c=conn: self._hold(c, t))  # type: ignore[misc]
                self.handler(exchange)
                if not exchange.keep_alive:
                    conn.shutdown(socket.SHUT_RDWR)
                    break
        self._note(lambda: self.ended.add(index))

    def __enter__(self) -> ScriptedPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def scripted(handler: Handler) -> Iterator[ScriptedPeer]:
    with ScriptedPeer(handler) as peer:
        yield peer


def answer(exchange: Exchange, body: bytes, *, status: str = "200 OK", headers: dict[str, str] | None = None) -> None:
    """Send a complete answer with ``Content-Length``."""
    head = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    exchange.sock.sendall(f"HTTP/1.1 {status}\r\n{lines}\r\n".encode("latin-1") + body)


def start_sse(exchange: Exchange, headers: dict[str, str] | None = None) -> None:
    """Send the head of a chunked ``text/event-stream`` answer; follow with :func:`send_chunk`."""
    head = {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked", **(headers or {})}
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    exchange.sock.sendall(f"HTTP/1.1 200 OK\r\n{lines}\r\n".encode("latin-1"))


def send_chunk(exchange: Exchange, data: bytes) -> None:
    """One chunk of a chunked body (``b""`` ends the body)."""
    exchange.sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))

"""A TCP relay in front of the emulator that notices a client abandoning a request.

The emulator cannot tell a test that a client hung up while it was still delaying the answer (it only finds out
when it writes). The relay sits between the agent's HTTP client and the emulator and sets :attr:`CutRelay.cut`
when a client closes a connection whose last request has not been answered by a single byte yet.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

__all__ = ["CutRelay"]

_CHUNK = 65536


class CutRelay:
    """Relay ``127.0.0.1:<port>`` to ``upstream_port``; use as a context manager (it closes every socket and joins
    every thread on exit)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.forwarded = threading.Event()
        """A request's bytes reached the upstream server."""
        self.cut = threading.Event()
        """A client closed a connection while its request was unanswered."""
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> CutRelay:
        self._spawn(self._accept)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:
            self._closed = True
            sockets = [self._listener, *self._sockets]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in list(self._threads):
            thread.join(5)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the relay is closing
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            awaiting = threading.Event()  # set: the client sent bytes the upstream has not answered yet
            self._spawn(self._to_upstream, client, upstream, awaiting)
            self._spawn(self._to_client, upstream, client, awaiting)

    def _to_upstream(self, client: socket.socket, upstream: socket.socket, awaiting: threading.Event) -> None:
        while True:
            try:
                data = client.recv(_CHUNK)
            except OSError:
                data = b""
            if not data:
                if awaiting.is_set():
                    self.cut.set()
                with contextlib.suppress(OSError):
                    upstream.shutdown(socket.SHUT_RDWR)
                return
            awaiting.set()
            try:
                upstream.sendall(data)
            except OSError:
                return
            self.forwarded.set()

    def _to_client(self, upstream: socket.socket, client: socket.socket, awaiting: threading.Event) -> None:
        while True:
            try:
                data = upstream.recv(_CHUNK)
            except OSError:
                data = b""
            if not data:
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RDWR)
                return
            awaiting.clear()
            try:
                client.sendall(data)
            except OSError:
                return

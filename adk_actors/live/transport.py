"""One Live WebSocket on a dedicated thread of its host: ``websocket-client``, socket-level cancel, no pool thread.

A :class:`LiveSocket` is started through the actor's ``io_call`` as a :class:`~adk_actors.runtime.iopool.Completion`:
``start`` spawns the connection's own thread and returns at once. The thread connects (TLS verified, always; the
API key travels in the ``x-goog-api-key`` handshake header and nowhere else), then loops on ``select`` over the
socket and a wake pipe: client messages the actor queued with :meth:`LiveSocket.send` are written in order, and
the server frames are handed to the actor with ``token.report(("frames", [data, ...]))`` — the actor's
``on_progress``, in order; one report carries every frame that was already readable, so a busy connection costs one
actor wakeup per batch, not per frame. Other reports: ``("open",)`` once connected, ``("sent", n_bytes)`` after each
written message (the actor releases that much ingress credit). The call completes with ``("closed", code,
reason)`` when the server closes, or with a ``LiveError`` (``live_connect_failed``, ``connection_lost``);
cancelling the token shuts the socket down so the thread ends within one ``select`` slice.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

from adk_actors.errors import AdkError, LiveError
from adk_actors.runtime.cancel import CancelToken
from adk_actors.runtime.iopool import Completion

__all__ = ["LiveSocket", "live_socket_call"]

_SLICE_S = 0.5
"""Longest ``select`` wait: a cancelled connection's thread notices within this even without socket traffic."""
_SEND_TIMEOUT_S = 30.0
_BATCH_FRAMES = 64
_BATCH_BYTES = 1024 * 1024
"""A single write that cannot complete in this time means the peer stopped reading: the connection is lost."""


class LiveSocket:
    """The connection parameters and the outbound queue of one Live WebSocket (see the module docstring).

    Created by the session actor; the thread it starts owns the socket. ``send`` and ``close`` are thread-safe.
    """

    def __init__(
        self, url: str, headers: list[str], *, cafile: str | None = None, connect_timeout_s: float = 10.0
    ) -> None:
        self.url = url
        self._headers = headers
        self._cafile = cafile
        self._connect_timeout_s = connect_timeout_s
        self._out: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._closed = False

    def send(self, text: str) -> None:
        """Queue one client message (a JSON text frame) for the connection's thread."""
        self._out.put(text)
        self._wake()

    def close(self) -> None:
        """Ask the thread to send a normal close frame and end (queued messages before it are still sent)."""
        self._out.put(None)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    # ---- the connection's thread ------------------------------------------------------------------------------
    def run(self, token: CancelToken, complete: Callable[[Any, AdkError | None], None]) -> None:
        import websocket

        ws: Any = None
        try:
            sslopt: dict[str, Any] = {"cert_reqs": ssl.CERT_REQUIRED, "check_hostname": True}
            if self._cafile:
                sslopt["ca_certs"] = self._cafile
            try:
                ws = websocket.WebSocket(sslopt=sslopt, enable_multithread=False, skip_utf8_validation=True)
                ws.settimeout(self._connect_timeout_s)
                ws.connect(self.url, header=self._headers, suppress_origin=True)
            except Exception as exc:  # refused, TLS, handshake status: one reason, no URL (it may carry nothing
                # secret, but the key header must never reach an error either)
                complete(
                    None,
                    LiveError(
                        "the Live connection could not be opened",
                        reason="live_connect_failed",
                        details={"exception_type": type(exc).__name__, "status": getattr(exc, "status_code", None)},
                    ),
                )
                return
            sock = ws.sock
            token.register(sock)
            if token.cancelled:
                complete(None, LiveError("the Live connection was cancelled", reason="cancelled"))
                return
            ws.settimeout(_SEND_TIMEOUT_S)
            token.report(("open",))
            complete(*self._loop(ws, sock, token))
        finally:
            if ws is not None:
                with contextlib.suppress(Exception):
                    token.unregister(ws.sock) if ws.sock is not None else None
                with contextlib.suppress(Exception):
                    ws.shutdown()
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _loop(self, ws: Any, sock: socket.socket, token: CancelToken) -> tuple[Any, AdkError | None]:
        import websocket

        while True:
            if token.cancelled:
                return None, LiveError("the Live connection was cancelled", reason="cancelled")
            try:
                pending = isinstance(sock, ssl.SSLSocket) and sock.pending() > 0
                watched: list[Any] = [sock, self._wake_r]
                readable = [sock] if pending else select.select(watched, [], [], _SLICE_S)[0]
                if self._wake_r in readable:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_r, 4096)
                if not self._flush(ws, token):
                    ws.send_close(websocket.STATUS_NORMAL, b"")
                    return ("closed", 1000, "client closed"), None
                if sock in readable:
                    closed = self._read(ws, sock, token)
                    if closed is not None:
                        return closed, None
            except (OSError, ValueError, websocket.WebSocketException) as exc:
                if token.cancelled:
                    return None, LiveError("the Live connection was cancelled", reason="cancelled")
                return None, LiveError(
                    "the Live connection was lost",
                    reason="connection_lost",
                    details={"exception_type": type(exc).__name__},
                )

    def _read(self, ws: Any, sock: socket.socket, token: CancelToken) -> tuple[str, int, str] | None:
        """Read one frame and every further frame already readable (at most :data:`_BATCH_FRAMES` /
        :data:`_BATCH_BYTES`), and report them as one ``("frames", [data, ...])``: under load the actor handles a
        batch per wakeup and sends each subscriber one message for it. Returns the close, if one came."""
        import websocket

        batch: list[bytes] = []
        size = 0
        closed: tuple[str, int, str] | None = None
        while True:
            opcode, data = ws.recv_data(control_frame=True)
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                code = int.from_bytes(data[:2], "big") if len(data) >= 2 else 1005
                closed = ("closed", code, data[2:125].decode("utf-8", "replace"))
                break
            if opcode in (websocket.ABNF.OPCODE_TEXT, websocket.ABNF.OPCODE_BINARY):
                batch.append(data)
                size += len(data)
            if len(batch) >= _BATCH_FRAMES or size >= _BATCH_BYTES:
                break
            more = (isinstance(sock, ssl.SSLSocket) and sock.pending() > 0) or select.select([sock], [], [], 0)[0]
            if not more:
                break
        if batch:
            token.report(("frames", batch))
        return closed

    def _flush(self, ws: Any, token: CancelToken) -> bool:
        """Write every queued message; ``False`` when a close was asked for."""
        while True:
            try:
                text = self._out.get_nowait()
            except queue.Empty:
                return True
            if text is None:
                return False
            ws.send(text)
            token.report(("sent", len(text)))


def _start(token: CancelToken, complete: Callable[[Any, AdkError | None], None], live: LiveSocket) -> None:
    thread = threading.Thread(target=live.run, args=(token, complete), name="adk-live-ws", daemon=True)
    thread.start()


live_socket_call: Any = Completion(_start)
"""The ``io_call`` function of a Live connection: ``io_call(live_socket_call, (live_socket,), deadline, ...)``."""

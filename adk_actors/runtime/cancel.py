"""Cancellation of blocking I/O from another thread: shut the call's sockets down.

Closing a ``requests`` session from another thread does not interrupt a call waiting for response headers;
``socket.shutdown(SHUT_RDWR)`` does. Blocking code registers every socket it opens on its token;
:meth:`CancelToken.cancel` shuts them all down and marks the token, so the blocked call fails promptly.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

__all__ = ["CancelToken", "Cancelled"]


class Cancelled(Exception):
    """Raised by :meth:`CancelToken.check` once the token is cancelled."""


class CancelToken:
    """Thread-safe cancellation scope for one blocking call."""

    __slots__ = ("_cancelled", "_lock", "_sockets")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def register_socket(self, sock: Any) -> None:
        """Track ``sock``; if the token is already cancelled, shut it down at once."""
        with self._lock:
            if not self._cancelled:
                self._sockets.append(sock)
                return
        _shutdown(sock)

    def unregister_socket(self, sock: Any) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._sockets.remove(sock)

    def cancel(self) -> None:
        """Mark cancelled and shut down every registered socket (idempotent)."""
        with self._lock:
            self._cancelled = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shutdown(sock)

    def check(self) -> None:
        """Raise :class:`Cancelled` when the token is cancelled (for cooperative loops)."""
        if self._cancelled:
            raise Cancelled()


def _shutdown(sock: Any) -> None:
    with contextlib.suppress(OSError, AttributeError):
        sock.shutdown(socket.SHUT_RDWR)

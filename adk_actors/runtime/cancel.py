"""Cancellation of blocking I/O from another thread: shut the call's sockets down.

A blocking call (a provider request on a host's I/O thread) gets a :class:`CancelToken`; it registers the live
socket(s) of its in-flight request on the token, so :meth:`CancelToken.cancel` from any other thread can
``shutdown()`` them. Closing a ``requests.Session`` from another thread does not interrupt a call that is waiting
for response headers; shutting the socket down does, immediately. One class serves the runtime's I/O pool and
the model providers (``adk_actors.models.cancel`` re-exports it).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from adk_actors.errors import ProviderError

__all__ = ["CancelToken", "Cancelled"]


class Cancelled(Exception):
    """Raised by :meth:`CancelToken.check` once the token is cancelled (cooperative loops)."""


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        # Already closed or never connected: either way nothing more can be read from it.
        pass


class CancelToken:
    """A thread-safe, one-shot cancellation flag that also owns the sockets of the call it guards.

    ``cancel()`` may be called from any thread, any number of times; the first call wins. A socket registered after
    cancellation is shut down at once, so there is no window in which a call can start talking after a cancel.
    """

    __slots__ = ("_callbacks", "_event", "_lock", "_reason", "_sockets", "progress")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._reason: str | None = None
        self._callbacks: list[Callable[[], object]] = []
        self.progress: Callable[[Any], None] | None = None
        """Set by the runtime's I/O pool: ``progress(value)`` delivers an intermediate value to the caller's
        ``on_progress`` (in order, before the final result); ``None`` outside the pool."""

    def report(self, value: Any) -> None:
        """Deliver ``value`` to the owner's ``on_progress`` (a no-op when the call has no progress channel)."""
        if self.progress is not None:
            self.progress(value)

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self.cancelled}, reason={self._reason!r})"

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` has been called."""
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """The reason given to the first :meth:`cancel` call, or ``None``."""
        return self._reason

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the call: mark the token and shut down every registered socket."""
        with self._lock:
            if self._reason is None:
                self._reason = reason
            first = not self._event.is_set()
            self._event.set()
            sockets = list(self._sockets)
            callbacks, self._callbacks = (self._callbacks, []) if first else ([], self._callbacks)
        for sock in sockets:
            _shutdown(sock)
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], object]) -> None:
        """Run ``callback()`` once when the token is cancelled (at once when it already is). It runs on the
        cancelling thread: keep it short and thread-safe (for example ``loop.call_soon_threadsafe(...)``)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def register(self, sock: socket.socket) -> None:
        """Track ``sock`` as belonging to the guarded call (shut it down at once when already cancelled)."""
        with self._lock:
            self._sockets.add(sock)
            cancelled = self._event.is_set()
        if cancelled:
            _shutdown(sock)

    def unregister(self, sock: socket.socket) -> None:
        """Stop tracking ``sock`` (the call finished with it and may return it to a connection pool)."""
        with self._lock:
            self._sockets.discard(sock)

    def wait(self, timeout: float | None) -> bool:
        """Block up to ``timeout`` seconds (``None``: forever) or until cancelled; return whether cancelled."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise ``ProviderError(reason="cancelled")`` if the token was cancelled.

        Raises:
            ProviderError: reason ``cancelled``.
        """
        if self._event.is_set():
            raise ProviderError(
                "the provider call was cancelled", reason="cancelled", details={"cause": self._reason or "cancelled"}
            )

    # Names used by the runtime's I/O pool and HTTP adapters.
    register_socket = register
    unregister_socket = unregister

    def check(self) -> None:
        """Raise :class:`Cancelled` when the token is cancelled."""
        if self._event.is_set():
            raise Cancelled()

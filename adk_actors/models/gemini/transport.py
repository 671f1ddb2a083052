"""HTTP for the Gemini provider: pooled per-thread sessions whose sockets can be shut down from another thread.

Each thread gets its own ``requests.Session`` (connection pooling without sharing a session across threads). The
session's connection classes register their socket with the *call guard* active on the calling thread, both when
they connect and when a pooled connection is reused. The guard forwards sockets to the caller's
:class:`~adk_actors.models.cancel.CancelToken` and enforces the whole-request deadline by shutting them down.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from adk_actors.errors import ProviderError
from adk_actors.models.cancel import CancelToken
from adk_actors.runtime.threadtimers import thread_timers

__all__ = ["CallGuard", "close_sessions", "thread_session"]

_active = threading.local()
_local = threading.local()
_sessions: weakref.WeakSet[requests.Session] = weakref.WeakSet()
_sessions_lock = threading.Lock()


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class CallGuard:
    """The sockets of one provider call attempt, its cancel token and its optional whole-request deadline."""

    def __init__(self, token: CancelToken | None, deadline_s: float | None = None) -> None:
        self.token = token
        self.deadline_s = deadline_s
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer: int | None = None

    def attach(self, sock: socket.socket | None) -> None:
        """Record ``sock`` as carrying this call (shut down at once when already cancelled or expired)."""
        if sock is None:
            return
        with self._lock:
            if sock not in self._sockets:
                self._sockets.append(sock)
            expired = self.expired
        if self.token is not None:
            self.token.register(sock)
        if expired:
            _shutdown(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)

    @property
    def cancelled(self) -> bool:
        """Whether the caller's token was cancelled."""
        return self.token is not None and self.token.cancelled

    def check(self) -> None:
        """Raise if the call was cancelled or ran out of time.

        Raises:
            ProviderError: reason ``cancelled`` or ``timeout``.
        """
        if self.token is not None:
            self.token.raise_if_cancelled()
        if self.expired:
            raise ProviderError(
                "the Gemini request timed out",
                reason="timeout",
                details={"request_timeout_ms": round((self.deadline_s or 0) * 1000)},
            )

    @contextlib.contextmanager
    def active(self) -> Iterator[CallGuard]:
        """Make this guard the calling thread's current one; arm the deadline; release sockets on exit."""
        previous = getattr(_active, "guard", None)
        _active.guard = self
        if self.deadline_s is not None:
            self._timer = thread_timers.add(self.deadline_s, self._expire)
        try:
            yield self
        finally:
            _active.guard = previous
            if self._timer is not None:
                thread_timers.cancel(self._timer)
            with self._lock:
                sockets, self._sockets = self._sockets, []
            if self.token is not None:
                for sock in sockets:
                    self.token.unregister(sock)


def _attach_current(sock: socket.socket | None) -> None:
    guard: CallGuard | None = getattr(_active, "guard", None)
    if guard is not None:
        guard.attach(sock)


class _GuardedHTTPConnection(HTTPConnection):
    def connect(self) -> None:
        super().connect()
        _attach_current(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _attach_current(self.sock)  # a reused pooled connection never calls connect()
        super().request(*args, **kwargs)


class _GuardedHTTPSConnection(HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        _attach_current(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _attach_current(self.sock)
        super().request(*args, **kwargs)


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class _GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}


def _new_session() -> requests.Session:
    session = requests.Session()
    # No proxies, .netrc credentials or CA-bundle overrides from the environment: the key goes only where the
    # config says, and https is always verified against the default trust store.
    session.trust_env = False
    session.verify = True
    # One thread uses its session one call at a time: one keep-alive connection per server (at most 4 servers,
    # least recently used dropped) bounds the fds a host keeps to host_io_threads x 4, however many calls fail.
    adapter = _GuardedAdapter(pool_connections=4, pool_maxsize=1, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    with _sessions_lock:
        _sessions.add(session)
    return session


def thread_session() -> requests.Session:
    """The calling thread's pooled session (created on first use)."""
    session: requests.Session | None = getattr(_local, "session", None)
    if session is None:
        session = _local.session = _new_session()
    return session


def close_sessions() -> None:
    """Close every pooled connection of every thread's session (sessions stay usable and reconnect), and stop
    the timer thread when no timer is pending (it restarts with the next one)."""
    thread_timers.stop_if_idle()
    with _sessions_lock:
        sessions = list(_sessions)
    for session in sessions:
        for adapter in set(session.adapters.values()):
            manager = getattr(adapter, "poolmanager", None)
            if manager is None:
                continue
            # urllib3 2.x drops pools on clear() without closing them (a finalizer closes them at GC); a response
            # kept alive by a traceback would otherwise keep its pooled socket open.
            for key in list(manager.pools.keys()):
                pool = manager.pools.get(key)
                if pool is not None:
                    pool.close()
        session.close()

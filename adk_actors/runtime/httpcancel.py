"""``requests`` sessions whose sockets register on the current thread's cancel token.

A call made inside ``with use_token(token):`` on a session from :func:`cancellable_session` registers every
socket it uses (new or reused from the keep-alive pool) on ``token``; ``token.cancel()`` from another thread
shuts them down and the call fails at once, even while it waits for response headers.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from adk_actors.runtime.cancel import CancelToken

__all__ = ["cancellable_session", "current_token", "use_token"]

_local = threading.local()


def current_token() -> CancelToken | None:
    return getattr(_local, "token", None)


@contextlib.contextmanager
def use_token(token: CancelToken) -> Iterator[CancelToken]:
    """Make ``token`` the current thread's cancel token for the duration of the block."""
    previous = current_token()
    _local.token = token
    try:
        yield token
    finally:
        _local.token = previous


def _track(conn: Any) -> None:
    token = current_token()
    sock = getattr(conn, "sock", None)
    if token is not None and sock is not None:
        token.register_socket(sock)


class _TrackedHTTPConnection(HTTPConnection):
    def connect(self) -> None:
        super().connect()
        _track(self)


class _TrackedHTTPSConnection(HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        _track(self)


class _TrackedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        _track(conn)  # a reused keep-alive connection belongs to this call now
        return conn


class _TrackedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        _track(conn)
        return conn


class CancellableAdapter(HTTPAdapter):
    """An ``HTTPAdapter`` whose connections register their sockets on the current cancel token."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}


def cancellable_session(pool_maxsize: int = 16) -> requests.Session:
    """A ``requests.Session`` (TLS verification on) whose calls can be cancelled through :func:`use_token`."""
    session = requests.Session()
    adapter = CancellableAdapter(pool_connections=4, pool_maxsize=pool_maxsize)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session

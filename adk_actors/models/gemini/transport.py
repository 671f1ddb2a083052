"""HTTP for the Gemini provider: urllib3 connection pools kept per thread, whose sockets another thread can shut down.

Each thread keeps its own pools (one ``HTTPConnectionPool``/``HTTPSConnectionPool`` per server, at most
:data:`MAX_SERVERS`, one keep-alive connection each) and calls them directly with :func:`send`: no
``requests.Session`` in between, whose per-call merging of settings, hooks, cookies and environment cost more CPU
than the exchange itself on a fast answer (docs/ARCHITECTURE.md, "Refinements").

The pools' connection classes register their socket with the *call guard* active on the calling thread, both when
they connect and when a kept connection is reused. The guard forwards sockets to the caller's
:class:`~adk_actors.models.cancel.CancelToken` and enforces the whole-request deadline by shutting them down.

What ``requests`` did for us and this module keeps: https verified against certifi's CA bundle (one TLS context per
process, loaded once), ``Accept-Encoding: gzip, deflate`` with bodies decoded as they are read, the same request
headers, connect and read timeouts. What this module never does: honour a proxy, ``.netrc`` or CA-bundle variable
from the environment (the session had ``trust_env`` off too), or follow a redirect (``requests`` did; here a 3xx
is an HTTP error, so the API key never goes to a second server). A forked child drops the pools it inherited.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import ssl
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import certifi
from urllib3 import BaseHTTPResponse, Timeout
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import LocationParseError
from urllib3.util import create_urllib3_context, parse_url

from adk_actors.errors import ConfigError, ProviderError
from adk_actors.models.cancel import CancelToken
from adk_actors.runtime.threadtimers import thread_timers

__all__ = ["DEFAULT_HEADERS", "MAX_SERVERS", "USER_AGENT", "CallGuard", "close_sessions", "release", "send"]

USER_AGENT = "adk-actors/0.1 (gemini-rest)"
DEFAULT_HEADERS: Mapping[str, str] = MappingProxyType(
    {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate", "Accept": "*/*", "Connection": "keep-alive"}
)
"""Headers of every request (what ``requests`` sent by default, with our User-Agent)."""
MAX_SERVERS = 4
"""Pools one thread keeps (least recently used closed first): with one connection each, a host keeps at most
``host_io_threads x 4`` provider sockets, however many calls fail."""

_active = threading.local()
_local = threading.local()
_registry: weakref.WeakSet[_ThreadPools] = weakref.WeakSet()
_registry_lock = threading.Lock()


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
        _attach_current(self.sock)  # a reused kept connection never calls connect()
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


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The process's client TLS context: urllib3's defaults (TLS 1.2 or later, hostname checked) and certifi's CA
    bundle only, as ``requests`` verified; built once rather than once per new connection."""
    context = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
    context.load_verify_locations(cafile=certifi.where())
    return context


_Origin = tuple[str, str, int]


@functools.lru_cache(maxsize=64)
def _split_base(base_url: str) -> tuple[_Origin, str]:
    """``(scheme, host, port)`` and the percent-encoded path prefix of a service root.

    Raises:
        ConfigError: reason ``invalid_value`` when ``base_url`` is not an absolute http(s) URL.
    """
    try:
        parsed = parse_url(base_url)
    except LocationParseError:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host or parsed.auth:
        raise ConfigError(
            "the Gemini base URL is not an http(s) URL without credentials",
            reason="invalid_value",
            details={"key": "base_url"},
        )
    port = parsed.port if parsed.port is not None else (443 if parsed.scheme == "https" else 80)
    return (parsed.scheme, parsed.host, port), (parsed.path or "").rstrip("/")


class _ThreadPools:
    """One thread's pools, one per server, least recently used first."""

    __slots__ = ("__weakref__", "_lock", "_pools")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # close_sessions() may run on another thread
        self._pools: OrderedDict[_Origin, HTTPConnectionPool] = OrderedDict()

    def pool(self, origin: _Origin) -> HTTPConnectionPool:
        evicted: HTTPConnectionPool | None = None
        with self._lock:
            pool = self._pools.get(origin)
            if pool is not None:
                self._pools.move_to_end(origin)
                return pool
            pool = self._pools[origin] = _new_pool(origin)
            if len(self._pools) > MAX_SERVERS:
                evicted = self._pools.popitem(last=False)[1]
        if evicted is not None:
            evicted.close()
        return pool

    def close(self) -> None:
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.close()


def _new_pool(origin: _Origin) -> HTTPConnectionPool:
    scheme, host, port = origin
    # One thread makes one call at a time: one kept connection per server; block=False lets a call that finds the
    # slot taken (a response not yet released) open a second connection instead of waiting.
    if scheme == "https":
        return _GuardedHTTPSPool(
            host, port, maxsize=1, block=False, retries=False, cert_reqs="CERT_REQUIRED", ssl_context=_tls_context()
        )
    return _GuardedHTTPPool(host, port, maxsize=1, block=False, retries=False)


def _thread_pools() -> _ThreadPools:
    pools: _ThreadPools | None = getattr(_local, "pools", None)
    if pools is None:
        pools = _local.pools = _ThreadPools()
        with _registry_lock:
            _registry.add(pools)
    return pools


def send(
    method: str,
    base_url: str,
    path: str,
    *,
    body: bytes | None,
    headers: Mapping[str, str],
    timeout_s: float | None,
) -> BaseHTTPResponse:
    """Send one request on the calling thread's kept connection to ``base_url``; the body is left unread.

    Read the body with ``read1(n, decode_content=True)`` (gzip and deflate are decoded as they arrive) and call
    :func:`release` when done. Call inside ``CallGuard.active()`` so the socket is registered for cancel and the
    deadline. ``path`` (with its query) is appended to ``base_url``'s path and must already be URL-safe.

    Raises:
        ConfigError: reason ``invalid_value`` when ``base_url`` is not an http(s) URL.
        urllib3.exceptions.HTTPError, http.client.HTTPException, OSError: the transport failed (no retry, no
            redirect; a timeout is ``ConnectTimeoutError``/``ReadTimeoutError``).
    """
    origin, prefix = _split_base(base_url)
    pool = _thread_pools().pool(origin)
    return pool.urlopen(
        method,
        prefix + path,
        body=body,
        headers=headers,
        retries=False,
        redirect=False,
        assert_same_host=False,
        timeout=Timeout(connect=timeout_s, read=timeout_s),
        preload_content=False,
        decode_content=True,
    )


def release(resp: BaseHTTPResponse) -> None:
    """Give ``resp``'s connection back to its pool: kept alive when the body was read to its end, else closed (the
    pool reconnects on next use)."""
    resp.close()
    resp.release_conn()


def _forget_inherited() -> None:
    # A forked child must never write on its parent's kept connections: it drops the inherited pools (their
    # finalizers close only the child's copies of the descriptors) and opens its own.
    global _local, _registry, _registry_lock
    _local = threading.local()
    _registry = weakref.WeakSet()
    _registry_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_inherited)


def close_sessions() -> None:
    """Close every kept connection of every thread's pools (later calls reconnect), and stop the timer thread when
    no timer is pending (it restarts with the next one)."""
    thread_timers.stop_if_idle()
    with _registry_lock:
        holders = list(_registry)
    for holder in holders:
        holder.close()

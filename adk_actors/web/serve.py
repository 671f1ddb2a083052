"""Serving an edge app with uvicorn: the bind check, a blocking server, and a server on a thread.

Loopback only unless asked: :func:`check_bind` accepts ``127.0.0.0/8``, ``::1`` and ``localhost`` and refuses any
other address or host name unless ``allow_non_loopback`` is set (fail closed). uvicorn runs with the edge's bounds:
the h11 parser's header-block bound (just above ``max_header_bytes``, so the guard answers 431 in JSON for
anything the parser lets through), a connection limit, a short keep-alive, no ``server`` header, no proxy-header
trust (``X-Forwarded-*`` could forge the scheme and client the origin check relies on), no access log (request
lines can carry ids a deployment treats as private; the edge logs failures itself), and no logging configuration of
its own (the node's logging stays in charge).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from typing import Any

import uvicorn

from adk_actors.errors import ConfigError
from adk_actors.web.edge import EdgeLimits

__all__ = ["ServerThread", "check_bind", "run_server", "start_in_thread", "uvicorn_config"]

_HEADER_SLACK = 8 * 1024
"""Room for the request line on top of ``max_header_bytes`` in h11's bound of an incomplete header block."""


def check_bind(host: str, allow_non_loopback: bool = False) -> None:
    """Refuse a bind address that is not loopback unless ``allow_non_loopback`` is true.

    Loopback is ``127.0.0.0/8``, ``::1`` (also IPv4-mapped, and in brackets) and the name ``localhost``; every
    other name is refused without opt-in, because what it resolves to is not known here.

    Raises:
        ConfigError: reason ``non_loopback_bind`` (details: ``host``) without the opt-in, ``invalid_value`` for an
            empty or non-string host or a non-bool opt-in.
    """
    if not isinstance(allow_non_loopback, bool):
        raise ConfigError(
            "allow_non_loopback must be a bool", reason="invalid_value", details={"key": "allow_non_loopback"}
        )
    if not isinstance(host, str) or not host.strip() or len(host) > 253:
        raise ConfigError(
            "the bind host must be a non-empty name or address", reason="invalid_value", details={"key": "host"}
        )
    if _is_loopback(host) or allow_non_loopback:
        return
    raise ConfigError(
        "binding a non-loopback address needs the explicit allow_non_loopback opt-in",
        reason="non_loopback_bind",
        details={"host": host},
    )


def _is_loopback(host: str) -> bool:
    name = host.strip()
    if name.lower() == "localhost":
        return True
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _check_port(port: Any) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError("port must be an integer in [0, 65535]", reason="invalid_value", details={"key": "port"})
    return port


def uvicorn_config(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    limits: EdgeLimits | None = None,
    max_connections: int = 256,
    keep_alive_s: int = 5,
    graceful_shutdown_s: int = 5,
    log_level: str = "warning",
    tls: tuple[str, str] | None = None,
) -> uvicorn.Config:
    """The uvicorn configuration of an edge server (see the module docstring); no bind check here.

    ``tls``: ``(certfile, keyfile)`` paths to serve HTTPS directly (TLS 1.2 or later, the ``ssl`` module's server
    defaults).
    """
    limits = limits or EdgeLimits()
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or not 1 <= max_connections <= 100_000:
        raise ConfigError(
            "max_connections must be an integer in [1, 100000]",
            reason="invalid_value",
            details={"key": "max_connections"},
        )
    options: dict[str, Any] = {}
    if tls is not None:
        if not (isinstance(tls, tuple) and len(tls) == 2 and all(isinstance(p, str) and p for p in tls)):
            raise ConfigError("tls must be (certfile, keyfile)", reason="invalid_value", details={"key": "tls"})
        options = {"ssl_certfile": tls[0], "ssl_keyfile": tls[1]}
    return uvicorn.Config(
        app,
        **options,
        host=host,
        port=_check_port(port),
        http="h11",
        # WebSockets for the voice bridge (docs/VOICE_BRIDGE.md): the sans-I/O websockets protocol, frames bounded
        # like request bodies, no compression (a deflate bomb is not ours to inflate). Every other path refuses a
        # WebSocket (the edge guard closes it with 1008).
        ws="websockets-sansio",
        ws_max_size=limits.max_body_bytes,
        ws_per_message_deflate=False,
        lifespan="auto",
        interface="asgi3",
        h11_max_incomplete_event_size=limits.max_header_bytes + _HEADER_SLACK,
        limit_concurrency=max_connections,
        timeout_keep_alive=keep_alive_s,
        timeout_graceful_shutdown=graceful_shutdown_s,
        server_header=False,
        proxy_headers=False,
        access_log=False,
        log_config=None,
        log_level=log_level,
        use_colors=False,
    )


def run_server(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    allow_non_loopback: bool = False,
    limits: EdgeLimits | None = None,
    max_connections: int = 256,
    keep_alive_s: int = 5,
    graceful_shutdown_s: int = 5,
    log_level: str = "warning",
) -> None:
    """Serve ``app`` on ``host:port`` until SIGINT/SIGTERM (blocking; signals are handled on the main thread).

    Raises:
        ConfigError: as :func:`check_bind`, or ``invalid_value`` for a bad port or connection bound.
    """
    check_bind(host, allow_non_loopback)
    config = uvicorn_config(
        app,
        host,
        port,
        limits=limits,
        max_connections=max_connections,
        keep_alive_s=keep_alive_s,
        graceful_shutdown_s=graceful_shutdown_s,
        log_level=log_level,
    )
    uvicorn.Server(config).run()


class ServerThread:
    """A uvicorn server running on a daemon thread (see :func:`start_in_thread`); a context manager that stops it."""

    def __init__(self, server: uvicorn.Server, sock: socket.socket, host: str, *, scheme: str = "http") -> None:
        self._server = server
        self._socket = sock
        self.port: int = sock.getsockname()[1]
        """The bound port (the real one when 0 was asked)."""
        netloc = f"[{host}]" if ":" in host else host
        self.url = f"{scheme}://{netloc}:{self.port}"
        """``http(s)://host:port`` without a trailing slash."""
        self.error: BaseException | None = None
        """What stopped the server thread, when it failed."""
        self._thread = threading.Thread(target=self._run, name=f"adk-edge-server-{self.port}", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self._socket]))
        except BaseException as exc:  # SystemExit from a failed lifespan startup included
            self.error = exc
        finally:
            self._socket.close()

    def _wait_started(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ConfigError(
                    "the edge server did not start", reason="server_start_failed", details={"port": self.port}
                )
            self._thread.join(0.01)

    @property
    def running(self) -> bool:
        """Whether the server thread is alive."""
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop serving: close the listener, let open requests finish for the graceful-shutdown time, then cancel
        them. Returns whether the thread ended within ``timeout`` seconds."""
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_in_thread(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    allow_non_loopback: bool = False,
    limits: EdgeLimits | None = None,
    max_connections: int = 256,
    graceful_shutdown_s: int = 2,
    start_timeout_s: float = 10.0,
    log_level: str = "warning",
    tls: tuple[str, str] | None = None,
) -> ServerThread:
    """Serve ``app`` on a thread (for tests and for embedding) and return once it accepts connections.

    The listening socket is bound here, so ``port=0`` gives a free port that :attr:`ServerThread.port` reports.

    Raises:
        ConfigError: as :func:`check_bind`; ``server_start_failed`` when the app's lifespan startup fails or the
            server is not up within ``start_timeout_s``; ``bind_failed`` (details: ``host``, ``port``) when the
            address cannot be bound.
    """
    check_bind(host, allow_non_loopback)
    _check_port(port)
    config = uvicorn_config(
        app,
        host,
        port,
        limits=limits,
        max_connections=max_connections,
        graceful_shutdown_s=graceful_shutdown_s,
        log_level=log_level,
        tls=tls,
    )
    if tls is not None:
        try:
            config.load()  # reads the certificate and key now: a bad file fails here, not on the server thread
        except (OSError, ValueError) as exc:
            raise ConfigError(
                "the TLS certificate or key cannot be loaded",
                reason="tls_unreadable",
                details={"error": type(exc).__name__},
            ) from None
    name = "127.0.0.1" if host.strip().lower() == "localhost" else host.strip().strip("[]")
    family = socket.AF_INET6 if ":" in name else socket.AF_INET
    # IPPROTO_TCP named explicitly: asyncio turns Nagle off (TCP_NODELAY) only on accepted sockets whose protocol
    # says TCP, and with Nagle on, a response's body waits up to 40 ms (the peer's delayed ACK) behind its headers
    # on a reused connection (measured: every JSON answer and every SSE stream, docs/PERFORMANCE.md).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((name, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise ConfigError(
            "could not bind the edge server", reason="bind_failed", details={"host": host, "port": port}
        ) from None
    handle = ServerThread(uvicorn.Server(config), sock, name, scheme="https" if tls is not None else "http")
    handle._thread.start()
    handle._wait_started(start_timeout_s)
    return handle

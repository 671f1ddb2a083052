"""The HTTP edge: its bounds, the developer bearer token, the guard in front of every app and the one error shape.

Every HTTP surface of adk_actors (the ``/dev/v1`` API and console, later MCP and A2A) is a Starlette app wrapped in
:class:`EdgeGuard`, usually built with :func:`edge_app`. The guard is plain ASGI (``BaseHTTPMiddleware`` buffers
and breaks streaming) and refuses, before the app sees anything, in this order:

1. too many or too large request headers — 431 ``headers_too_large``;
2. a credential in the query string (``?token=``, ``?access_token=``, ...) — 400 ``token_in_query``;
3. a protected path without ``Authorization: Bearer <token>`` matching the :class:`DevToken` — 401 ``unauthorized``
   (the same answer for a missing and a wrong token);
4. an ``Origin`` header that is not the request's own ``scheme://host[:port]`` — 403 ``cross_origin``;
5. a ``Content-Length`` over the body bound — 413 ``body_too_large``; a body that grows past it while it streams
   in (chunked, or a server that let a lying ``Content-Length`` through) is cut off with the same answer.

It then puts the inbound W3C trace context in ``scope["state"]["trace"]`` (``None`` when absent or malformed), its
:class:`EdgeLimits` in ``scope["state"]["edge_limits"]`` and its SSE slot counter in
``scope["state"]["edge_streams"]``. The edge never does CORS: ``Access-Control-*`` headers an app sets are removed.

Errors are JSON ``{"error": {"reason": ..., "message": ..., **details}}`` (:func:`error_response`). Messages are
fixed per reason (or the domain error's own structural message, scrubbed) and details are structural: nothing from
the request (bodies, header values, tokens) is echoed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from http import HTTPStatus
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Lifespan, Message, Receive, Scope, Send

from adk_actors.errors import (
    AdkError,
    AskTimeout,
    AuthError,
    ConcurrencyConflict,
    ConfigError,
    NameNotFound,
    RateLimited,
    RunNotFound,
    SchemaError,
    SessionNotFound,
    SystemNotRunning,
    ValidationError,
    json_safe,
)
from adk_actors.logs import log_crash, scrub
from adk_actors.observability import from_headers

__all__ = [
    "EDGE_REASON_STATUS",
    "ERROR_STATUS",
    "LIMIT_BOUNDS",
    "MIN_TOKEN_BYTES",
    "QUERY_TOKEN_NAMES",
    "DevToken",
    "EdgeGuard",
    "EdgeLimits",
    "StreamSlots",
    "adk_error_handler",
    "check_limits",
    "edge_app",
    "error_for",
    "error_response",
    "exception_handlers",
    "host_header_name",
    "http_error_handler",
    "internal_error_handler",
    "is_loopback_name",
    "read_json",
    "status_for",
    "strict_json",
]

_KIB = 1024
_MIB = 1024 * 1024

LIMIT_BOUNDS: Mapping[str, tuple[float, float]] = MappingProxyType(
    {
        "max_body_bytes": (1, 64 * _MIB),
        "max_header_bytes": (1 * _KIB, 64 * _KIB),
        "max_headers": (1, 256),
        "max_concurrent_streams": (1, 10_000),
        "sse_max_events": (1, 10_000),
        "sse_max_bytes": (1, 16 * _MIB),
        "sse_max_duration_ms": (1, 3_600_000),
        "max_page_size": (1, 10_000),
        "keepalive_s": (0.001, 3600.0),
    }
)
"""The inclusive ``(minimum, hard maximum)`` of every :class:`EdgeLimits` field: a typo in a setting can shrink a
bound, never remove it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgeLimits:
    """The bounds one edge enforces (defaults from the reference's developer tooling section).

    Raises:
        ConfigError: reason ``invalid_value`` (details: ``key``, ``minimum``, ``maximum``) for a value that is not a
            number of the right kind or lies outside :data:`LIMIT_BOUNDS`.
    """

    max_body_bytes: int = 1 * _MIB
    """Largest request body, counted as it streams in (``Content-Length`` is checked first)."""
    max_header_bytes: int = 16 * _KIB
    """Largest total of header names and values of one request."""
    max_headers: int = 64
    """Most header lines in one request."""
    max_concurrent_streams: int = 64
    """Most SSE streams open at once on one guard; one more answers 503 ``too_many_streams``."""
    sse_max_events: int = 128
    """Events one SSE connection carries before it closes with ``event: bound``."""
    sse_max_bytes: int = 1 * _MIB
    """Encoded event bytes one SSE connection carries before it closes with ``event: bound``."""
    sse_max_duration_ms: int = 300_000
    """Lifetime of one SSE connection before it closes with ``event: bound``."""
    max_page_size: int = 100
    """Largest page a list route returns."""
    keepalive_s: float = 15.0
    """Idle time after which an SSE stream sends a ``: keepalive`` comment."""

    def __post_init__(self) -> None:
        check_limits(self, LIMIT_BOUNDS)


def check_limits(limits: Any, bounds: Mapping[str, tuple[float, float]]) -> None:
    """Check every field of a limits dataclass against its ``[low, high]`` bound: an integer, or for a field whose
    name ends in ``_s``, a finite number of seconds.

    Raises:
        ConfigError: ``invalid_value`` (details: ``key``, ``minimum``, ``maximum``).
    """
    for spec in fields(limits):
        value = getattr(limits, spec.name)
        low, high = bounds[spec.name]
        integral = not spec.name.endswith("_s")
        ok = isinstance(value, int) if integral else isinstance(value, int | float) and math.isfinite(value)
        if isinstance(value, bool) or not ok or not low <= value <= high:
            kind = "an integer" if integral else "a number of seconds"
            raise ConfigError(
                f"{spec.name} must be {kind} in [{low}, {high}]",
                reason="invalid_value",
                details={"key": spec.name, "minimum": low, "maximum": high},
            )


MIN_TOKEN_BYTES = 16
"""Shortest developer token accepted (UTF-8 bytes)."""
_TOKEN_CHARS = re.compile(r"[\x21-\x7e]+")
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +([\x21-\x7e]+) *")


class DevToken:
    """The developer bearer token, kept only as its SHA-256 digest.

    A token is at least :data:`MIN_TOKEN_BYTES` bytes of visible ASCII (what fits an ``Authorization`` header
    unchanged). :meth:`check` hashes the presented token and compares digests with :func:`hmac.compare_digest`, so
    the comparison time says nothing about the token. The raw value is dropped after hashing; ``repr`` shows nothing
    of either.
    """

    __slots__ = ("_digest",)

    def __init__(self, raw: str) -> None:
        """Hash ``raw`` and forget it.

        Raises:
            ConfigError: reason ``weak_token`` (shorter than :data:`MIN_TOKEN_BYTES` bytes) or ``invalid_token``
                (not a string, or characters other than visible ASCII). The token never appears in the error.
        """
        if not isinstance(raw, str):
            raise ConfigError("the developer token must be a string", reason="invalid_token")
        if len(raw.encode("utf-8", "surrogatepass")) < MIN_TOKEN_BYTES:
            raise ConfigError(
                f"the developer token must be at least {MIN_TOKEN_BYTES} bytes",
                reason="weak_token",
                details={"min_bytes": MIN_TOKEN_BYTES},
            )
        if not _TOKEN_CHARS.fullmatch(raw):
            raise ConfigError(
                "the developer token may contain only visible ASCII characters (no spaces)", reason="invalid_token"
            )
        self._digest = hashlib.sha256(raw.encode("ascii")).digest()

    @classmethod
    def from_env(cls, name: str = "ADK_DEV_TOKEN", environ: Mapping[str, str] | None = None) -> DevToken:
        """The token in environment variable ``name`` (of ``environ``, default ``os.environ``).

        Raises:
            ConfigError: reason ``missing_token`` (details: ``env``) when unset or empty, else as the constructor.
        """
        raw = (os.environ if environ is None else environ).get(name)
        if not raw:
            raise ConfigError(f"set {name} to enable the developer API", reason="missing_token", details={"env": name})
        return cls(raw)

    def check(self, header_value: str | bytes | None) -> bool:
        """Whether ``header_value`` is ``Bearer <this token>`` (scheme case-insensitive, one value)."""
        if isinstance(header_value, bytes):
            header_value = header_value.decode("latin-1")
        if not isinstance(header_value, str):
            return False
        match = _BEARER.fullmatch(header_value)
        if match is None:
            return False
        return hmac.compare_digest(hashlib.sha256(match.group(1).encode("ascii")).digest(), self._digest)

    def __repr__(self) -> str:
        return "DevToken(<hidden>)"


class StreamSlots:
    """A counter of open SSE streams with a fixed limit, shared by everything behind one :class:`EdgeGuard`."""

    __slots__ = ("_lock", "_used", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    @property
    def in_use(self) -> int:
        """Streams open now."""
        return self._used

    def try_acquire(self) -> bool:
        """Take a slot; ``False`` when all :attr:`limit` are taken."""
        with self._lock:
            if self._used >= self.limit:
                return False
            self._used += 1
            return True

    def release(self) -> None:
        """Give a slot back (exactly once per successful :meth:`try_acquire`)."""
        with self._lock:
            self._used = max(0, self._used - 1)


# --- errors ---------------------------------------------------------------------------------------------------

_MESSAGES: Mapping[str, str] = MappingProxyType(
    {
        "headers_too_large": "the request headers exceed the edge's bounds",
        "token_in_query": "credentials are accepted only in the Authorization header",
        "unauthorized": "a valid bearer token is required",
        "cross_origin": "cross-origin requests are refused",
        "body_too_large": "the request body exceeds the edge's bound",
        "invalid_content_length": "the Content-Length header is malformed",
        "unsupported_media_type": "the body must be application/json (UTF-8)",
        "invalid_json": "the body is not valid JSON",
        "invalid_body": "the body must be a JSON object",
        "not_found": "no such resource",
        "method_not_allowed": "this method is not allowed on this resource",
        "internal": "internal error",
        "edge_busy": "the edge is busy; retry later",
        "edge_closed": "the edge is shutting down",
        "too_many_streams": "too many concurrent streams; retry later",
    }
)

EDGE_REASON_STATUS: Mapping[str, int] = MappingProxyType(
    {
        "body_too_large": 413,
        "unsupported_media_type": 415,
        "edge_busy": 503,
        "edge_closed": 503,
        "too_many_streams": 503,
    }
)
"""Statuses of the reasons the edge itself raises as :class:`AdkError` (they win over :data:`ERROR_STATUS`)."""

ERROR_STATUS: Mapping[type[AdkError], int] = MappingProxyType(
    {
        ValidationError: 400,
        SchemaError: 400,
        AuthError: 401,
        NameNotFound: 404,
        RunNotFound: 404,
        SessionNotFound: 404,
        ConcurrencyConflict: 409,
        RateLimited: 429,
        AskTimeout: 504,
        SystemNotRunning: 503,
    }
)
"""HTTP status per error class; a class not listed takes its nearest listed base's status, else 500."""


def status_for(err: AdkError) -> int:
    """The HTTP status that answers ``err`` (:data:`EDGE_REASON_STATUS`, then :data:`ERROR_STATUS`, else 500)."""
    by_reason = EDGE_REASON_STATUS.get(err.reason)
    if by_reason is not None:
        return by_reason
    for cls in type(err).__mro__:
        status = ERROR_STATUS.get(cls)
        if status is not None:
            return status
    return 500


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "error"


def error_response(
    status: int,
    reason: str,
    /,
    *,
    message: str | None = None,
    headers: Mapping[str, str] | None = None,
    **details: Any,
) -> JSONResponse:
    """The edge's one error shape: ``{"error": {"reason", "message", **details}}`` with ``status``.

    ``message`` defaults to the fixed text of ``reason`` (never the request's input); ``details`` are made JSON-safe
    and bounded, and may not replace ``reason`` or ``message``.
    """
    body: dict[str, Any] = {k: v for k, v in json_safe(details).items() if k not in ("reason", "message")}
    text = message if message is not None else _MESSAGES.get(reason, _phrase(status))
    return JSONResponse({"error": {"reason": reason, "message": text, **body}}, status_code=status, headers=headers)


def error_for(err: AdkError) -> JSONResponse:
    """The error response for a domain error: its status (:func:`status_for`), reason, scrubbed message, details.

    A missing session is answered with a fixed message and no details: its message and details name the ids the
    request asked for, and the edge echoes nothing from a request."""
    if isinstance(err, SessionNotFound):
        return error_response(status_for(err), err.reason, message="the session does not exist")
    return error_response(status_for(err), err.reason, message=scrub(err.message), **err.details)


async def adk_error_handler(request: Request, exc: Exception) -> Response:
    """Starlette exception handler for :class:`AdkError` (see :func:`exception_handlers`)."""
    if not isinstance(exc, AdkError):  # pragma: no cover - Starlette routes only AdkError here
        return await internal_error_handler(request, exc)
    return error_for(exc)


_HTTP_REASONS: Mapping[int, str] = MappingProxyType({404: "not_found", 405: "method_not_allowed"})


async def http_error_handler(request: Request, exc: Exception) -> Response:
    """Starlette exception handler for :class:`HTTPException` (unknown routes, wrong methods) in our shape.

    The exception's ``detail`` is not echoed; a 405 keeps its ``Allow`` header.
    """
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    reason = _HTTP_REASONS.get(status) or _phrase(status).replace(" ", "_").replace("-", "_").replace("'", "")
    headers = getattr(exc, "headers", None)
    if status < 400:  # pragma: no cover - only error statuses are raised as HTTPException here
        return Response(status_code=status, headers=headers)
    return error_response(status, reason, headers=headers)


async def internal_error_handler(request: Request, exc: Exception) -> Response:
    """Starlette handler for any other exception: 500 ``internal`` with no text of the exception."""
    return error_response(500, "internal")


def exception_handlers() -> dict[Any, Callable[..., Any]]:
    """The ``exception_handlers`` of a Starlette app on the edge: domain errors, HTTP errors, everything else."""
    return {AdkError: adk_error_handler, HTTPException: http_error_handler, Exception: internal_error_handler}


# --- JSON bodies ----------------------------------------------------------------------------------------------


def _refuse_constant(name: str) -> Any:
    raise ValueError("non-standard JSON constant")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key in a JSON object")
    return out


def strict_json(body: bytes) -> Any:
    """One strict JSON value from a UTF-8 body: no ``NaN``/``Infinity``, no duplicate keys.

    Raises:
        ValueError: not UTF-8, not JSON, or not strict (``RecursionError`` for absurd nesting).
    """
    return json.loads(body.decode("utf-8"), parse_constant=_refuse_constant, object_pairs_hook=_unique_object)


def _limits_of(request: Request, limits: EdgeLimits | None) -> EdgeLimits:
    if limits is not None:
        return limits
    state = request.scope.get("state") or {}
    found = state.get("edge_limits")
    return found if isinstance(found, EdgeLimits) else EdgeLimits()


async def read_json(request: Request, limits: EdgeLimits | None = None) -> dict[str, Any]:
    """The request's body as a JSON object, read strictly and within ``max_body_bytes``.

    ``limits`` defaults to the guard's. Strict: UTF-8 only, no ``NaN``/``Infinity``, no duplicate keys, the top
    level an object.

    Raises:
        ValidationError: reason ``unsupported_media_type`` (415: not ``application/json``, or a charset other than
            UTF-8), ``body_too_large`` (413), ``invalid_json`` (400) or ``invalid_body`` (400: not an object).
    """
    bound = _limits_of(request, limits).max_body_bytes
    media, _, params = request.headers.get("content-type", "").partition(";")
    charset = ""
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    if media.strip().lower() != "application/json" or charset not in ("", "utf-8", "utf8"):
        raise ValidationError("the body must be application/json", reason="unsupported_media_type")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > bound:
            raise ValidationError("the body is too large", reason="body_too_large", details={"max_bytes": bound})
    try:
        value = strict_json(bytes(body))
    except (ValueError, RecursionError):
        raise ValidationError("the body is not valid JSON", reason="invalid_json") from None
    if not isinstance(value, dict):
        raise ValidationError("the body must be a JSON object", reason="invalid_body")
    return value


# --- the guard ------------------------------------------------------------------------------------------------

QUERY_TOKEN_NAMES = frozenset({"token", "access_token", "auth", "authorization", "bearer"})
"""Query parameter names (case-insensitive, after percent-decoding) that are refused: credentials travel only in
the ``Authorization`` header, never in a URL that ends up in logs and browser history."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_WS_SCHEMES = {"ws": "http", "wss": "https"}


def _values(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [value for key, value in headers if key.lower() == name]


def _query_names(query: bytes) -> Iterable[str]:
    for part in re.split(r"[&;]", query.decode("latin-1")):
        if part:
            yield unquote_plus(part.partition("=")[0]).strip().lower()


def _endpoint(scheme: str, host: str | None, port: int | None) -> tuple[str, str, int] | None:
    if not host or scheme not in _DEFAULT_PORTS:
        return None
    return scheme, host.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


def _own_origin(scope: Scope, hosts: list[bytes]) -> tuple[str, str, int] | None:
    scheme = str(scope.get("scheme", "http")).lower()
    scheme = _WS_SCHEMES.get(scheme, scheme)
    if len(hosts) > 1:
        return None
    if hosts:
        try:
            parts = urlsplit("//" + hosts[0].decode("latin-1"))
            if parts.path or parts.query or parts.fragment or parts.username is not None:
                return None
            return _endpoint(scheme, parts.hostname, parts.port)
        except ValueError:
            return None
    server = scope.get("server")
    if not server:
        return None
    return _endpoint(scheme, str(server[0]), int(server[1]) if server[1] is not None else None)


def _same_origin(scope: Scope, origin: bytes, hosts: list[bytes]) -> bool:
    try:
        parts = urlsplit(origin.decode("latin-1"))
        claimed = _endpoint(parts.scheme.lower(), parts.hostname, parts.port)
        if parts.path or parts.query or parts.fragment or parts.username is not None:
            return False
    except ValueError:
        return False
    own = _own_origin(scope, hosts)
    return claimed is not None and claimed == own


def _nothing_public(path: str) -> bool:
    return False


class EdgeGuard:
    """Pure-ASGI guard in front of an edge app (see the module docstring for what it refuses, in order).

    Args:
        app: the ASGI app behind the guard.
        token: the developer token; ``None`` refuses every protected path (fail closed).
        limits: the bounds (default :class:`EdgeLimits`).
        public: ``public(path) -> bool`` for paths served without a token (a console's static page); they still get
            every other check. ``path`` is ``scope["path"]`` (percent-decoded, mount prefix included).

    Raises:
        ConfigError: reason ``invalid_value`` for a ``token`` that is not a :class:`DevToken`, ``limits`` that are
            not :class:`EdgeLimits` or a ``public`` that is not callable.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: DevToken | None,
        limits: EdgeLimits | None = None,
        public: Callable[[str], bool] | None = None,
    ) -> None:
        if token is not None and not isinstance(token, DevToken):
            raise ConfigError("token must be a DevToken", reason="invalid_value", details={"key": "token"})
        if limits is not None and not isinstance(limits, EdgeLimits):
            raise ConfigError("limits must be EdgeLimits", reason="invalid_value", details={"key": "limits"})
        if public is not None and not callable(public):
            raise ConfigError("public must be callable", reason="invalid_value", details={"key": "public"})
        self.app = app
        self.token = token
        self.limits = limits or EdgeLimits()
        self.public = public or _nothing_public
        self.streams = StreamSlots(self.limits.max_concurrent_streams)
        """The SSE slots of everything behind this guard."""

    def _refusal(self, scope: Scope) -> tuple[int, str, dict[str, str]] | None:
        """``(status, reason, headers)`` of the first check ``scope`` fails, else ``None``."""
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or ())
        size = sum(len(key) + len(value) for key, value in headers)
        if len(headers) > self.limits.max_headers or size > self.limits.max_header_bytes:
            return 431, "headers_too_large", {"connection": "close"}
        if any(name in QUERY_TOKEN_NAMES for name in _query_names(scope.get("query_string") or b"")):
            return 400, "token_in_query", {}
        if not self._is_public(str(scope.get("path", ""))):
            auth = _values(headers, b"authorization")
            if self.token is None or len(auth) != 1 or not self.token.check(auth[0]):
                return 401, "unauthorized", {"www-authenticate": "Bearer"}
        origins = _values(headers, b"origin")
        if origins and (len(origins) > 1 or not _same_origin(scope, origins[0], _values(headers, b"host"))):
            return 403, "cross_origin", {}
        return None

    def _is_public(self, path: str) -> bool:
        try:
            return bool(self.public(path))
        except Exception:  # a broken predicate protects the path (fail closed)
            return False

    def _with_state(self, scope: Scope) -> Scope:
        state = dict(scope.get("state") or {})
        state["trace"] = from_headers(Headers(scope=scope))
        state["edge_limits"] = self.limits
        state["edge_streams"] = self.streams
        return {**scope, "state": state}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if kind == "http":
            send = _headers_filter(send)
        refusal = self._refusal(scope)
        if refusal is not None:
            status, reason, headers = refusal
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                await error_response(status, reason, headers=headers)(scope, receive, send)
            return
        scope = self._with_state(scope)
        if kind == "websocket":
            await self.app(scope, receive, send)
            return
        lengths = _values(list(scope.get("headers") or ()), b"content-length")
        if lengths:
            if len(set(lengths)) != 1 or not re.fullmatch(rb"[0-9]{1,19}", lengths[0]):
                await error_response(400, "invalid_content_length", headers={"connection": "close"})(
                    scope, receive, send
                )
                return
            if int(lengths[0]) > self.limits.max_body_bytes:
                await self._too_large(scope, receive, send)
                return
        await _Exchange(self, scope, receive, send).run()

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413, "body_too_large", headers={"connection": "close"}, max_bytes=self.limits.max_body_bytes
        )
        await response(scope, receive, send)


_NOSNIFF = (b"x-content-type-options", b"nosniff")


def _headers_filter(send: Send) -> Send:
    """``send`` without ``Access-Control-*`` response headers (no CORS, whatever an app sets) and with
    ``X-Content-Type-Options: nosniff``."""

    async def filtered(message: Message) -> None:
        if message["type"] == "http.response.start":
            kept = [(k, v) for k, v in message.get("headers", ()) if not k.lower().startswith(b"access-control-")]
            if not any(k.lower() == _NOSNIFF[0] for k, _ in kept):
                kept.append(_NOSNIFF)
            message = {**message, "headers": kept}
        await send(message)

    return filtered


class _Exchange:
    """One HTTP request/response through the guard: counts the body in, tracks the response going out."""

    __slots__ = ("guard", "receive", "received", "refused", "scope", "send", "started")

    def __init__(self, guard: EdgeGuard, scope: Scope, receive: Receive, send: Send) -> None:
        self.guard, self.scope, self.receive, self.send = guard, scope, receive, send
        self.received = 0
        self.refused = False
        self.started = False

    async def run(self) -> None:
        try:
            await self.guard.app(self.scope, self.guarded_receive, self.guarded_send)
        except ClientDisconnect:
            return
        except Exception as exc:
            if self.refused:
                return  # the app saw the cut-off body as a disconnect; the client already has its 413
            log_crash(
                "adk_actors.web",
                "edge_unhandled_exception",
                exc,
                method=self.scope.get("method", ""),
                path=self.scope.get("path", ""),
            )
            if not self.started:
                await error_response(500, "internal")(self.scope, self.receive, self.send)

    async def guarded_receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self.receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.guard.limits.max_body_bytes:
                self.refused = True
                if not self.started:
                    self.started = True
                    await self.guard._too_large(self.scope, self.receive, self.send)
                return {"type": "http.disconnect"}
        return message

    async def guarded_send(self, message: Message) -> None:
        if self.refused:
            return
        if message["type"] == "http.response.start":
            self.started = True
        await self.send(message)


def edge_app(
    routes: Sequence[Any],
    *,
    token: DevToken | None,
    limits: EdgeLimits | None = None,
    public: Callable[[str], bool] | None = None,
    lifespan: Lifespan[Any] | None = None,
) -> EdgeGuard:
    """A Starlette app with the edge's exception handlers, behind an :class:`EdgeGuard`.

    This is the base of every surface factory (``dev_app``, ``mcp_app``, ``a2a_app``); the result is a plain ASGI
    app a user can mount in their own Starlette/FastAPI service.

    Raises:
        ConfigError: as :class:`EdgeGuard`.
    """
    app = Starlette(routes=list(routes), exception_handlers=exception_handlers(), lifespan=lifespan)
    return EdgeGuard(app, token=token, limits=limits, public=public)


def host_header_name(raw: str) -> str:
    """The host of a ``Host`` header value, lower-cased, without the port (an IPv6 address keeps its brackets)."""
    raw = raw.strip().lower()
    if raw.startswith("["):
        end = raw.find("]")
        return raw[: end + 1] if end > 0 else ""
    return raw.partition(":")[0]


def is_loopback_name(host: str) -> bool:
    """Whether a host name or address (IPv6 bracketed or not) is ``localhost`` or loopback."""
    from adk_actors.settings import is_loopback_host

    return is_loopback_host(host.strip("[]"))

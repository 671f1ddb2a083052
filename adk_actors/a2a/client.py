"""A synchronous A2A 1.0 client over the JSON-RPC binding (``requests``; docs/A2A.md, "Client").

::

    card = discover("https://agent.example.com")                      # GET /.well-known/agent-card.json
    with A2aClient(card, auth=token_manager.headers, auth_scheme="company-oidc") as client:
        result = client.send("Write a short poem")                    # {"task": {...}} or {"message": {...}}
        for event in client.stream("and another one"):                # StreamResponse dicts, bounded
            ...

Safety rules, all fail closed:

* ``https://`` only; clear ``http://`` only for a loopback host with ``allow_http_loopback=True``. Proxies and
  ``.netrc`` from the environment are ignored and redirects are never followed (a 3xx is an ``a2a_http_error``).
* The card's JSON-RPC interface must be on the card's own origin unless ``allowed_interface_origins`` lists its
  origin (``cross_origin_interface``).
* Credentials come from ``auth()``, called just in time for every RPC request (a token manager can rotate them);
  the headers are never stored, logged or put in an error. They are only sent for a scheme the card declares
  (``auth_scheme``); a secured card without them fails before any request (``undeclared_auth_scheme``,
  ``missing_auth``). Discovery has its own ``auth`` and never receives the RPC credentials.
* Every call has one absolute deadline (``timeout_s``; the sockets are shut down when it passes) and honours a
  :class:`~adk_actors.runtime.cancel.CancelToken`; responses and stream events are size-bounded and streams
  count-bounded.

Errors are :class:`~adk_actors.errors.A2aError`: a peer's JSON-RPC error becomes the snake_case of its
``google.rpc.ErrorInfo`` reason (``task_not_found``, ``task_not_cancelable``...) with ``details["code"]``; the
client's own reasons are ``a2a_http_error`` (``status``), ``a2a_response_too_large``, ``a2a_too_many_events``,
``a2a_timeout``, ``a2a_connection_failed``, ``a2a_invalid_response``, ``cancelled``, ``insecure_url``,
``invalid_url``, ``invalid_agent_card``, ``no_jsonrpc_interface``, ``cross_origin_interface``,
``undeclared_auth_scheme``, ``missing_auth``, ``unsupported_auth_scheme``, ``auth_failed``, ``invalid_auth_headers``,
``streaming_not_supported``, ``invalid_id`` and ``invalid_filter``.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import requests
import urllib3

from adk_actors.a2a.wire import (
    ERROR_REASONS,
    INTERRUPTED,
    PROTOCOL_VERSION,
    STATES,
    TERMINAL,
    VERSION_HEADER,
    check_message,
    new_id,
)
from adk_actors.errors import A2aError, AdkError
from adk_actors.runtime.cancel import CancelToken
from adk_actors.runtime.httpcancel import CancellableAdapter, use_token
from adk_actors.runtime.threadtimers import thread_timers
from adk_actors.settings import is_loopback_host

__all__ = [
    "CARD_PATH",
    "MAX_CARD_BYTES",
    "MAX_EVENTS",
    "MAX_MESSAGE_BYTES",
    "MAX_RESPONSE_BYTES",
    "A2aClient",
    "A2aStream",
    "AgentCard",
    "AuthHeaders",
    "cancel",
    "discover",
    "get",
    "parse_card",
    "send",
    "stream",
    "subscribe",
]

CARD_PATH: Final = "/.well-known/agent-card.json"
MAX_CARD_BYTES: Final = 1024 * 1024
MAX_RESPONSE_BYTES: Final = 4 * 1024 * 1024
MAX_MESSAGE_BYTES: Final = 4 * 1024 * 1024
"""Bound of the parts of one outgoing message (text bytes, decoded ``raw`` bytes, ``data`` JSON)."""
MAX_EVENTS: Final = 1024
_CONNECT_TIMEOUT_S: Final = 10.0
_READ_CHUNK: Final = 64 * 1024

AuthHeaders = Callable[[], Mapping[str, str]]
"""Returns the credential headers of one request (called just in time, once per request)."""

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
_RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-type",
        "content-length",
        "transfer-encoding",
        "connection",
        "accept",
        "accept-encoding",
        "a2a-version",
        "last-event-id",
        "cookie",
    }
)
_PEER_REASON = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_OUR_REASON = re.compile(r"[a-z][a-z0-9_]{0,63}")
_STREAM_KINDS = ("task", "message", "statusUpdate", "artifactUpdate")
_FILTERS = {
    "context_id": "contextId",
    "status": "status",
    "page_size": "pageSize",
    "page_token": "pageToken",
    "history_length": "historyLength",
    "status_timestamp_after": "statusTimestampAfter",
    "include_artifacts": "includeArtifacts",
}


# -- URLs and the agent card ----------------------------------------------------------------------------------


def _origin(url: str, allow_http_loopback: bool, field: str) -> tuple[str, urllib.parse.SplitResult]:
    """The ``scheme://host[:port]`` origin of ``url`` after the transport rules (https, or loopback http)."""
    if not isinstance(url, str) or len(url) > 2048 or not url.isprintable():
        raise A2aError("an A2A URL must be a short printable string", reason="invalid_url", details={"field": field})
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        raise A2aError("not a valid URL", reason="invalid_url", details={"field": field}) from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host or parts.username is not None or parts.password is not None:
        raise A2aError(
            "an A2A URL is an absolute http(s) URL without credentials", reason="invalid_url", details={"field": field}
        )
    if scheme == "http" and not (allow_http_loopback and is_loopback_host(host)):
        raise A2aError(
            "clear http is allowed only for a loopback host with allow_http_loopback=True",
            reason="insecure_url",
            details={"field": field},
        )
    netloc = f"[{host}]" if ":" in host else host.lower()
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{netloc}" + (f":{port}" if port not in (None, default) else ""), parts


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCard:
    """A validated A2A 1.0 Agent Card and the JSON-RPC interface this client will use."""

    raw: dict[str, Any]
    """The card as served (ProtoJSON), validated by :func:`parse_card`."""
    origin: str
    """``scheme://host[:port]`` the card was fetched from."""
    rpc_url: str
    """The URL of the first ``JSONRPC`` interface of protocol version 1.0."""
    tenant: str | None = None
    """The interface's ``tenant``, copied into every request when set."""

    @property
    def name(self) -> str:
        return str(self.raw["name"])

    @property
    def streaming(self) -> bool:
        """Whether the agent declares ``capabilities.streaming``."""
        return bool(self.raw.get("capabilities", {}).get("streaming", False))

    @property
    def security_schemes(self) -> dict[str, dict[str, Any]]:
        """Declared schemes by name (each one ``{"httpAuthSecurityScheme": {...}}``-like)."""
        return dict(self.raw.get("securitySchemes", {}))

    @property
    def security_requirements(self) -> list[dict[str, Any]]:
        """Alternative requirements, each ``{"schemes": {name: {"list": [scope, ...]}}}``; empty: unsecured."""
        return list(self.raw.get("securityRequirements", []))

    @property
    def skills(self) -> list[dict[str, Any]]:
        return list(self.raw.get("skills", []))


def _bad_card(message: str, field: str) -> A2aError:
    return A2aError(message, reason="invalid_agent_card", details={"field": field})


def _string(value: Any, field: str, *, required: bool = False, limit: int = 4096) -> str:
    # ProtoJSON omits empty strings, so an absent optional string reads as "".
    if value is None and not required:
        return ""
    if not isinstance(value, str) or len(value) > limit or (required and not value):
        raise _bad_card(f"{field} must be a {'non-empty ' if required else ''}string", field)
    return value


def _object(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad_card(f"{field} must be an object", field)
    return value


def _array(value: Any, field: str, limit: int = 256) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > limit:
        raise _bad_card(f"{field} must be a list of at most {limit} items", field)
    return value


def _check_security(raw: dict[str, Any]) -> None:
    schemes = _object(raw.get("securitySchemes"), "securitySchemes")
    for name, scheme in schemes.items():
        if not isinstance(scheme, dict) or len(scheme) != 1:
            raise _bad_card("a security scheme has exactly one kind", f"securitySchemes.{str(name)[:64]}")
    for i, requirement in enumerate(_array(raw.get("securityRequirements"), "securityRequirements")):
        named = _object(requirement, f"securityRequirements[{i}]").get("schemes", {})
        if not isinstance(named, dict) or any(n not in schemes for n in named):
            raise _bad_card("a security requirement names an undeclared scheme", f"securityRequirements[{i}]")


def parse_card(
    raw: Any,
    *,
    origin: str,
    allow_http_loopback: bool = False,
    allowed_interface_origins: tuple[str, ...] | list[str] = (),
) -> AgentCard:
    """Validate a card fetched from ``origin`` and pick its JSON-RPC 1.0 interface.

    Raises:
        A2aError: ``invalid_agent_card`` (``details["field"]``), ``no_jsonrpc_interface``,
            ``cross_origin_interface``, ``insecure_url`` / ``invalid_url`` (the interface URL).
    """
    card_origin, _ = _origin(origin, allow_http_loopback, "origin")
    if not isinstance(raw, dict):
        raise _bad_card("an agent card is a JSON object", "card")
    _string(raw.get("name"), "name", required=True, limit=256)
    _string(raw.get("description"), "description", limit=16384)
    _string(raw.get("version"), "version", limit=256)
    capabilities = _object(raw.get("capabilities"), "capabilities")
    for flag in ("streaming", "pushNotifications", "extendedAgentCard"):
        if not isinstance(capabilities.get(flag, False), bool):
            raise _bad_card(f"capabilities.{flag} must be a boolean", f"capabilities.{flag}")
    for field in ("defaultInputModes", "defaultOutputModes"):
        if not all(isinstance(m, str) for m in _array(raw.get(field), field)):
            raise _bad_card(f"{field} must be a list of media types", field)
    for i, skill in enumerate(_array(raw.get("skills"), "skills", 1024)):
        where = f"skills[{i}]"
        _object(skill, where)
        for key in ("id", "name"):
            _string(skill.get(key), f"{where}.{key}", required=True, limit=256)
        _string(skill.get("description"), f"{where}.description", limit=16384)
        if not all(isinstance(t, str) for t in _array(skill.get("tags"), f"{where}.tags")):
            raise _bad_card("skill tags are strings", f"{where}.tags")
    _check_security(raw)
    allowed = {_origin(o, allow_http_loopback, "allowed_interface_origins")[0] for o in allowed_interface_origins}
    interfaces = _array(raw.get("supportedInterfaces"), "supportedInterfaces", 64)
    for i, interface in enumerate(interfaces):
        where = f"supportedInterfaces[{i}]"
        entry = _object(interface, where)
        binding = _string(entry.get("protocolBinding"), f"{where}.protocolBinding", required=True, limit=256)
        version = _string(entry.get("protocolVersion"), f"{where}.protocolVersion", required=True, limit=32)
        url = _string(entry.get("url"), f"{where}.url", required=True, limit=2048)
        if binding != "JSONRPC" or version.split(".")[:2] != PROTOCOL_VERSION.split("."):
            continue
        interface_origin, _ = _origin(url, allow_http_loopback, f"{where}.url")
        if interface_origin != card_origin and interface_origin not in allowed:
            raise A2aError(
                "the card's JSON-RPC interface is on another origin; list it in allowed_interface_origins to use it",
                reason="cross_origin_interface",
                details={"field": f"{where}.url", "origin": interface_origin},
            )
        tenant = _string(entry.get("tenant"), f"{where}.tenant", limit=256) or None
        return AgentCard(raw=raw, origin=card_origin, rpc_url=url, tenant=tenant)
    raise A2aError(
        "the card offers no JSONRPC interface of A2A protocol 1.0",
        reason="no_jsonrpc_interface",
        details={"interfaces": len(interfaces)},
    )


# -- transport: one guarded request ---------------------------------------------------------------------------


class _Guard(CancelToken):
    """The sockets of one call: shut down by the caller's cancel or the call's deadline; inert once closed (the
    connection may then go back to the pool and serve another call)."""

    __slots__ = ("_closed", "_timer")

    def __init__(self) -> None:
        super().__init__()
        self._closed = False
        self._timer: int | None = None

    def arm(self, deadline: float, cancel: CancelToken | None) -> None:
        self._timer = thread_timers.add(max(0.0, deadline - time.monotonic()), lambda: self.cancel("timeout"))
        if cancel is not None:
            cancel.on_cancel(lambda: self.cancel("cancelled"))

    def register(self, sock: Any) -> None:
        if not self._closed:
            super().register(sock)

    register_socket = register

    def close(self) -> None:
        if self._timer is not None:
            thread_timers.cancel(self._timer)
            self._timer = None
        with self._lock:
            self._closed = True
            self._sockets.clear()


def _new_session() -> requests.Session:
    session = requests.Session()
    # No proxies, .netrc credentials or CA-bundle overrides from the environment: requests go exactly where the
    # card says, and https is verified against the default trust store.
    session.trust_env = False
    session.verify = True
    adapter = CancellableAdapter(pool_connections=2, pool_maxsize=4, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _transport_error(guard: _Guard, exc: BaseException | None, method: str) -> A2aError:
    if guard.reason == "timeout" or isinstance(exc, requests.Timeout):
        return A2aError("the A2A request timed out", reason="a2a_timeout", details={"method": method})
    if guard.reason == "cancelled":
        return A2aError("the A2A request was cancelled", reason="cancelled", details={"method": method})
    return A2aError(
        "the A2A peer could not be reached or closed the connection",
        reason="a2a_connection_failed",
        details={"method": method, "error": type(exc).__name__ if exc is not None else "eof"},
    )


class _Exchange:
    """One HTTP request/response under a :class:`_Guard`; :meth:`close` releases everything."""

    def __init__(self, method: str, deadline: float, cancel: CancelToken | None) -> None:
        self.method = method
        self.guard = _Guard()
        self.guard.arm(deadline, cancel)
        self.deadline = deadline
        self.response: requests.Response | None = None

    def open(self, session: requests.Session, verb: str, url: str, headers: dict[str, str], body: bytes | None) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 or self.guard.cancelled:
            raise _transport_error(self.guard, None, self.method)
        try:
            with use_token(self.guard):
                self.response = session.request(
                    verb,
                    url,
                    headers=headers,
                    data=body,
                    stream=True,
                    allow_redirects=False,
                    timeout=(min(_CONNECT_TIMEOUT_S, remaining), remaining),
                )
        except requests.RequestException as exc:
            raise _transport_error(self.guard, exc, self.method) from None

    def read(self, amount: int) -> bytes:
        """Up to ``amount`` bytes as they arrive (``b""`` at the end of the body)."""
        assert self.response is not None
        try:
            chunk: bytes = self.response.raw.read1(amount)
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise _transport_error(self.guard, exc, self.method) from None
        if self.guard.cancelled:  # a shut-down socket reads as a clean end of body
            raise _transport_error(self.guard, None, self.method)
        return chunk

    def read_all(self, max_bytes: int) -> bytes:
        assert self.response is not None
        length = self.response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > max_bytes:
            raise _too_large(self.method, max_bytes)
        body = bytearray()
        while chunk := self.read(_READ_CHUNK):
            body += chunk
            if len(body) > max_bytes:
                raise _too_large(self.method, max_bytes)
        return bytes(body)

    def close(self) -> None:
        self.guard.close()
        if self.response is not None:
            self.response.close()


def _too_large(method: str, limit: int) -> A2aError:
    return A2aError(
        "the A2A response is larger than allowed",
        reason="a2a_response_too_large",
        details={"method": method, "limit": limit},
    )


def _invalid(method: str, why: str) -> A2aError:
    return A2aError(
        f"the A2A peer sent an invalid response: {why}",
        reason="a2a_invalid_response",
        details={"method": method},
    )


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _json(body: bytes, method: str) -> Any:
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _invalid(method, "not JSON") from None


def _rpc_error(error: Any, method: str) -> A2aError:
    """The :class:`A2aError` of a JSON-RPC ``error`` member (never its free-text message: peer text stays out)."""
    if not isinstance(error, dict) or not isinstance(error.get("code"), int) or isinstance(error.get("code"), bool):
        return _invalid(method, "malformed JSON-RPC error")
    code: int = error["code"]
    reason = ERROR_REASONS.get(code, "").lower() or "a2a_peer_error"
    details: dict[str, Any] = {"code": code, "method": method}
    data = error.get("data")
    for item in data if isinstance(data, list) else ():
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.ErrorInfo"):
            peer = item.get("reason")
            if isinstance(peer, str) and _PEER_REASON.fullmatch(peer):
                reason = peer.lower()
            ours = item.get("metadata", {}).get("reason") if isinstance(item.get("metadata"), dict) else None
            if isinstance(ours, str) and _OUR_REASON.fullmatch(ours):
                details["peer_reason"] = ours
            break
    return A2aError(f"the A2A peer answered {method} with error {code}", reason=reason, details=details)


def _check_status(status: Any, method: str) -> str:
    if not isinstance(status, dict) or status.get("state") not in STATES:
        raise _invalid(method, "a task status without a known TASK_STATE_* state")
    return str(status["state"])


def _check_task(task: Any, method: str) -> dict[str, Any]:
    if not isinstance(task, dict) or not isinstance(task.get("id"), str) or not task["id"]:
        raise _invalid(method, "a task without an id")
    _check_status(task.get("status"), method)
    return task


def _check_peer_message(message: Any, method: str) -> dict[str, Any]:
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        raise _invalid(method, "a message without parts")
    return message


def _check_send_result(result: Any, method: str) -> dict[str, Any]:
    if not isinstance(result, dict) or len([k for k in ("task", "message") if k in result]) != 1:
        raise _invalid(method, "a SendMessage result holds exactly one of task, message")
    if "task" in result:
        _check_task(result["task"], method)
    else:
        _check_peer_message(result["message"], method)
    return result


def _check_stream_response(result: Any, method: str) -> tuple[dict[str, Any], bool]:
    """A ``StreamResponse`` and whether it ends the stream (a message, or a terminal/interrupted state)."""
    if not isinstance(result, dict) or len([k for k in _STREAM_KINDS if k in result]) != 1:
        raise _invalid(method, "a stream event holds exactly one of task, message, statusUpdate, artifactUpdate")
    if "message" in result:
        _check_peer_message(result["message"], method)
        return result, True
    if "task" in result:
        state = _check_status(_check_task(result["task"], method)["status"], method)
        return result, state in TERMINAL or state in INTERRUPTED
    if "statusUpdate" in result:
        update = result["statusUpdate"]
        state = _check_status(update.get("status") if isinstance(update, dict) else None, method)
        return result, state in TERMINAL or state in INTERRUPTED
    artifact = result["artifactUpdate"]
    if not isinstance(artifact, dict) or not isinstance(artifact.get("artifact"), dict):
        raise _invalid(method, "an artifactUpdate without an artifact")
    return result, False


# -- SSE -------------------------------------------------------------------------------------------------------


class _SseDecoder:
    """Incremental SSE: ``feed(bytes)`` returns the completed ``(event, data, id)`` triples."""

    def __init__(self, max_event_bytes: int) -> None:
        self._max = max_event_bytes
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._size = 0
        self._event = ""
        self._id: str | None = None

    def feed(self, chunk: bytes, method: str) -> list[tuple[str, bytes, str | None]]:
        self._buffer += chunk
        out: list[tuple[str, bytes, str | None]] = []
        start = 0
        while True:
            lf = self._buffer.find(b"\n", start)
            if lf < 0:
                break
            line = bytes(self._buffer[start:lf]).removesuffix(b"\r")
            start = lf + 1
            self._line(line, out)
        del self._buffer[:start]
        if len(self._buffer) + self._size > self._max:
            raise _too_large(method, self._max)
        return out

    def _line(self, line: bytes, out: list[tuple[str, bytes, str | None]]) -> None:
        if not line:
            if self._data:
                out.append((self._event or "message", b"\n".join(self._data), self._id))
            self._data, self._size, self._event = [], 0, ""
            return
        if line.startswith(b":"):
            return
        name, _, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if name == b"data":
            self._data.append(value)
            self._size += len(value) + 1
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")[:64]
        elif name == b"id" and b"\0" not in value:
            self._id = value.decode("utf-8", "replace")[:256]


class A2aStream:
    """The ``StreamResponse`` dicts of one SSE response, in order; an iterator and a context manager.

    The stream ends after a ``message``, after a terminal or interrupted task state, or when the peer ends the
    body; the HTTP response is closed then (or by :meth:`close`). :attr:`last_event_id` is the last SSE ``id``
    seen, for :meth:`A2aClient.subscribe` after a disconnect.

    Raises (from iteration):
        A2aError: a JSON-RPC error event (its reason), ``a2a_response_too_large`` (one event above the byte
            bound), ``a2a_too_many_events``, ``a2a_invalid_response``, ``a2a_timeout``, ``cancelled``,
            ``a2a_connection_failed``.
    """

    def __init__(
        self, exchange: _Exchange, *, request_id: int, max_event_bytes: int, max_events: int, owner: Any = None
    ) -> None:
        self._exchange = exchange
        self._request_id = request_id
        self._decoder = _SseDecoder(max_event_bytes)
        self._max_events = max_events
        self._pending: list[tuple[str, bytes, str | None]] = []
        self._count = 0
        self._done = False
        self._owner = owner  # a client made for this one stream (the module-level functions) closes with it
        self.last_event_id: str | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._done:
            raise StopIteration
        try:
            event = self._next_event()
        except BaseException:
            self.close()
            raise
        if event is None:
            self.close()
            raise StopIteration
        return event

    def _next_event(self) -> dict[str, Any] | None:
        method = self._exchange.method
        while not self._pending:
            chunk = self._exchange.read(_READ_CHUNK)
            if not chunk:
                return None
            self._pending.extend(self._decoder.feed(chunk, method))
        kind, data, event_id = self._pending.pop(0)
        self._count += 1
        if self._count > self._max_events:
            raise A2aError(
                "the A2A stream sent more events than allowed",
                reason="a2a_too_many_events",
                details={"method": method, "limit": self._max_events},
            )
        if event_id is not None:
            self.last_event_id = event_id
        frame = _json(data, method)
        if not isinstance(frame, dict):
            raise _invalid(method, "an SSE event is not a JSON-RPC response")
        if "error" in frame or kind == "error":
            raise _rpc_error(frame.get("error"), method)
        if frame.get("id") != self._request_id:
            raise _invalid(method, "an SSE event answers another request id")
        result, final = _check_stream_response(frame.get("result"), method)
        if final:
            self.close()
        return result

    def close(self) -> None:
        """Close the HTTP response (idempotent)."""
        if not self._done:
            self._done = True
            self._exchange.close()
            if self._owner is not None:
                self._owner.close()

    def __enter__(self) -> A2aStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            self.close()


# -- the client ------------------------------------------------------------------------------------------------


def _expected_header(schemes: Mapping[str, Any], name: str) -> str:
    """The header a declared scheme is carried in (lowercase)."""
    scheme = schemes[name]
    kind, body = next(iter(scheme.items()))
    if kind in ("httpAuthSecurityScheme", "oauth2SecurityScheme", "openIdConnectSecurityScheme"):
        return "authorization"
    if kind == "apiKeySecurityScheme" and isinstance(body, dict) and body.get("location") == "header":
        header = body.get("name")
        if isinstance(header, str) and _HEADER_NAME.fullmatch(header) and header.lower() not in _RESERVED_HEADERS:
            return header.lower()
    raise A2aError(
        "this client sends credentials only in a header (bearer, OAuth 2, OpenID Connect or a header API key)",
        reason="unsupported_auth_scheme",
        details={"scheme": name[:64], "kind": str(kind)[:64]},
    )


def _check_auth_choice(card: AgentCard, auth: AuthHeaders | None, auth_scheme: str | None) -> str | None:
    """The header the RPC credentials go in (``None``: no credentials), or fail closed."""
    schemes = card.security_schemes
    requirements = card.security_requirements
    secured = bool(requirements) and not any(not r.get("schemes") for r in requirements)
    if auth_scheme is None:
        if secured or auth is not None:
            raise A2aError(
                "name the card's security scheme the credentials are for (auth_scheme)",
                reason="undeclared_auth_scheme",
                details={"declared": sorted(schemes)[:16]},
            )
        return None
    named = {n for r in requirements for n in (r.get("schemes") or {})}
    if auth_scheme not in schemes or (requirements and auth_scheme not in named):
        raise A2aError(
            "the card does not declare that security scheme",
            reason="undeclared_auth_scheme",
            details={"scheme": str(auth_scheme)[:64], "declared": sorted(schemes)[:16]},
        )
    if auth is None:
        raise A2aError(
            "the card requires credentials: pass auth", reason="missing_auth", details={"scheme": auth_scheme}
        )
    return _expected_header(schemes, auth_scheme)


def _auth_headers(auth: AuthHeaders, expected: str | None) -> dict[str, str]:
    try:
        supplied = auth()
    except AdkError:
        raise
    except Exception as exc:
        # The callable's own message may quote a credential: only its type goes on.
        raise A2aError(
            "the auth callable failed", reason="auth_failed", details={"error": type(exc).__name__}
        ) from None
    if not isinstance(supplied, Mapping):
        raise A2aError("auth() must return a mapping of headers", reason="invalid_auth_headers", details={})
    headers: dict[str, str] = {}
    for name, value in supplied.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name) or name.lower() in _RESERVED_HEADERS:
            raise A2aError(
                "auth() returned a header that is not a credential header",
                reason="invalid_auth_headers",
                details={"header": str(name)[:64] if isinstance(name, str) and name.isprintable() else "?"},
            )
        if not isinstance(value, str) or not value or any(c in value for c in "\r\n\0"):
            raise A2aError("auth() returned a malformed header value", reason="invalid_auth_headers", details={})
        headers[name] = value
    if expected is not None and expected not in {n.lower() for n in headers}:
        raise A2aError(
            "auth() did not return the header of the declared scheme",
            reason="invalid_auth_headers",
            details={"expected": expected},
        )
    return headers


def _check_id(value: Any, field: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 256 or not value.isprintable() or " " in value:
        raise A2aError(f"{field} must be 1-256 printable characters", reason="invalid_id", details={"field": field})
    return value


def _check_timeout(value: Any, field: str = "timeout_s") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86400:
        raise A2aError(
            f"{field} must be a number of seconds in (0, 86400]", reason="invalid_value", details={"field": field}
        )
    return float(value)


def _check_count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise A2aError(f"{field} must be a non-negative integer", reason="invalid_value", details={"field": field})
    return value


def _check_bound(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise A2aError(f"{field} must be a positive integer", reason="invalid_value", details={"field": field})
    return value


class A2aClient:
    """A client of one remote A2A 1.0 agent (its :class:`AgentCard`); close it (or use ``with``) when done.

    Calls are synchronous and thread-safe (a shared connection pool). Each takes ``timeout_s`` (default: the
    client's) as one absolute deadline and an optional ``cancel`` token.
    """

    def __init__(
        self,
        card: AgentCard,
        *,
        auth: AuthHeaders | None = None,
        auth_scheme: str | None = None,
        timeout_s: float = 60.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_events: int = MAX_EVENTS,
        allow_http_loopback: bool = False,
    ) -> None:
        """
        Raises:
            A2aError: ``undeclared_auth_scheme``, ``missing_auth``, ``unsupported_auth_scheme``, ``insecure_url``,
                ``invalid_value``.
        """
        if not isinstance(card, AgentCard):
            raise A2aError("A2aClient takes an AgentCard (see discover)", reason="invalid_value", details={})
        _origin(card.rpc_url, allow_http_loopback, "rpc_url")
        if auth is not None and not callable(auth):
            raise A2aError("auth must be a callable returning headers", reason="invalid_value", details={})
        self.card = card
        self._auth = auth
        self._auth_header = _check_auth_choice(card, auth, auth_scheme)
        self.timeout_s = _check_timeout(timeout_s)
        self.max_response_bytes = _check_bound(max_response_bytes, "max_response_bytes")
        self.max_events = _check_bound(max_events, "max_events")
        self._session = _new_session()
        self._ids = itertools.count(1)
        self._ids_lock = threading.Lock()

    def close(self) -> None:
        """Close the pooled connections."""
        self._session.close()
        thread_timers.stop_if_idle()  # the shared deadline thread restarts with the next call

    def __enter__(self) -> A2aClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"A2aClient(rpc_url={self.card.rpc_url!r})"

    # -- requests

    def _headers(self, streaming: bool, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = {
            VERSION_HEADER: PROTOCOL_VERSION,
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if streaming else "application/json",
            "Accept-Encoding": "identity",
            **(extra or {}),
        }
        if self._auth is not None and self._auth_header is not None:
            headers.update(_auth_headers(self._auth, self._auth_header))
        return headers

    def _open(
        self,
        method: str,
        params: dict[str, Any],
        timeout_s: float | None,
        cancel: CancelToken | None,
        streaming: bool,
        extra: Mapping[str, str] | None = None,
    ) -> tuple[_Exchange, int]:
        deadline = time.monotonic() + _check_timeout(timeout_s if timeout_s is not None else self.timeout_s)
        if self.card.tenant:
            params = {"tenant": self.card.tenant, **params}
        with self._ids_lock:
            request_id = next(self._ids)
        body = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
            ensure_ascii=False,
            allow_nan=False,
        ).encode("utf-8")
        headers = self._headers(streaming, extra)  # just in time: after the argument checks, right before sending
        exchange = _Exchange(method, deadline, cancel)
        try:
            exchange.open(self._session, "POST", self.card.rpc_url, headers, body)
            assert exchange.response is not None
            status = exchange.response.status_code
            if not 200 <= status < 300:
                raise self._http_error(exchange, status)
        except BaseException:
            exchange.close()
            raise
        return exchange, request_id

    def _http_error(self, exchange: _Exchange, status: int) -> A2aError:
        details: dict[str, Any] = {"status": status, "method": exchange.method}
        if not 300 <= status < 400:
            try:  # a JSON-RPC error body says which protocol error it was (its text stays out)
                error = _json(exchange.read_all(min(self.max_response_bytes, 64 * 1024)), exchange.method)
                member = error.get("error") if isinstance(error, dict) else None
                code = member.get("code") if isinstance(member, dict) else None
                if isinstance(code, int) and not isinstance(code, bool):
                    details["code"] = code
            except A2aError:
                pass
        return A2aError(f"the A2A peer answered HTTP {status}", reason="a2a_http_error", details=details)

    def _call(self, method: str, params: dict[str, Any], timeout_s: float | None, cancel: CancelToken | None) -> Any:
        exchange, request_id = self._open(method, params, timeout_s, cancel, streaming=False)
        try:
            frame = _json(exchange.read_all(self.max_response_bytes), method)
        finally:
            exchange.close()
        if not isinstance(frame, dict) or frame.get("jsonrpc") != "2.0":
            raise _invalid(method, "not a JSON-RPC 2.0 response")
        if "error" in frame:
            raise _rpc_error(frame["error"], method)
        if frame.get("id") != request_id or "result" not in frame:
            raise _invalid(method, "a response to another request id, or without a result")
        return frame["result"]

    def _stream(
        self,
        method: str,
        params: dict[str, Any],
        timeout_s: float | None,
        cancel: CancelToken | None,
        extra: Mapping[str, str] | None = None,
    ) -> A2aStream:
        if not self.card.streaming:
            raise A2aError(
                "the agent does not declare streaming", reason="streaming_not_supported", details={"method": method}
            )
        exchange, request_id = self._open(method, params, timeout_s, cancel, True, extra)
        assert exchange.response is not None
        media = exchange.response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media != "text/event-stream":
            # An error before the stream started may come back as one plain JSON-RPC response.
            try:
                frame = _json(exchange.read_all(self.max_response_bytes), method)
            finally:
                exchange.close()
            if isinstance(frame, dict) and "error" in frame:
                raise _rpc_error(frame["error"], method)
            raise _invalid(method, "a streaming call answered without an event stream")
        return A2aStream(
            exchange,
            request_id=request_id,
            max_event_bytes=self.max_response_bytes,
            max_events=self.max_events,
        )

    def _message(self, message: str | Mapping[str, Any], context_id: str | None, task_id: str | None) -> dict[str, Any]:
        if isinstance(message, str):
            built: dict[str, Any] = {"messageId": new_id(), "role": "ROLE_USER", "parts": [{"text": message}]}
        elif isinstance(message, Mapping):
            built = dict(message)
        else:
            raise A2aError("a message is a str or a Message dict", reason="invalid_message", details={})
        for key, value in (("contextId", context_id), ("taskId", task_id)):
            if value is not None:
                if built.get(key) not in (None, "", value):
                    raise A2aError(
                        f"the message's {key} differs from the {key} argument",
                        reason="invalid_message",
                        details={"field": key},
                    )
                built[key] = _check_id(value, key)
        return check_message(built, max_bytes=MAX_MESSAGE_BYTES)

    # -- the protocol's methods

    def send(
        self,
        message: str | Mapping[str, Any],
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        return_immediately: bool = False,
        history_length: int | None = None,
        timeout_s: float | None = None,
        cancel: CancelToken | None = None,
    ) -> dict[str, Any]:
        """``SendMessage``: blocking (until a terminal or interrupted state) unless ``return_immediately``.

        Returns:
            ``{"task": Task}`` or ``{"message": Message}`` as the peer sent it.

        Raises:
            A2aError: see the module docstring; ``invalid_message`` (and the reasons of
                :func:`~adk_actors.a2a.wire.check_message`) for a bad ``message``.
        """
        configuration: dict[str, Any] = {"returnImmediately": bool(return_immediately)}
        if history_length is not None:
            configuration["historyLength"] = _check_count(history_length, "history_length")
        params = {"message": self._message(message, context_id, task_id), "configuration": configuration}
        return _check_send_result(self._call("SendMessage", params, timeout_s, cancel), "SendMessage")

    def stream(
        self,
        message: str | Mapping[str, Any],
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        timeout_s: float | None = None,
        cancel: CancelToken | None = None,
    ) -> A2aStream:
        """``SendStreamingMessage``: the StreamResponse dicts as they arrive (``timeout_s`` bounds the whole stream).

        Raises:
            A2aError: ``streaming_not_supported`` when the card does not declare it; as :meth:`send`; more from
                iterating (see :class:`A2aStream`).
        """
        params = {"message": self._message(message, context_id, task_id), "configuration": {}}
        return self._stream("SendStreamingMessage", params, timeout_s, cancel)

    def get(
        self,
        task_id: str,
        history_length: int | None = None,
        *,
        timeout_s: float | None = None,
        cancel: CancelToken | None = None,
    ) -> dict[str, Any]:
        """``GetTask``: the task.

        Raises:
            A2aError: ``task_not_found`` (code -32001), ``invalid_id``; see the module docstring.
        """
        params: dict[str, Any] = {"id": _check_id(task_id, "task_id")}
        if history_length is not None:
            params["historyLength"] = _check_count(history_length, "history_length")
        return _check_task(self._call("GetTask", params, timeout_s, cancel), "GetTask")

    def list(
        self, *, timeout_s: float | None = None, cancel: CancelToken | None = None, **filters: Any
    ) -> dict[str, Any]:
        """``ListTasks`` with ``context_id``, ``status`` (a ``TASK_STATE_*`` name), ``page_size``, ``page_token``,
        ``history_length``, ``status_timestamp_after`` or ``include_artifacts`` filters.

        Returns:
            ``{"tasks": [...], "nextPageToken": str, "pageSize": int, "totalSize": int}``.

        Raises:
            A2aError: ``invalid_filter`` for an unknown filter or a state that is not a ``TASK_STATE_*`` name.
        """
        params: dict[str, Any] = {}
        for key, value in filters.items():
            if key not in _FILTERS or (key == "status" and value not in STATES):
                raise A2aError(
                    "not a ListTasks filter (or not a TASK_STATE_* name)",
                    reason="invalid_filter",
                    details={"filter": key[:64]},
                )
            params[_FILTERS[key]] = value
        result = self._call("ListTasks", params, timeout_s, cancel)
        if not isinstance(result, dict) or not isinstance(result.get("tasks", []), list):
            raise _invalid("ListTasks", "a ListTasks result without a task list")
        result.setdefault("tasks", [])
        for task in result["tasks"]:
            _check_task(task, "ListTasks")
        return dict(result)

    def cancel(
        self, task_id: str, *, timeout_s: float | None = None, cancel: CancelToken | None = None
    ) -> dict[str, Any]:
        """``CancelTask``: the updated task.

        Raises:
            A2aError: ``task_not_cancelable`` (-32002) for a task in a terminal state, ``task_not_found``.
        """
        params = {"id": _check_id(task_id, "task_id")}
        return _check_task(self._call("CancelTask", params, timeout_s, cancel), "CancelTask")

    def subscribe(
        self,
        task_id: str,
        last_event_id: str | None = None,
        *,
        timeout_s: float | None = None,
        cancel: CancelToken | None = None,
    ) -> A2aStream:
        """``SubscribeToTask``: the task's events from its current snapshot on (``last_event_id`` resumes after an
        event the peer numbered, sent as ``Last-Event-ID``).

        Raises:
            A2aError: ``unsupported_operation`` (-32004) for a task in a terminal state; as :meth:`stream`.
        """
        params = {"id": _check_id(task_id, "task_id")}
        extra = None if last_event_id is None else {"Last-Event-ID": _check_id(last_event_id, "last_event_id")}
        return self._stream("SubscribeToTask", params, timeout_s, cancel, extra)


# -- discovery and module-level calls --------------------------------------------------------------------------


def discover(
    url: str,
    *,
    allow_http_loopback: bool = False,
    timeout_s: float = 10.0,
    max_card_bytes: int = MAX_CARD_BYTES,
    auth: AuthHeaders | None = None,
    allowed_interface_origins: tuple[str, ...] | list[str] = (),
    cancel: CancelToken | None = None,
) -> AgentCard:
    """Fetch and validate the Agent Card at ``<origin>/.well-known/agent-card.json``.

    ``url`` is the agent's origin (a path ``/`` or the card path itself is accepted); ``auth`` gives discovery's
    own headers (never the RPC credentials).

    Raises:
        A2aError: ``invalid_url``, ``insecure_url``, ``a2a_http_error`` (redirects included),
            ``a2a_response_too_large``, ``a2a_timeout``, ``a2a_connection_failed``, ``invalid_agent_card``,
            ``no_jsonrpc_interface``, ``cross_origin_interface``, ``auth_failed``, ``invalid_auth_headers``.
    """
    origin, parts = _origin(url, allow_http_loopback, "url")
    if parts.path not in ("", "/", CARD_PATH) or parts.query or parts.fragment:
        raise A2aError(
            "discover takes the agent's origin (scheme://host[:port])", reason="invalid_url", details={"field": "url"}
        )
    limit = _check_bound(max_card_bytes, "max_card_bytes")
    deadline = time.monotonic() + _check_timeout(timeout_s)
    headers = {VERSION_HEADER: PROTOCOL_VERSION, "Accept": "application/json", "Accept-Encoding": "identity"}
    if auth is not None:
        headers.update(_auth_headers(auth, None))
    method = "GetAgentCard"
    session = _new_session()
    exchange = _Exchange(method, deadline, cancel)
    try:
        exchange.open(session, "GET", origin + CARD_PATH, headers, None)
        assert exchange.response is not None
        status = exchange.response.status_code
        if status != 200:
            raise A2aError(
                f"the agent card request answered HTTP {status}",
                reason="a2a_http_error",
                details={"status": status, "method": method},
            )
        raw = _json(exchange.read_all(limit), method)
    finally:
        exchange.close()
        session.close()
    return parse_card(
        raw, origin=origin, allow_http_loopback=allow_http_loopback, allowed_interface_origins=allowed_interface_origins
    )


_CLIENT_OPTS = frozenset({"auth", "auth_scheme", "max_response_bytes", "max_events", "allow_http_loopback"})
_DISCOVERY_OPTS = {"discovery_auth": "auth", "allowed_interface_origins": "allowed_interface_origins"}


def _client_for(card: AgentCard | str, opts: dict[str, Any]) -> tuple[A2aClient, float, dict[str, Any]]:
    """A client for ``card`` (discovered first when it is a URL) and the remaining call options; one deadline
    spans discovery and the call."""
    timeout_s = _check_timeout(opts.pop("timeout_s", 60.0))
    deadline = time.monotonic() + timeout_s
    client_opts = {k: opts.pop(k) for k in list(opts) if k in _CLIENT_OPTS}
    discovery_opts = {_DISCOVERY_OPTS[k]: opts.pop(k) for k in list(opts) if k in _DISCOVERY_OPTS}
    if isinstance(card, str):
        card = discover(
            card,
            allow_http_loopback=bool(client_opts.get("allow_http_loopback", False)),
            timeout_s=timeout_s,
            cancel=opts.get("cancel"),
            **discovery_opts,
        )
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise A2aError("the A2A request timed out", reason="a2a_timeout", details={"method": "GetAgentCard"})
    return A2aClient(card, timeout_s=timeout_s, **client_opts), remaining, opts


def send(card: AgentCard | str, message: str | Mapping[str, Any], **opts: Any) -> dict[str, Any]:
    """One ``SendMessage`` with a client made for it (``card`` may be a URL: discovered first, without the RPC
    credentials). ``opts``: the :class:`A2aClient` options, ``discovery_auth``, ``allowed_interface_origins`` and
    the :meth:`A2aClient.send` options; ``timeout_s`` bounds discovery and the call together.

    Raises:
        A2aError: as :func:`discover` and :meth:`A2aClient.send`.
    """
    client, remaining, call = _client_for(card, opts)
    with client:
        return client.send(message, timeout_s=remaining, **call)


def stream(card: AgentCard | str, message: str | Mapping[str, Any], **opts: Any) -> A2aStream:
    """One ``SendStreamingMessage`` (options as :func:`send`); closing the stream closes its client.

    Raises:
        A2aError: as :func:`discover` and :meth:`A2aClient.stream`.
    """
    client, remaining, call = _client_for(card, opts)
    try:
        events = client.stream(message, timeout_s=remaining, **call)
    except BaseException:
        client.close()
        raise
    events._owner = client
    return events


def get(card: AgentCard | str, task_id: str, **opts: Any) -> dict[str, Any]:
    """One ``GetTask`` (options as :func:`send`, plus ``history_length``).

    Raises:
        A2aError: as :func:`discover` and :meth:`A2aClient.get`.
    """
    client, remaining, call = _client_for(card, opts)
    with client:
        return client.get(task_id, timeout_s=remaining, **call)


def cancel(card: AgentCard | str, task_id: str, **opts: Any) -> dict[str, Any]:
    """One ``CancelTask`` (options as :func:`send`).

    Raises:
        A2aError: as :func:`discover` and :meth:`A2aClient.cancel`.
    """
    client, remaining, call = _client_for(card, opts)
    with client:
        return client.cancel(task_id, timeout_s=remaining, **call)


def subscribe(card: AgentCard | str, task_id: str, **opts: Any) -> A2aStream:
    """One ``SubscribeToTask`` (options as :func:`send`, plus ``last_event_id``); closing the stream closes its
    client.

    Raises:
        A2aError: as :func:`discover` and :meth:`A2aClient.subscribe`.
    """
    client, remaining, call = _client_for(card, opts)
    try:
        events = client.subscribe(task_id, timeout_s=remaining, **call)
    except BaseException:
        client.close()
        raise
    events._owner = client
    return events

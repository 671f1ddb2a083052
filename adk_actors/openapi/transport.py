"""Building and sending one OpenAPI request: a host allow-list, bounded sizes and time, no redirects.

::

    transport = HttpTransport(["https://petstore3.swagger.io"])
    transport.send(catalog.get("getPetById"), {"petId": 1}, broker, context)
    # {"status": 200, "content_type": "application/json", "body": {"id": 1, "name": "doggie", ...}}

The URL is the server URL (``server_url``, else the operation's first server) plus the path template with every
path argument percent-encoded whole (``/``, ``?``, ``#`` and ``.`` included), so an argument stays inside its
segment. The origin of the finished URL must be one of ``allowed_hosts`` (exact ``scheme://host[:port]``); plain
``http`` is possible only to a loopback host with ``allow_http_loopback``. Redirects are never followed: a 3xx is
returned to the model as its status. Header and cookie arguments that could split or add a header are refused,
and a header argument can never name a header the transport or the auth broker owns (``Authorization``,
``Cookie``, ``Host`` ...). Credentials come from the :class:`~adk_actors.openapi.broker.AuthBroker` and are
revealed only while the request is written: they are never in a result or an error.

A response is read as a stream and bounded (``max_response_bytes``); JSON is parsed, ``text/*`` is returned as a
string, any other type is described without its body. A 4xx/5xx is an ordinary result with its status (the model
decides what to do); only a request that could not be made or answered raises :class:`ToolError`.

The transport pickles as its settings (tools run in worker processes): each process opens its own HTTP session on
first use, which never uses proxy settings from the environment.
"""

from __future__ import annotations

import codecs
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import requests
import urllib3.exceptions

from adk_actors.content.canonical import canonical_dumps, check_json_safe
from adk_actors.errors import ConfigError, ToolError, ValidationError
from adk_actors.openapi.compile import BODY_ARGUMENT, Operation, Parameter
from adk_actors.settings import is_loopback_host

if TYPE_CHECKING:
    from adk_actors.openapi.broker import AuthBroker

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT_S",
    "FORBIDDEN_HEADERS",
    "HttpRequest",
    "HttpTransport",
    "check_cookie_value",
    "check_header_value",
    "is_forbidden_header",
    "no_credential",
    "normalize_origin",
]

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
MAX_LIMIT_BYTES = 64 * 1024 * 1024
MAX_URL_CHARS = 8192
MAX_HEADER_VALUE_CHARS = 8192
READ_CHUNK = 64 * 1024
USER_AGENT = "adk-actors-openapi"
ACCEPT = "application/json, text/*;q=0.5, */*;q=0.1"

FORBIDDEN_HEADERS = frozenset(
    {
        "authorization",
        "cookie",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "content-type",
        "accept",
        "traceparent",
        "tracestate",
    }
)
"""Header names an argument may never set (besides every ``Proxy-*``): the transport and the broker own them."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_TEMPLATE_VAR = re.compile(r"\{([^{}]*)\}")
_JSON_MIME = re.compile(r"application/(?:[a-z0-9.+-]+\+)?json")
# Reserved characters a query value with ``allowReserved`` may carry unencoded. ``&``, ``=``, ``#`` and ``+`` stay
# encoded even then: unencoded they would add a parameter, end the query or change a value's meaning.
_RESERVED_SAFE = ":/?@!$'()*,;"
# RFC 6265 cookie-octet: printable ASCII except space, DQUOTE, comma, semicolon and backslash.
_COOKIE_OCTETS = frozenset(chr(c) for c in range(0x21, 0x7F)) - frozenset('",;\\')


def _origin(scheme: str, host: str, port: int | None) -> str:
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc = f"{netloc}:{port}"
    return f"{scheme}://{netloc}"


def normalize_origin(entry: str) -> str:
    """``scheme://host[:port]`` in normal form: lower case, default port dropped, IPv6 in brackets.

    Raises:
        ConfigError: reason ``invalid_allowed_host`` (not an origin: a path, query, user info, wildcard, another
            scheme, a bad port).
    """

    def bad(why: str) -> ConfigError:
        return ConfigError(
            "an allowed host is an exact origin scheme://host[:port]",
            reason="invalid_allowed_host",
            details={"entry": entry[:256] if isinstance(entry, str) else type(entry).__name__, "rule": why},
        )

    if not isinstance(entry, str) or not entry or len(entry) > 512 or not entry.isascii() or not entry.isprintable():
        raise bad("text")
    if "*" in entry or any(c.isspace() for c in entry):
        raise bad("wildcard")
    parts = urlsplit(entry)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise bad("scheme")
    if "@" in parts.netloc:
        raise bad("userinfo")
    if parts.path not in ("", "/") or parts.query or parts.fragment or entry.endswith(("?", "#")):
        raise bad("path")
    try:
        port = parts.port
    except ValueError:
        raise bad("port") from None
    host = parts.hostname
    if not host:
        raise bad("host")
    return _origin(scheme, host, port)


def _url_origin(url: str) -> str | None:
    """The normal origin of a built URL, or ``None`` when it has none (relative, user info, bad port)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or "@" in parts.netloc or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return _origin(scheme, parts.hostname, port)


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    """One request as built from the arguments (before credentials are added)."""

    method: str
    """Upper-case HTTP method."""
    url: str
    """The exact URL sent: scheme, host, port, path and query (already percent-encoded)."""
    origin: str
    """The URL's normal origin (what the allow-list is checked against)."""
    headers: tuple[tuple[str, str], ...]
    """Header arguments (names from the document, values checked)."""
    cookies: tuple[tuple[str, str], ...]
    """Cookie arguments as ``(name, value)`` pairs."""
    body: bytes | None
    """The JSON body, or ``None``."""
    content_type: str | None
    """The body's media type."""


def _argument_error(reason: str, message: str, operation: Operation, argument: str) -> ToolError:
    return ToolError(message, reason=reason, details={"operation": operation.name, "argument": argument[:128]})


def _scalar(value: Any, operation: Operation, argument: str) -> str:
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        try:
            return json.dumps(value, allow_nan=False)
        except ValueError:
            pass
    raise _argument_error("unsupported_parameter_value", "a parameter value must be a scalar here", operation, argument)


def _items(value: Any, operation: Operation, argument: str) -> str | list[str] | dict[str, str]:
    """A parameter value as scalars: a str, a list of str (an array) or a str-to-str dict (an object)."""
    if isinstance(value, list):
        return [_scalar(v, operation, argument) for v in value]
    if isinstance(value, dict):
        return {str(k): _scalar(v, operation, argument) for k, v in value.items()}
    return _scalar(value, operation, argument)


def _encode_path(text: str) -> str:
    # Dots too: a whole value of "." or ".." would otherwise be a dot segment that clients and servers collapse.
    return quote(text, safe="").replace(".", "%2E")


def _path_value(param: Parameter, value: Any, operation: Operation) -> str:
    items = _items(value, operation, param.name)
    name, style, explode = _encode_path(param.name), param.style, param.explode
    if not items and style == "simple":
        raise _argument_error("invalid_argument", "a path argument may not be empty", operation, param.name)
    if isinstance(items, str):
        encoded = _encode_path(items)
        return {"simple": encoded, "label": "." + encoded}.get(style, f";{name}={encoded}")
    if isinstance(items, dict):
        pairs = [(_encode_path(k), _encode_path(v)) for k, v in items.items()]
        if style == "matrix" and explode:
            return "".join(f";{k}={v}" for k, v in pairs)
        if style == "matrix":
            return f";{name}=" + ",".join(f"{k},{v}" for k, v in pairs)
        joined = [f"{k}={v}" if explode else f"{k},{v}" for k, v in pairs]
        if style == "label":
            return "." + ("." if explode else ",").join(joined)
        return ",".join(joined)
    values = [_encode_path(v) for v in items]
    if style == "matrix":
        return "".join(f";{name}={v}" for v in values) if explode else f";{name}=" + ",".join(values)
    if style == "label":
        return "." + ("." if explode else ",").join(values)
    return ",".join(values)


def _query_pairs(param: Parameter, value: Any, operation: Operation) -> list[str]:
    """``name=value`` strings (already encoded) for one query argument."""
    items = _items(value, operation, param.name)
    safe = _RESERVED_SAFE if param.allow_reserved else ""

    def enc(text: str) -> str:
        return quote(text, safe=safe)

    name = quote(param.name, safe="")
    if isinstance(items, str):
        if param.style == "deepObject":
            raise _argument_error("unsupported_parameter_value", "deepObject takes an object", operation, param.name)
        return [f"{name}={enc(items)}"]
    if isinstance(items, dict):
        if param.style == "deepObject":
            return [f"{name}%5B{quote(k, safe='')}%5D={enc(v)}" for k, v in items.items()]
        if param.explode:
            return [f"{quote(k, safe='')}={enc(v)}" for k, v in items.items()]
        return [f"{name}=" + ",".join(f"{enc(k)},{enc(v)}" for k, v in items.items())]
    if param.style == "deepObject":
        raise _argument_error("unsupported_parameter_value", "deepObject takes an object", operation, param.name)
    if param.explode:
        return [f"{name}={enc(v)}" for v in items]
    # The delimiter is percent-encoded on the wire like the same character in a value would be, and servers decode
    # before they split: an element holding its delimiter would arrive as two elements, so it is refused.
    delimiter = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(param.style, ",")
    if any(delimiter in v for v in items):
        raise _argument_error(
            "ambiguous_parameter_value", "an array element holds the style's delimiter", operation, param.name
        )
    sep = {" ": "%20", "|": "%7C"}.get(delimiter, ",")
    return [f"{name}=" + sep.join(enc(v) for v in items)]


def check_header_value(value: str) -> bool:
    """Whether ``value`` may be sent as a header value: printable ASCII (no CR, LF, NUL or other controls)."""
    return len(value) <= MAX_HEADER_VALUE_CHARS and all(" " <= c <= "~" for c in value)


def _header_value(param: Parameter, value: Any, operation: Operation) -> str:
    items = _items(value, operation, param.name)
    if isinstance(items, str):
        text = items
    elif isinstance(items, dict):
        text = ",".join(f"{k}={v}" if param.explode else f"{k},{v}" for k, v in items.items())
    else:
        text = ",".join(items)
    if not check_header_value(text):
        raise _argument_error(
            "invalid_header_value", "a header argument has control or non-ASCII characters", operation, param.name
        )
    return text


def is_forbidden_header(name: str) -> bool:
    """Whether an argument may not set the header ``name`` (:data:`FORBIDDEN_HEADERS` and ``Proxy-*``)."""
    lowered = name.lower()
    return lowered in FORBIDDEN_HEADERS or lowered.startswith("proxy-")


def check_cookie_value(value: str) -> bool:
    """Whether ``value`` is made only of RFC 6265 cookie octets (no ``;``, ``,``, space, quote, control)."""
    return len(value) <= MAX_HEADER_VALUE_CHARS and all(c in _COOKIE_OCTETS for c in value)


def _cookie_pairs(param: Parameter, value: Any, operation: Operation) -> list[tuple[str, str]]:
    items = _items(value, operation, param.name)
    if isinstance(items, str):
        texts, pairs = [items], [(param.name, items)]
    elif isinstance(items, dict):
        texts = [t for pair in items.items() for t in pair]
        pairs = list(items.items()) if param.explode else [(param.name, ",".join(f"{k},{v}" for k, v in items.items()))]
    else:
        texts = items
        pairs = [(param.name, v) for v in items] if param.explode else [(param.name, ",".join(items))]
    names_ok = all(k and check_cookie_value(k) and "=" not in k for k, _ in pairs)
    if not names_ok or not all(check_cookie_value(t) for t in texts):
        raise _argument_error(
            "invalid_cookie_value",
            "a cookie argument may hold only cookie octets (no ';', ',', spaces, quotes or controls)",
            operation,
            param.name,
        )
    return pairs


def _check_server_url(url: str) -> str:
    parts = urlsplit(url)
    if (
        parts.scheme.lower() not in _DEFAULT_PORTS
        or not parts.hostname
        or "@" in parts.netloc
        or parts.query
        or parts.fragment
        or not url.isascii()
        or not url.isprintable()
        or any(c.isspace() for c in url)
    ):
        raise ValueError("not an absolute http(s) URL without query, fragment or user info")
    return url.rstrip("/")


def _positive(value: Any, key: str, upper: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= upper:
        raise ConfigError(f"{key} must be in (0, {upper}]", reason="invalid_value", details={"key": key})
    return value


def _mime(content_type: str) -> tuple[str, str | None]:
    """The lower-case media type and the charset parameter of a ``Content-Type`` value."""
    head, _, params = content_type.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip().strip('"') or None
    return head.strip().lower(), charset


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def no_credential(operation: Operation, message: str) -> ToolError:
    """``no_credential_for_operation``: naming the operation and the schemes it accepts (nothing is sent)."""
    schemes = sorted({s for alt in operation.security for s in alt.schemes})[:16]
    return ToolError(
        message, reason="no_credential_for_operation", details={"operation": operation.name, "schemes": schemes}
    )


class HttpTransport:
    """Sends the requests of compiled operations to allowed origins only (see the module docstring).

    Args:
        allowed_hosts: Exact origins ``scheme://host[:port]`` a request may go to (default ports may be left out).
        server_url: The base URL for every operation (``https://host/api/v3``) instead of the document's servers.
        timeout_s: Bound on one request: connecting takes at most ``min(timeout_s, 10)``, each wait for data at
            most ``timeout_s``, and the whole exchange is cut off once ``timeout_s`` has passed (checked between
            reads of the body, so a server that trickles cannot stretch it past about twice ``timeout_s``).
        max_request_bytes: Bound on the JSON body.
        max_response_bytes: Bound on the response body (after content decoding).
        verify_tls: Verify the server's certificate (turn off only for a test server you started).
        allow_http_loopback: Allow ``http`` origins that are loopback hosts (``localhost``, ``127.0.0.0/8``,
            ``[::1]``); otherwise every origin must be ``https``.

    Raises:
        ConfigError: ``invalid_allowed_host``, ``insecure_allowed_host``, ``invalid_server_url`` or
            ``invalid_value``.
    """

    def __init__(
        self,
        allowed_hosts: Sequence[str],
        *,
        server_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        verify_tls: bool = True,
        allow_http_loopback: bool = False,
    ) -> None:
        if isinstance(allowed_hosts, str) or not isinstance(allowed_hosts, Iterable):
            raise ConfigError(
                "allowed_hosts is a list of origins", reason="invalid_allowed_host", details={"entry": "type"}
            )
        origins: list[str] = []
        for entry in allowed_hosts:
            origin = normalize_origin(entry)
            parts = urlsplit(origin)
            if parts.scheme == "http" and not (allow_http_loopback and is_loopback_host(parts.hostname or "")):
                raise ConfigError(
                    "an http origin is allowed only to a loopback host with allow_http_loopback",
                    reason="insecure_allowed_host",
                    details={"entry": origin},
                )
            if origin not in origins:
                origins.append(origin)
        if not origins:
            raise ConfigError("allowed_hosts is empty", reason="invalid_allowed_host", details={"entry": "empty"})
        if server_url is not None:
            try:
                server_url = _check_server_url(server_url) if isinstance(server_url, str) else None
            except ValueError:
                server_url = None
            if server_url is None:
                raise ConfigError(
                    "server_url must be an absolute http(s) URL without query, fragment or user info",
                    reason="invalid_server_url",
                )
        for flag, key in ((verify_tls, "verify_tls"), (allow_http_loopback, "allow_http_loopback")):
            if not isinstance(flag, bool):
                raise ConfigError(f"{key} must be a bool", reason="invalid_value", details={"key": key})
        self.allowed_hosts: tuple[str, ...] = tuple(origins)
        self.server_url = server_url
        self.timeout_s = float(_positive(timeout_s, "timeout_s", 600))
        self.max_request_bytes = int(_positive(max_request_bytes, "max_request_bytes", MAX_LIMIT_BYTES))
        self.max_response_bytes = int(_positive(max_response_bytes, "max_response_bytes", MAX_LIMIT_BYTES))
        self.verify_tls = verify_tls
        self.allow_http_loopback = allow_http_loopback
        self._session: requests.Session | None = None

    def __repr__(self) -> str:
        return f"HttpTransport(allowed_hosts={list(self.allowed_hosts)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_session"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._session = None

    def close(self) -> None:
        """Close this process's HTTP session (its pooled connections); the next request opens a new one."""
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def _http(self) -> requests.Session:
        session = self._session
        if session is None:
            session = requests.Session()
            session.trust_env = False  # no proxies, .netrc or CA bundle from the environment
            session.headers.clear()
            self._session = session
        return session

    # ---- building --------------------------------------------------------------------------------------------
    def base_url(self, operation: Operation) -> str:
        """The base URL of ``operation``'s requests: ``server_url``, else the operation's first server.

        Raises:
            ToolError: ``no_server`` (neither is there) or ``invalid_server_url`` (relative or malformed).
        """
        if self.server_url is not None:
            return self.server_url
        if not operation.servers:
            raise ToolError(
                "the operation has no server URL; give the toolset server_url=",
                reason="no_server",
                details={"operation": operation.name},
            )
        try:
            return _check_server_url(operation.servers[0])
        except ValueError:
            raise ToolError(
                "the operation's server URL is not an absolute http(s) URL; give the toolset server_url=",
                reason="invalid_server_url",
                details={"operation": operation.name},
            ) from None

    def build(self, operation: Operation, args: Mapping[str, Any]) -> HttpRequest:
        """The request for ``operation`` with ``args`` (no credentials, nothing sent, origin not yet checked).

        Raises:
            ToolError: ``missing_argument``, ``unknown_argument``, ``invalid_argument``,
                ``unsupported_parameter_value``, ``invalid_header_value``, ``forbidden_header``,
                ``invalid_cookie_value``, ``invalid_request_body``, ``request_too_large``, ``no_server``,
                ``invalid_server_url``.
        """
        if not isinstance(args, Mapping):
            raise ToolError("arguments are an object", reason="invalid_argument", details={"operation": operation.name})
        known = {p.name for p in operation.parameters} | ({BODY_ARGUMENT} if operation.body is not None else set())
        for key in args:
            if key not in known:
                raise _argument_error("unknown_argument", "the operation has no such argument", operation, str(key))
        path_values: dict[str, str] = {}
        query: list[str] = []
        headers: list[tuple[str, str]] = []
        cookies: list[tuple[str, str]] = []
        for param in operation.parameters:
            present = param.name in args and args[param.name] is not None
            if not present:
                if param.required:
                    raise _argument_error("missing_argument", "a required argument is missing", operation, param.name)
                continue
            value = args[param.name]
            if param.location == "path":
                path_values[param.name] = _path_value(param, value, operation)
            elif param.location == "query":
                query.extend(_query_pairs(param, value, operation))
            elif param.location == "header":
                if is_forbidden_header(param.name):
                    raise _argument_error(
                        "forbidden_header", "an argument may not set this header", operation, param.name
                    )
                headers.append((param.name, _header_value(param, value, operation)))
            else:
                cookies.extend(_cookie_pairs(param, value, operation))

        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in path_values:
                raise _argument_error("missing_argument", "a path argument is missing", operation, name)
            return path_values[name]

        url = self.base_url(operation) + _TEMPLATE_VAR.sub(fill, operation.path)
        if query:
            url += "?" + "&".join(query)
        if len(url) > MAX_URL_CHARS:
            raise ToolError(
                "the request URL is too long",
                reason="request_too_large",
                details={"operation": operation.name, "field": "url", "max_chars": MAX_URL_CHARS},
            )
        body, content_type = self._body(operation, args)
        origin = _url_origin(url)
        return HttpRequest(
            method=operation.method,
            url=url,
            origin=origin or "",
            headers=tuple(headers),
            cookies=tuple(cookies),
            body=body,
            content_type=content_type,
        )

    def _body(self, operation: Operation, args: Mapping[str, Any]) -> tuple[bytes | None, str | None]:
        if operation.body is None:
            return None, None
        if BODY_ARGUMENT not in args:
            if operation.body.required:
                raise _argument_error("missing_argument", "the request body is required", operation, BODY_ARGUMENT)
            return None, None
        try:
            data = canonical_dumps(args[BODY_ARGUMENT]).encode("utf-8")
        except ValidationError as exc:
            raise ToolError(
                "the request body is not JSON",
                reason="invalid_request_body",
                details={"operation": operation.name, "rule": exc.reason},
            ) from None
        if len(data) > self.max_request_bytes:
            raise ToolError(
                "the request body is too large",
                reason="request_too_large",
                details={"operation": operation.name, "field": "body", "max_bytes": self.max_request_bytes},
            )
        media = operation.body.media_type.split(";", 1)[0].strip()
        content_type = media if "*" not in media else "application/json"
        return data, content_type

    def check_origin(self, operation: Operation, url: str) -> str:
        """The origin of ``url`` when it is allowed.

        Raises:
            ToolError: ``host_not_allowed`` (details name the origin, never the path or query) or ``insecure_url``.
        """
        origin = _url_origin(url)
        if origin is None or origin not in self.allowed_hosts:
            raise ToolError(
                "the request's origin is not in allowed_hosts",
                reason="host_not_allowed",
                details={"operation": operation.name, "origin": (origin or "invalid")[:256]},
            )
        parts = urlsplit(origin)
        if parts.scheme != "https" and not (self.allow_http_loopback and is_loopback_host(parts.hostname or "")):
            raise ToolError(
                "plain http is allowed only to a loopback host",
                reason="insecure_url",
                details={"operation": operation.name, "origin": origin},
            )
        return origin

    # ---- sending ---------------------------------------------------------------------------------------------
    def send(
        self, operation: Operation, args: Mapping[str, Any], broker: AuthBroker | None, context: Any = None
    ) -> dict[str, Any]:
        """Make the request of ``operation`` with ``args`` and return ``{"status", "content_type", "body"}``.

        ``broker`` adds the operation's credentials (``None``: only operations without security can be called).
        When the broker's credential source answers with a dict instead of a credential, nothing is sent and that
        dict is the result.

        Raises:
            ToolError: as :meth:`build`; ``host_not_allowed``, ``insecure_url``, ``no_credential_for_operation``
                and the broker's reasons; ``http_timeout``, ``http_unreachable``, ``tls_error``,
                ``http_request_failed``, ``response_too_large``, ``invalid_response_body``.
        """
        request = self.build(operation, args)
        origin = self.check_origin(operation, request.url)
        if broker is None:
            if operation.security and not any(not alt.schemes for alt in operation.security):
                raise no_credential(operation, "the operation needs credentials and the toolset has no auth broker")
            injection = None
        else:
            granted = broker.authorize(operation, context)
            if isinstance(granted, dict):
                return granted
            injection = granted
        url = request.url
        headers: dict[str, str] = {"User-Agent": USER_AGENT, "Accept": ACCEPT, "Accept-Encoding": "gzip, deflate"}
        for name, value in request.headers:
            headers[name] = value
        cookies = list(request.cookies)
        traceparent = getattr(context, "traceparent", "")
        if isinstance(traceparent, str) and traceparent and check_header_value(traceparent):
            headers["traceparent"] = traceparent
        if request.content_type is not None:
            headers["Content-Type"] = request.content_type
        if injection is not None:
            # Credentials are added last: a same-named header argument never replaces one.
            for name, secret in injection.headers:
                for existing in [h for h in headers if h.lower() == name.lower()]:
                    del headers[existing]
                headers[name] = secret.reveal()
            extra = [f"{quote(n, safe='')}={quote(s.reveal(), safe='')}" for n, s in injection.query]
            if extra:
                url += ("&" if "?" in url else "?") + "&".join(extra)
            cookies = [(n, v) for n, v in cookies if n not in {c for c, _ in injection.cookies}]
            cookies.extend((n, s.reveal()) for n, s in injection.cookies)
        if cookies:
            headers["Cookie"] = "; ".join(f"{n}={v}" for n, v in cookies)
        self.check_origin(operation, url)  # again on the URL as sent (credentials in the query included)
        return self._exchange(operation, origin, request.method, url, headers, request.body)

    def _exchange(
        self,
        operation: Operation,
        origin: str,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
    ) -> dict[str, Any]:
        details = {"operation": operation.name, "origin": origin}
        deadline = time.monotonic() + self.timeout_s
        session = self._http()
        try:
            prepared = session.prepare_request(requests.Request(method, url, headers=headers, data=body))
            prepared.url = url  # exactly the URL that was checked: no re-quoting or normalization on the way
            response = session.send(
                prepared,
                allow_redirects=False,
                stream=True,
                verify=self.verify_tls,
                timeout=(min(self.timeout_s, 10.0), self.timeout_s),
                proxies={},
            )
        except requests.exceptions.SSLError:
            raise ToolError("TLS verification or handshake failed", reason="tls_error", details=details) from None
        except requests.Timeout:
            raise ToolError("the request timed out", reason="http_timeout", details=details) from None
        except requests.ConnectionError:
            raise ToolError("the server could not be reached", reason="http_unreachable", details=details) from None
        except requests.RequestException as exc:
            raise ToolError(
                "the request could not be made",
                reason="http_request_failed",
                details={**details, "type": type(exc).__name__},
            ) from None
        try:
            data = self._read(response, deadline, details)
        finally:
            response.close()
        return self._result(response.status_code, response.headers.get("Content-Type", ""), data, details)

    def _read(self, response: requests.Response, deadline: float, details: dict[str, Any]) -> bytes:
        chunks: list[bytes] = []
        size = 0
        limit = self.max_response_bytes
        try:
            while True:
                chunk = response.raw.read1(min(READ_CHUNK, limit + 1 - size), decode_content=True)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    raise ToolError(
                        "the response body is too large",
                        reason="response_too_large",
                        details={**details, "max_bytes": limit},
                    )
                if time.monotonic() > deadline:
                    raise ToolError("the response took too long", reason="http_timeout", details=details)
        except urllib3.exceptions.ReadTimeoutError:
            raise ToolError("the response timed out", reason="http_timeout", details=details) from None
        except urllib3.exceptions.SSLError:
            raise ToolError("TLS failed while reading", reason="tls_error", details=details) from None
        except (urllib3.exceptions.HTTPError, OSError):
            raise ToolError(
                "the connection failed while reading the response", reason="http_unreachable", details=details
            ) from None
        return b"".join(chunks)

    def _result(self, status: int, content_type: str, data: bytes, details: dict[str, Any]) -> dict[str, Any]:
        mime, charset = _mime(content_type)
        shown = content_type[:256] if check_header_value(content_type[:256]) else mime[:256]
        result: dict[str, Any] = {"status": status, "content_type": shown}
        if not data:
            result["body"] = None
        elif _JSON_MIME.fullmatch(mime):
            try:
                parsed = json.loads(data.decode("utf-8-sig"), parse_constant=_reject_constant)
                check_json_safe(parsed)
                result["body"] = parsed
            except (ValueError, RecursionError, ValidationError):
                raise ToolError(
                    "the response says JSON but is not", reason="invalid_response_body", details=details
                ) from None
        elif mime.startswith("text/"):
            try:
                codec = codecs.lookup(charset or "utf-8").name
            except LookupError:
                codec = "utf-8"
            result["body"] = data.decode(codec, errors="replace").replace("\x00", "\ufffd")
        else:
            result["bytes"] = len(data)
            result["body_omitted"] = "unsupported_response_type"
        return result

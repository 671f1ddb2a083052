"""A JWKS cache: an issuer's public signing keys fetched over HTTP(S), bounded, cached and refreshed at a bounded rate.

:class:`JwksCache` answers "which key has this ``kid``?" for :class:`~adk_actors.auth.jwt_policy.JwtPolicy`:

* a fetch is one plain GET (no redirects, no proxies) with a total wall-clock deadline (``timeout_s``: connect,
  headers and body together) and a response size bound (``max_bytes``);
* the key set is cached for ``ttl_s``; a ``kid`` the cache does not hold triggers a refetch, but at most one fetch
  starts per ``min_refresh_interval_s`` whatever the traffic, so a flood of tokens with invented ``kid`` values
  costs the issuer one request per interval;
* fetches are single-flight: threads that need a refresh while one is in flight wait for it instead of starting
  their own;
* a failed fetch keeps the keys already held (a down or slow endpoint does not stop tokens signed by known keys),
  and a ``kid`` that could not be looked up because the endpoint failed is refused with ``jwks_unavailable``
  rather than ``unknown_key``.

Only asymmetric signing keys are kept: ``oct`` keys, keys whose ``use`` is not ``sig``, keys without a ``kid`` and
keys PyJWT cannot load are skipped; a response with no usable key counts as a failed fetch (the old keys stay).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import jwt

from adk_actors.errors import AuthError, ConfigError
from adk_actors.logs import get_logger
from adk_actors.settings import is_loopback_host

__all__ = [
    "DEFAULT_JWKS_MAX_BYTES",
    "DEFAULT_JWKS_TIMEOUT_S",
    "DEFAULT_JWKS_TTL_S",
    "DEFAULT_MIN_REFRESH_INTERVAL_S",
    "MAX_JWKS_KEYS",
    "JwksCache",
    "SigningKey",
    "check_url",
]

DEFAULT_JWKS_TIMEOUT_S = 5.0
"""Total deadline of one JWKS fetch (connect, headers and body)."""
DEFAULT_JWKS_MAX_BYTES = 256 * 1024
"""Bound on a JWKS response body."""
DEFAULT_JWKS_TTL_S = 300.0
"""How long a fetched key set counts as fresh."""
DEFAULT_MIN_REFRESH_INTERVAL_S = 30.0
"""Least time between two fetch attempts (the bound on the refresh rate)."""
MAX_JWKS_KEYS = 64
"""Keys kept from one response (the rest are ignored)."""

_LOGGER = "adk_actors.auth.jwks"


def check_url(url: Any, *, field: str, allow_http_loopback: bool = False) -> str:
    """Validate an issuer or JWKS URL: absolute ``https`` with a host, no credentials, no fragment.

    ``http`` is accepted only for a loopback host (``127.0.0.0/8``, ``::1``, ``localhost``) and only when
    ``allow_http_loopback`` is set, which is meant for tests.

    Raises:
        ConfigError: ``insecure_url`` for a scheme that is not allowed, ``invalid_value`` for anything else.
    """
    if not isinstance(url, str) or not url or len(url) > 2048 or url != url.strip():
        raise ConfigError(f"{field} must be an absolute URL", reason="invalid_value", details={"field": field})
    try:
        parts = urlsplit(url)
        _ = parts.port  # a malformed port raises here
    except ValueError:
        raise ConfigError(f"{field} is not a valid URL", reason="invalid_value", details={"field": field}) from None
    host = parts.hostname or ""
    if not host or parts.username is not None or parts.password is not None or parts.fragment or "#" in url:
        raise ConfigError(
            f"{field} must have a host and no credentials or fragment",
            reason="invalid_value",
            details={"field": field},
        )
    if parts.scheme == "https":
        return url
    if parts.scheme == "http" and allow_http_loopback and is_loopback_host(host):
        return url
    raise ConfigError(
        f"{field} must use https (http only for a loopback host with allow_http_loopback=True)",
        reason="insecure_url",
        details={"field": field, "scheme": parts.scheme[:16]},
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SigningKey:
    """One public signing key of a key set."""

    kid: str
    """The key id tokens name in their ``kid`` header."""
    kty: str
    """The JWK key type: ``RSA``, ``EC`` or ``OKP``."""
    crv: str | None
    """The curve of an ``EC`` or ``OKP`` key."""
    alg: str | None
    """The algorithm the JWK pins (its ``alg`` member), if any."""
    key: Any
    """The public key as a ``cryptography`` object."""


class _FetchFailed(Exception):
    def __init__(self, cause: str, **details: Any) -> None:
        super().__init__(cause)
        self.cause = cause
        self.details = details


def _parse_keys(body: bytes) -> dict[str, SigningKey]:
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _FetchFailed("invalid_json") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise _FetchFailed("invalid_jwks")
    keys: dict[str, SigningKey] = {}
    for item in data["keys"]:
        if len(keys) >= MAX_JWKS_KEYS:
            break
        parsed = _signing_key(item)
        if parsed is not None and parsed.kid not in keys:  # a duplicated kid: the first one wins
            keys[parsed.kid] = parsed
    if not keys:
        raise _FetchFailed("no_usable_keys")
    return keys


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def _signing_key(item: Any) -> SigningKey | None:
    if not isinstance(item, dict):
        return None
    kid, kty, use, alg, crv = (item.get(k) for k in ("kid", "kty", "use", "alg", "crv"))
    if not isinstance(kid, str) or not kid or len(kid) > 256 or kty not in ("RSA", "EC", "OKP"):
        return None
    if use is not None and use != "sig":
        return None
    if "d" in item:  # a private key published by mistake is not a key we verify with
        return None
    if alg is not None and not isinstance(alg, str):
        return None
    if crv is not None and not isinstance(crv, str):
        return None
    try:
        loaded = jwt.PyJWK(item).key
    except (jwt.PyJWTError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return SigningKey(kid=kid, kty=kty, crv=crv, alg=alg, key=loaded)


class JwksCache:
    """The signing keys of one issuer, fetched from ``url`` and cached (see the module docstring).

    Thread-safe. ``clock`` (monotonic seconds) decides freshness and the refresh rate; the fetch deadline always
    uses the real monotonic clock. :attr:`fetch_count` counts fetch attempts, for tests and metrics.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = DEFAULT_JWKS_TIMEOUT_S,
        max_bytes: int = DEFAULT_JWKS_MAX_BYTES,
        ttl_s: float = DEFAULT_JWKS_TTL_S,
        min_refresh_interval_s: float = DEFAULT_MIN_REFRESH_INTERVAL_S,
        allow_http_loopback: bool = False,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Configure the cache; nothing is fetched until a key is asked for (or :meth:`refresh` is called).

        Raises:
            ConfigError: an insecure or malformed ``url``, or a bound outside its range.
        """
        self.url = check_url(url, field="jwks_url", allow_http_loopback=allow_http_loopback)
        _bounded("jwks_timeout_s", timeout_s, 0.01, 60.0)
        _bounded("jwks_max_bytes", max_bytes, 256, 16 * 1024 * 1024)
        _bounded("jwks_ttl_s", ttl_s, 1.0, 7 * 24 * 3600.0)
        _bounded("min_refresh_interval_s", min_refresh_interval_s, 0.0, 24 * 3600.0)
        self.timeout_s = float(timeout_s)
        self.max_bytes = int(max_bytes)
        self.ttl_s = float(ttl_s)
        self.min_refresh_interval_s = float(min_refresh_interval_s)
        self._ssl_context = ssl_context
        self._clock = clock
        self._state = threading.Lock()
        self._fetching = threading.Lock()
        self._keys: Mapping[str, SigningKey] = MappingProxyType({})
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._last_failure: dict[str, Any] | None = None
        self._generation = 0
        self.fetch_count = 0

    @property
    def kids(self) -> frozenset[str]:
        """The key ids held now."""
        with self._state:
            return frozenset(self._keys)

    def key(self, kid: str) -> SigningKey:
        """The signing key named ``kid``, refetching the key set when it is stale or lacks ``kid`` (rate-bounded).

        Raises:
            AuthError: ``unknown_key`` when the latest fetch succeeded without ``kid``; ``jwks_unavailable``
                when ``kid`` is not held and the latest fetch failed (down, slow, oversized, malformed).
        """
        now = self._clock()
        with self._state:
            found = self._keys.get(kid)
            fresh = self._fetched_at is not None and now - self._fetched_at < self.ttl_s
            generation = self._generation
        if found is not None and fresh:
            return found
        # A stale key in hand is not worth waiting for someone else's fetch: it is used if one is in flight.
        answered = self._refresh(generation, wait=found is None, force=False)
        with self._state:
            found = self._keys.get(kid)
            failure = self._last_failure
            if failure is None and (not answered or self._fetched_at is None):
                failure = {"cause": "timeout", "timeout_s": self.timeout_s}  # another thread's fetch is still out
        if found is not None:
            return found
        if failure is not None:
            raise AuthError("the issuer's key set could not be fetched", reason="jwks_unavailable", details=failure)
        raise AuthError("the token's signing key is not in the issuer's key set", reason="unknown_key")

    def refresh(self) -> None:
        """Fetch the key set now (single-flight, ignoring the refresh interval).

        Raises:
            AuthError: ``jwks_unavailable`` if this fetch failed (the keys held before stay).
        """
        with self._state:
            generation = self._generation
        answered = self._refresh(generation, wait=True, force=True)
        with self._state:
            failure = self._last_failure
        if not answered:
            failure = {"cause": "timeout", "timeout_s": self.timeout_s}
        if failure is not None:
            raise AuthError("the issuer's key set could not be fetched", reason="jwks_unavailable", details=failure)

    def _refresh(self, generation: int, *, wait: bool, force: bool) -> bool:
        """Fetch unless a fetch finished since ``generation`` was read or (unless ``force``) the refresh interval
        has not passed; False if another thread's fetch is still out."""
        # Waiters give up a little after the fetch's own deadline, so a caller never waits much past timeout_s.
        if not self._fetching.acquire(timeout=self.timeout_s + 0.5 if wait else 0):
            return False
        try:
            with self._state:
                if self._generation != generation:
                    return True  # a fetch finished while this thread waited: its result is the answer
                now = self._clock()
                last = self._attempted_at
                if not force and last is not None and now - last < self.min_refresh_interval_s:
                    return True  # the refresh rate is bounded: the last answer stands
                self._attempted_at = now
                self.fetch_count += 1
            try:
                keys = _parse_keys(self._get())
            except _FetchFailed as failed:
                get_logger(_LOGGER).warning("jwks_fetch_failed", cause=failed.cause, **failed.details)
                with self._state:
                    self._last_failure = {"cause": failed.cause, **failed.details}
                    self._generation += 1
                return True
            with self._state:
                self._keys = MappingProxyType(keys)
                self._fetched_at = self._clock()
                self._last_failure = None
                self._generation += 1
            return True
        finally:
            self._fetching.release()

    def _get(self) -> bytes:
        """One GET of the key set within ``timeout_s`` in total and ``max_bytes`` of body."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            context = self._ssl_context or ssl.create_default_context()
            conn = http.client.HTTPSConnection(host, parts.port, timeout=self.timeout_s, context=context)
        else:
            conn = http.client.HTTPConnection(host, parts.port, timeout=self.timeout_s)
        expired = threading.Event()
        held: list[socket.socket] = []  # http.client drops conn.sock when the response owns the connection

        def cut() -> None:  # the total deadline: a trickling server loses its socket
            expired.set()
            for sock in held:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        timer = threading.Timer(self.timeout_s, cut)
        timer.daemon = True
        timer.start()
        response: http.client.HTTPResponse | None = None
        try:
            conn.connect()
            if conn.sock is not None:
                held.append(conn.sock)
            if expired.is_set():
                raise _FetchFailed("timeout", timeout_s=self.timeout_s)
            conn.request("GET", path, headers={"Accept": "application/jwk-set+json, application/json"})
            response = conn.getresponse()
            if response.status != 200:
                raise _FetchFailed("http_status", status=response.status)
            length = response.getheader("Content-Length")
            if length is not None and length.isdigit() and int(length) > self.max_bytes:
                raise _FetchFailed("too_large", max_bytes=self.max_bytes)
            body = bytearray()
            while True:
                chunk = response.read1(64 * 1024)
                if not chunk:
                    break
                body += chunk
                if len(body) > self.max_bytes:
                    raise _FetchFailed("too_large", max_bytes=self.max_bytes)
            if expired.is_set():
                raise _FetchFailed("timeout", timeout_s=self.timeout_s)
            return bytes(body)
        except TimeoutError:
            raise _FetchFailed("timeout", timeout_s=self.timeout_s) from None
        except (OSError, http.client.HTTPException):
            if expired.is_set():
                raise _FetchFailed("timeout", timeout_s=self.timeout_s) from None
            raise _FetchFailed("connection_failed") from None
        finally:
            timer.cancel()
            if response is not None:
                response.close()
            conn.close()


def _bounded(field: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError(
            f"{field} must be a number in [{low}, {high}]",
            reason="invalid_value",
            details={"field": field, "min": low, "max": high},
        )

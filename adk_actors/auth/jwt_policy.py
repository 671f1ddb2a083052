"""JwtPolicy: verify bearer access tokens (JWTs) from one issuer, and an ASGI guard that applies it at an edge.

A :class:`JwtPolicy` is validated once, at construction, and then answers :meth:`JwtPolicy.verify` with a frozen
:class:`Claims` value or refuses with one error class (:class:`~adk_actors.errors.AuthError`) whose reason
tag names the refusal. Checks, in order:

* the token is a bounded compact JWS with a JSON header; no ``crit`` extensions;
* ``alg`` is in the policy's asymmetric allow-list (``none`` and ``HS*`` never are: a symmetric algorithm with a
  public key as the secret is the classic algorithm-confusion forgery) → ``disallowed_algorithm``;
* ``typ`` is one of ``token_types`` (compared case-insensitively, ``application/`` prefix ignored) →
  ``wrong_token_type``;
* ``kid`` names a key of the issuer's JWKS (:class:`~adk_actors.auth.jwks.JwksCache`) whose type, curve and pinned
  ``alg`` fit the token's ``alg`` → ``unknown_key`` / ``jwks_unavailable`` / ``disallowed_algorithm``;
* the signature verifies (PyJWT, minimum key lengths enforced) → ``invalid_token``;
* ``iss`` equals the issuer exactly → ``wrong_issuer``; ``aud`` (a string or a list) contains the audience →
  ``wrong_audience``; ``sub`` is a non-empty string → ``invalid_token``;
* ``exp`` and ``iat`` are present, ``exp``/``nbf``/``iat`` hold with ``leeway_s`` → ``expired_token`` /
  ``token_not_yet_valid``; ``exp - iat <= max_lifetime_s`` → ``token_lifetime_too_long``;
* every required scope is granted (space-separated ``scope`` or a ``scp`` list) → ``insufficient_scope``.

No error, log line or detail carries the token or anything read from it; details name the policy's own values
only (missing scopes, the JWKS failure cause).

The edge part is plain ASGI so this layer-3 package needs no web framework: :func:`bearer_claims` reads the
``Authorization`` header of a request, and :class:`JwtGuard` wraps an ASGI app, answers 401/403/503 in the edge's
error shape ``{"error": {"reason", "message"}}`` with a ``WWW-Authenticate: Bearer`` challenge (RFC 6750), and
puts the verified :class:`Claims` in ``scope["state"]["auth_claims"]`` (``request.state.auth_claims`` in Starlette).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import math
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import jwt

from adk_actors.auth.jwks import (
    DEFAULT_JWKS_MAX_BYTES,
    DEFAULT_JWKS_TIMEOUT_S,
    DEFAULT_JWKS_TTL_S,
    DEFAULT_MIN_REFRESH_INTERVAL_S,
    JwksCache,
    SigningKey,
    check_url,
)
from adk_actors.errors import AuthError, ConfigError

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "CLAIMS_STATE_KEY",
    "MAX_TOKEN_CHARS",
    "Claims",
    "JwtGuard",
    "JwtPolicy",
    "bearer_claims",
    "guard_response",
]

ASYMMETRIC_ALGORITHMS: frozenset[str] = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""The algorithms a policy may allow: asymmetric signatures only."""
MAX_TOKEN_CHARS = 16 * 1024
"""Longest token looked at; longer ones are refused before parsing."""
CLAIMS_STATE_KEY = "auth_claims"
"""The key of the verified :class:`Claims` in the ASGI scope's ``state`` (set by :class:`JwtGuard`)."""

_KEY_TYPES: Mapping[str, tuple[str, frozenset[str | None]]] = MappingProxyType(
    {
        **{f"RS{n}": ("RSA", frozenset({None})) for n in (256, 384, 512)},
        **{f"PS{n}": ("RSA", frozenset({None})) for n in (256, 384, 512)},
        "ES256": ("EC", frozenset({"P-256"})),
        "ES384": ("EC", frozenset({"P-384"})),
        "ES512": ("EC", frozenset({"P-521"})),
        "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
    }
)
_MAX_LEEWAY_S = 300.0
_MAX_LIFETIME_S = 7 * 24 * 3600.0
_MAX_SCOPES = 256
_TOKEN_RE = re.compile(r"[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*")
_SCOPE_TOKEN_RE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")  # RFC 6749 scope-token
_JWS = jwt.PyJWS(options={"enforce_minimum_key_length": True})


def _refuse(reason: str, message: str, **details: Any) -> AuthError:
    return AuthError(message, reason=reason, details=details)


@dataclass(frozen=True, slots=True, kw_only=True)
class Claims:
    """The verified claims of one access token (never the token itself)."""

    issuer: str
    """``iss``: the policy's issuer."""
    subject: str
    """``sub``: who the token was issued for, unique within the issuer."""
    audience: tuple[str, ...]
    """``aud`` as a tuple (it contains the policy's audience)."""
    scopes: frozenset[str]
    """The granted scopes (``scope`` split on spaces, or the ``scp`` list)."""
    expires_at: float
    """``exp``, seconds since the epoch."""
    issued_at: float
    """``iat``, seconds since the epoch."""
    claims: Mapping[str, Any] = field(repr=False)
    """Every claim of the payload, read-only."""

    @property
    def principal(self) -> str:
        """An issuer-bound identity (``"<iss>#<sub>"``): equal subjects of two issuers never collide."""
        return f"{self.issuer}#{self.subject}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _normal_type(value: str) -> str:
    value = value.strip().lower()
    return value[len("application/") :] if value.startswith("application/") else value


def _check_fits(key: SigningKey, alg: str) -> None:
    kty, curves = _KEY_TYPES.get(alg, ("", frozenset()))
    if key.kty != kty or key.crv not in curves or (key.alg is not None and key.alg != alg):
        raise _refuse("disallowed_algorithm", "the token's algorithm does not fit its signing key")


class JwtPolicy:
    """What an access token from one issuer must satisfy (see the module docstring for the checks).

    Example::

        policy = JwtPolicy(
            issuer="https://id.example.com",
            audience="https://agents.example.com",
            jwks_url="https://id.example.com/.well-known/jwks.json",
            required_scopes=("agent.run",),
        )
        claims = policy.verify(token)  # Claims, or AuthError with a reason tag

    Immutable after construction and thread-safe; the JWKS cache it holds (its own, or ``jwks`` when given, which
    several policies of one issuer may share) refreshes under its own lock.
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_url: str | None = None,
        jwks: JwksCache | None = None,
        algorithms: Iterable[str] = ("RS256", "ES256"),
        token_types: Iterable[str] = ("at+jwt", "JWT"),
        max_lifetime_s: float = 3600.0,
        leeway_s: float = 30.0,
        required_scopes: Iterable[str] = (),
        allow_http_loopback: bool = False,
        jwks_timeout_s: float = DEFAULT_JWKS_TIMEOUT_S,
        jwks_max_bytes: int = DEFAULT_JWKS_MAX_BYTES,
        jwks_ttl_s: float = DEFAULT_JWKS_TTL_S,
        min_refresh_interval_s: float = DEFAULT_MIN_REFRESH_INTERVAL_S,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Validate the policy and set up its JWKS cache (nothing is fetched yet).

        Args:
            issuer: The exact ``iss`` value; an ``https`` URL (``http`` only for loopback with
                ``allow_http_loopback``).
            audience: The value ``aud`` must contain.
            jwks_url: Where the issuer publishes its keys (same URL rules as ``issuer``); or pass ``jwks``.
            jwks: A shared :class:`JwksCache` instead of ``jwks_url``.
            algorithms: The allowed ``alg`` values, a non-empty subset of :data:`ASYMMETRIC_ALGORITHMS`.
            token_types: The allowed ``typ`` header values.
            max_lifetime_s: Largest ``exp - iat`` accepted.
            leeway_s: Clock skew tolerated on ``exp``, ``nbf`` and ``iat`` (at most 300 s).
            required_scopes: Scopes every token must grant.
            allow_http_loopback: Accept ``http`` issuer and JWKS URLs on a loopback host (tests).
            jwks_timeout_s: Total deadline of one JWKS fetch.
            jwks_max_bytes: Bound on a JWKS response.
            jwks_ttl_s: Freshness of a fetched key set.
            min_refresh_interval_s: Least time between two JWKS fetches.
            ssl_context: TLS settings for the JWKS fetch (default: the system's trust store, verified).
            clock: Wall-clock seconds since the epoch, for ``exp``/``nbf``/``iat``.

        Raises:
            ConfigError: ``disallowed_algorithm`` for ``none``, ``HS*`` or another algorithm outside the
                allow-list; ``insecure_url`` for a non-HTTPS URL; ``invalid_value`` for anything else malformed.
        """
        self.issuer = check_url(issuer, field="issuer", allow_http_loopback=allow_http_loopback)
        if not isinstance(audience, str) or not audience or len(audience) > 2048:
            raise ConfigError(
                "audience must be a non-empty string", reason="invalid_value", details={"field": "audience"}
            )
        self.audience = audience
        self.algorithms = _algorithms(algorithms)
        self.token_types = _token_types(token_types)
        self.max_lifetime_s = _bounded("max_lifetime_s", max_lifetime_s, 1.0, _MAX_LIFETIME_S)
        self.leeway_s = _bounded("leeway_s", leeway_s, 0.0, _MAX_LEEWAY_S)
        self.required_scopes = _scopes(required_scopes)
        if (jwks is None) == (jwks_url is None):
            raise ConfigError(
                "give exactly one of jwks_url and jwks", reason="invalid_value", details={"field": "jwks"}
            )
        if jwks_url is not None:
            jwks = JwksCache(
                jwks_url,
                timeout_s=jwks_timeout_s,
                max_bytes=jwks_max_bytes,
                ttl_s=jwks_ttl_s,
                min_refresh_interval_s=min_refresh_interval_s,
                allow_http_loopback=allow_http_loopback,
                ssl_context=ssl_context,
            )
        elif not isinstance(jwks, JwksCache):
            raise ConfigError("jwks must be a JwksCache", reason="invalid_value", details={"field": "jwks"})
        self.jwks = jwks
        self._clock = clock

    def __repr__(self) -> str:
        return f"JwtPolicy(issuer={self.issuer!r}, audience={self.audience!r}, algorithms={sorted(self.algorithms)})"

    def verify(self, token: Any) -> Claims:
        """Verify ``token`` (a compact JWS string) and return its claims.

        May block on a JWKS fetch (at most about ``jwks_timeout_s``) when the key set is stale or lacks the
        token's ``kid``; call it from a worker thread in async code (:class:`JwtGuard` does).

        Raises:
            AuthError: reason ``invalid_token``, ``disallowed_algorithm``, ``wrong_token_type``,
                ``unknown_key``, ``jwks_unavailable``, ``wrong_issuer``, ``wrong_audience``, ``expired_token``,
                ``token_not_yet_valid``, ``token_lifetime_too_long`` or ``insufficient_scope``.
        """
        if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or not _TOKEN_RE.fullmatch(token):
            raise _refuse("invalid_token", "the token is not a compact JWS")
        header = _header(token)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise _refuse("disallowed_algorithm", "the token's algorithm is not allowed by the policy")
        typ = header.get("typ")
        if not isinstance(typ, str) or _normal_type(typ) not in self.token_types:
            raise _refuse("wrong_token_type", "the token's type is not allowed by the policy")
        if "crit" in header:
            raise _refuse("invalid_token", "the token names critical header extensions")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid or len(kid) > 256:
            raise _refuse("invalid_token", "the token does not name its signing key")
        key = self.jwks.key(kid)
        _check_fits(key, alg)
        try:
            decoded = _JWS.decode_complete(token, key=key.key, algorithms=[alg])
        except (jwt.PyJWTError, ValueError, TypeError):
            raise _refuse("invalid_token", "the token's signature does not verify") from None
        return self._claims(_payload(decoded["payload"]))

    def _claims(self, payload: dict[str, Any]) -> Claims:
        if payload.get("iss") != self.issuer:
            raise _refuse("wrong_issuer", "the token was issued by another issuer")
        aud = payload.get("aud")
        audience = (aud,) if isinstance(aud, str) else tuple(aud) if isinstance(aud, list) else ()
        if not all(isinstance(a, str) for a in audience) or self.audience not in audience:
            raise _refuse("wrong_audience", "the token is not meant for this audience")
        subject = payload.get("sub")
        if not isinstance(subject, str) or not subject:
            raise _refuse("invalid_token", "the token names no subject")
        exp, iat, nbf = (_number(payload.get(k)) for k in ("exp", "iat", "nbf"))
        if exp is None or iat is None or ("nbf" in payload and nbf is None):
            raise _refuse("invalid_token", "the token lacks a numeric exp or iat")
        now = self._clock()
        if now >= exp + self.leeway_s:
            raise _refuse("expired_token", "the token has expired")
        if iat > now + self.leeway_s or (nbf is not None and nbf > now + self.leeway_s):
            raise _refuse("token_not_yet_valid", "the token is not valid yet")
        if exp - iat > self.max_lifetime_s:
            raise _refuse(
                "token_lifetime_too_long", "the token's lifetime exceeds the policy", max_lifetime_s=self.max_lifetime_s
            )
        scopes = _granted(payload)
        missing = sorted(self.required_scopes - scopes)
        if missing:
            raise _refuse("insufficient_scope", "the token lacks a required scope", required_scopes=missing)
        return Claims(
            issuer=self.issuer,
            subject=subject,
            audience=audience,
            scopes=scopes,
            expires_at=exp,
            issued_at=iat,
            claims=MappingProxyType(payload),
        )


def _b64_json(segment: str) -> Any:
    try:
        raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (binascii.Error, UnicodeDecodeError, ValueError, RecursionError):
        raise _refuse("invalid_token", "the token is not a compact JWS") from None


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _header(token: str) -> dict[str, Any]:
    header = _b64_json(token.split(".", 1)[0])
    if not isinstance(header, dict):
        raise _refuse("invalid_token", "the token is not a compact JWS")
    return header


def _payload(raw: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _refuse("invalid_token", "the token's payload is not JSON") from None
    if not isinstance(payload, dict):
        raise _refuse("invalid_token", "the token's payload is not a JSON object")
    return payload


def _granted(payload: Mapping[str, Any]) -> frozenset[str]:
    scope, scp = payload.get("scope"), payload.get("scp")
    if isinstance(scope, str):
        return frozenset(scope.split())
    if isinstance(scp, list):
        return frozenset(s for s in scp if isinstance(s, str))
    if isinstance(scp, str):
        return frozenset(scp.split())
    return frozenset()


def _algorithms(algorithms: Iterable[str]) -> frozenset[str]:
    if isinstance(algorithms, str):
        algorithms = (algorithms,)
    chosen = frozenset(algorithms)
    if not chosen:
        raise ConfigError("algorithms must not be empty", reason="invalid_value", details={"field": "algorithms"})
    refused = sorted(str(a)[:32] for a in chosen if a not in ASYMMETRIC_ALGORITHMS)
    if refused:
        raise ConfigError(
            "only asymmetric signature algorithms are allowed (never 'none' or HS*)",
            reason="disallowed_algorithm",
            details={"refused": refused, "allowed": sorted(ASYMMETRIC_ALGORITHMS)},
        )
    return chosen


def _token_types(token_types: Iterable[str]) -> frozenset[str]:
    if isinstance(token_types, str):
        token_types = (token_types,)
    types = tuple(token_types)
    if not types or not all(isinstance(t, str) and t.strip() for t in types):
        raise ConfigError(
            "token_types must be non-empty strings", reason="invalid_value", details={"field": "token_types"}
        )
    return frozenset(_normal_type(t) for t in types)


def _scopes(scopes: Iterable[str]) -> frozenset[str]:
    if isinstance(scopes, str):
        scopes = scopes.split()
    chosen = tuple(scopes)
    if len(chosen) > _MAX_SCOPES or not all(isinstance(s, str) and _SCOPE_TOKEN_RE.fullmatch(s) for s in chosen):
        raise ConfigError(
            "required_scopes must be scope tokens", reason="invalid_value", details={"field": "required_scopes"}
        )
    return frozenset(chosen)


def _bounded(name: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError(
            f"{name} must be a number in [{low}, {high}]",
            reason="invalid_value",
            details={"field": name, "min": low, "max": high},
        )
    return float(value)


# --- the edge ---------------------------------------------------------------------------------------------------

HeaderSource = Mapping[str, str] | Iterable[tuple[bytes | str, bytes | str]]
"""Request headers: a mapping (any key case) or ASGI-style ``(name, value)`` pairs."""


def _authorization_values(headers: HeaderSource) -> list[str]:
    pairs: Iterable[tuple[Any, Any]] = headers.items() if isinstance(headers, Mapping) else headers
    found: list[str] = []
    for name, value in pairs:
        text = name.decode("latin-1") if isinstance(name, bytes) else str(name)
        if text.lower() == "authorization":
            found.append(value.decode("latin-1") if isinstance(value, bytes) else str(value))
    return found


def bearer_claims(headers: HeaderSource, policy: JwtPolicy) -> Claims:
    """Verify the bearer token of a request's ``Authorization`` header (RFC 6750; never a query or body token).

    Raises:
        AuthError: ``missing_token`` when there is no ``Authorization`` header; ``invalid_request`` for
            several of them or a scheme other than ``Bearer``; otherwise as :meth:`JwtPolicy.verify`.
    """
    values = _authorization_values(headers)
    if not values:
        raise _refuse("missing_token", "the request carries no bearer token")
    if len(values) > 1:
        raise _refuse("invalid_request", "the request carries more than one Authorization header")
    scheme, _, token = values[0].strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _refuse("invalid_request", "the Authorization header is not a bearer token")
    return policy.verify(token.strip())


_STATUS: Mapping[str, int] = MappingProxyType(
    {"insufficient_scope": 403, "invalid_request": 400, "jwks_unavailable": 503}
)


def guard_response(err: AuthError, *, realm: str | None = None) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The edge answer to a refused token: status, headers and a JSON body ``{"error": {"reason", "message"}}``.

    401 with ``WWW-Authenticate: Bearer error="invalid_token"`` for a bad token (no ``error`` when it is missing),
    403 with ``error="insufficient_scope"``, 400 with ``error="invalid_request"``, 503 when the issuer's keys could
    not be fetched. The message is the error's fixed text; details are the policy's own (missing scopes).
    """
    status = _STATUS.get(err.reason, 401)
    params = [f'realm="{realm}"'] if realm else []
    if err.reason in ("insufficient_scope", "invalid_request"):
        params.append(f'error="{err.reason}"')
    elif err.reason not in ("missing_token", "jwks_unavailable"):
        params.append('error="invalid_token"')
    if err.reason == "insufficient_scope" and err.details.get("required_scopes"):
        params.append(f'scope="{" ".join(err.details["required_scopes"])}"')
    headers = [(b"content-type", b"application/json")]
    if status != 503:
        challenge = "Bearer" + (" " + ", ".join(params) if params else "")
        headers.append((b"www-authenticate", challenge.encode("latin-1")))
    body = {"error": {"reason": err.reason, "message": err.message, **err.details}}
    return status, headers, json.dumps(body, separators=(",", ":")).encode()


ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[MutableMapping[str, Any]], Awaitable[None]]],
    Awaitable[None],
]


class JwtGuard:
    """ASGI middleware: every HTTP request outside ``public_paths`` must carry a bearer token ``policy`` accepts.

    Refused requests never reach ``app`` (:func:`guard_response` gives the answer); accepted ones reach it with
    the :class:`Claims` in ``scope["state"]["auth_claims"]``. ``public_paths`` are exact paths (``"/healthz"``) or
    prefixes ending in ``/`` (``"/public/"``). Verification runs in a worker thread, since a JWKS fetch may block.
    Non-HTTP scopes (lifespan) pass through; websockets are guarded the same way (refused before the handshake).
    """

    def __init__(self, app: ASGIApp, policy: JwtPolicy, *, public_paths: Iterable[str] = (), realm: str | None = None):
        if not isinstance(policy, JwtPolicy):
            raise ConfigError("policy must be a JwtPolicy", reason="invalid_value", details={"field": "policy"})
        if realm is not None and (not isinstance(realm, str) or not re.fullmatch(r"[\x20\x21\x23-\x7e]{1,128}", realm)):
            raise ConfigError("realm must be printable ASCII without quotes", reason="invalid_value")
        self.app = app
        self.policy = policy
        self.realm = realm
        paths = tuple(public_paths)
        if not all(isinstance(p, str) and p.startswith("/") for p in paths):
            raise ConfigError("public_paths must start with '/'", reason="invalid_value")
        self._exact = frozenset(p for p in paths if not p.endswith("/") or p == "/")
        self._prefixes = tuple(p for p in paths if p.endswith("/") and p != "/")

    def _public(self, path: str) -> bool:
        return path in self._exact or any(path.startswith(p) for p in self._prefixes)

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        if scope.get("type") not in ("http", "websocket") or self._public(str(scope.get("path", ""))):
            await self.app(scope, receive, send)
            return
        try:
            claims = await asyncio.to_thread(bearer_claims, list(scope.get("headers") or ()), self.policy)
        except AuthError as err:
            status, headers, body = guard_response(err, realm=self.realm)
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        scope = dict(scope)
        scope["state"] = {**dict(scope.get("state") or {}), CLAIMS_STATE_KEY: claims}
        await self.app(scope, receive, send)

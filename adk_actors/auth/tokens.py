"""The token manager: OAuth 2.0 access tokens for outbound calls, fetched once and shared (single flight).

::

    client = OAuthClient(token_url="https://idp.example/oauth2/token", client_id="crm",
                         client_secret=store.put(scope, "crm-client-secret", secret), scopes=("orders.read",))
    tokens = TokenManager(store)
    tokens.access_token(client).reveal()     # cached until shortly before it expires

Grants: ``client_credentials`` (the client's secret comes from the credential store) and ``refresh_token`` (the
refresh token lives in the credential store, and a rotated one is written back before the new access token is
used, so a crash loses nothing). Per cache key — token URL, client id, scopes, audience — one request at a time:
N callers that need a token at once wait for a single request (single flight). A token is reused until
``skew_s`` before its expiry. A transient failure (network, 5xx, 429) is retried with jittered backoff, at most
``max_attempts`` times within the caller's deadline; an OAuth error answer (``invalid_client``, ``invalid_grant``,
...) is not retried. Access tokens are held as :class:`Secret` in memory only; nothing here logs, and errors carry
the OAuth error code, never a token, a secret or the response body.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests

from adk_actors.auth.credentials import CredentialRef
from adk_actors.errors import AuthError, ConfigError
from adk_actors.secrets import Secret
from adk_actors.settings import is_loopback_host

__all__ = ["AccessToken", "OAuthClient", "TokenError", "TokenManager"]

_OAUTH_ERROR_RE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz_")
MAX_RESPONSE_BYTES = 64 * 1024


TokenError = AuthError
"""A token could not be obtained: ``token_request_failed`` (transient failures past the retries),
``token_endpoint_refused`` (an OAuth error answer; ``details["oauth_error"]``), ``invalid_token_response``,
``token_timeout``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthClient:
    """An OAuth 2.0 client of one authorization server."""

    token_url: str
    client_id: str
    client_secret: CredentialRef | None = None
    """Where the client's secret is stored (``client_credentials``; also sent with ``refresh_token`` when set)."""
    refresh_token: CredentialRef | None = None
    """Where the refresh token is stored: set it to use the ``refresh_token`` grant."""
    scopes: tuple[str, ...] = ()
    audience: str = ""
    """Sent as the RFC 8707 ``resource`` parameter when set."""
    allow_http_loopback: bool = False
    timeout_s: float = 10.0
    max_attempts: int = 3

    def __post_init__(self) -> None:
        parts = urlsplit(self.token_url) if isinstance(self.token_url, str) else None
        if parts is None or not parts.hostname or parts.username or parts.fragment:
            raise ConfigError("token_url must be an https URL", reason="invalid_value", details={"key": "token_url"})
        if parts.scheme != "https" and not (
            parts.scheme == "http" and self.allow_http_loopback and is_loopback_host(parts.hostname)
        ):
            raise ConfigError(
                "token_url must be https (http only to loopback with allow_http_loopback)",
                reason="insecure_url",
                details={"key": "token_url"},
            )
        if not isinstance(self.client_id, str) or not 0 < len(self.client_id) <= 256:
            raise ConfigError("client_id must be a non-empty str", reason="invalid_value", details={"key": "client_id"})
        if self.client_secret is None and self.refresh_token is None:
            raise ConfigError(
                "an OAuth client needs a client_secret or a refresh_token reference",
                reason="invalid_value",
                details={"key": "client_secret"},
            )
        if not all(isinstance(s, str) and s and " " not in s for s in self.scopes):
            raise ConfigError(
                "scopes are non-empty str without spaces", reason="invalid_value", details={"key": "scopes"}
            )
        if not (isinstance(self.timeout_s, int | float) and 0 < self.timeout_s <= 300):
            raise ConfigError("timeout_s must be in (0, 300]", reason="invalid_value", details={"key": "timeout_s"})
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or not 1 <= self.max_attempts <= 10
        ):
            raise ConfigError("max_attempts must be in 1..10", reason="invalid_value", details={"key": "max_attempts"})

    @property
    def cache_key(self) -> tuple[str, str, tuple[str, ...], str]:
        return (self.token_url, self.client_id, tuple(sorted(self.scopes)), self.audience)


@dataclass(frozen=True, slots=True)
class AccessToken:
    """An access token (a :class:`Secret`) and when it expires (epoch seconds)."""

    token: Secret = field(repr=False)
    expires_at: float
    scopes: tuple[str, ...] = ()

    def reveal(self) -> str:
        return self.token.reveal()


class _Slot:
    __slots__ = ("fetching", "lock", "token")

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.token: AccessToken | None = None
        self.fetching = False


class TokenManager:
    """Access tokens per OAuth client, cached and fetched in single flight (see the module docstring)."""

    def __init__(
        self,
        store: Any,
        *,
        skew_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        session: requests.Session | None = None,
    ) -> None:
        self.store = store
        self.skew_s = float(skew_s)
        self.clock = clock
        self._session = session or requests.Session()
        self._session.trust_env = False
        self._slots: dict[tuple[str, str, tuple[str, ...], str], _Slot] = {}
        self._lock = threading.Lock()
        self.requests_made = 0
        """Token requests sent so far (what single flight keeps low)."""

    def __repr__(self) -> str:
        return f"TokenManager(<{len(self._slots)} client(s)>)"

    def _slot(self, client: OAuthClient) -> _Slot:
        with self._lock:
            return self._slots.setdefault(client.cache_key, _Slot())

    def access_token(self, client: OAuthClient, *, timeout: float | None = None) -> AccessToken:
        """A valid access token for ``client``: the cached one, or a new one (one request for all callers).

        Raises:
            TokenError: see the class; ``token_timeout`` when another caller's request outlasts ``timeout``.
            StorageError: the client's secret or refresh token is not in the store.
        """
        slot = self._slot(client)
        deadline = time.monotonic() + (client.timeout_s * client.max_attempts if timeout is None else timeout)
        with slot.lock:
            while True:
                token = slot.token
                if token is not None and token.expires_at - self.skew_s > self.clock():
                    return token
                if not slot.fetching:
                    slot.fetching = True
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not slot.lock.wait(remaining):
                    raise TokenError("waited too long for the token request", reason="token_timeout")
        try:
            fetched = self._fetch(client, deadline)
        finally:
            with slot.lock:
                slot.fetching = False
                slot.lock.notify_all()
        with slot.lock:
            slot.token = fetched
        return fetched

    def revoke(self, client: OAuthClient) -> None:
        """Forget the cached access token of ``client`` (the next call fetches a new one)."""
        slot = self._slot(client)
        with slot.lock:
            slot.token = None

    # ---- the request ----------------------------------------------------------------------------------------
    def _form(self, client: OAuthClient) -> dict[str, str]:
        form: dict[str, str] = {"client_id": client.client_id}
        if client.refresh_token is not None:
            form.update(grant_type="refresh_token", refresh_token=self.store.get(client.refresh_token).reveal())
        else:
            form["grant_type"] = "client_credentials"
        if client.client_secret is not None:
            form["client_secret"] = self.store.get(client.client_secret).reveal()
        if client.scopes:
            form["scope"] = " ".join(client.scopes)
        if client.audience:
            form["resource"] = client.audience
        return form

    def _fetch(self, client: OAuthClient, deadline: float) -> AccessToken:
        form = self._form(client)
        for attempt in range(1, client.max_attempts + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TokenError("the token request passed its deadline", reason="token_timeout")
            self.requests_made += 1
            status, body = post_form(self._session, client.token_url, form, min(client.timeout_s, remaining))
            if status == 200:
                return self._accept(client, body)
            if 400 <= status < 500 and status != 429:
                raise TokenError(
                    "the token endpoint refused the request",
                    reason="token_endpoint_refused",
                    details={"status": status, "oauth_error": oauth_error(body)},
                )
            if attempt < client.max_attempts:
                pause = min(2.0, 0.1 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
                time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
        raise TokenError(
            "the token endpoint did not answer usefully",
            reason="token_request_failed",
            details={"attempts": client.max_attempts},
        )

    def _accept(self, client: OAuthClient, body: bytes) -> AccessToken:
        import json

        try:
            if len(body) > MAX_RESPONSE_BYTES:
                raise ValueError("too large")
            data = json.loads(body)
            token = data["access_token"]
            kind = str(data.get("token_type", "bearer")).lower()
            lifetime = data.get("expires_in", 3600)
            if not isinstance(token, str) or not token or kind != "bearer":
                raise ValueError("token")
            if isinstance(lifetime, bool) or not isinstance(lifetime, int | float) or not 0 < lifetime <= 86400 * 366:
                raise ValueError("expires_in")
        except (ValueError, KeyError, TypeError):
            raise TokenError("the token response is malformed", reason="invalid_token_response") from None
        rotated = data.get("refresh_token")
        if client.refresh_token is not None and isinstance(rotated, str) and rotated:
            ref = client.refresh_token
            self.store.put(ref.scope, ref.name, rotated)  # stored before the new access token is handed out
        scope = data.get("scope")
        scopes = tuple(scope.split()) if isinstance(scope, str) else client.scopes
        return AccessToken(Secret(token), self.clock() + float(lifetime), scopes)


def post_form(session: requests.Session, url: str, form: dict[str, str], timeout: float) -> tuple[int, bytes]:
    """POST ``form`` to a token endpoint: no redirects, at most ``MAX_RESPONSE_BYTES + 1`` bytes read; status 0
    when the request failed (connection, timeout)."""
    try:
        response = session.post(
            url, data=form, headers={"Accept": "application/json"}, timeout=timeout, allow_redirects=False, stream=True
        )
        body = response.raw.read(MAX_RESPONSE_BYTES + 1, decode_content=True)
        response.close()
    except requests.RequestException:
        return 0, b""
    return response.status_code, body


def oauth_error(body: bytes) -> str:
    """The OAuth error code of an error answer when it is a plain code (never free text from the server)."""
    import json

    try:
        code = json.loads(body[:4096]).get("error")
    except (ValueError, AttributeError):
        return "unknown"
    if isinstance(code, str) and 0 < len(code) <= 64 and set(code) <= _OAUTH_ERROR_RE_CHARS:
        return code
    return "unknown"

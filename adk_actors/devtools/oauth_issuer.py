"""A real OAuth 2.0 / OpenID Connect authorization server for tests, samples and benchmarks, on 127.0.0.1.

:class:`OAuthIssuer` serves a Starlette app with uvicorn on a thread of this process (a free port; ``stop()`` joins
the thread and closes the port) and signs real RS256 or ES256 JWTs with keys made by ``cryptography``, encoded by
PyJWT. Its issuer identifier is its base URL, ``http://127.0.0.1:PORT``.

Routes:

* ``GET /.well-known/openid-configuration`` (also ``/.well-known/oauth-authorization-server``): the metadata;
* ``GET /jwks``: the public half of every key not yet retired (:meth:`OAuthIssuer.rotate_key`,
  :meth:`OAuthIssuer.retire`);
* ``GET /authorize``: the authorization-code request with PKCE ``S256`` (required: ``plain`` or no challenge is
  refused) and ``state`` (required). The sign-in is automatic: the user is ``login_hint`` when it names a known
  user, else the first one. An unknown client or a ``redirect_uri`` that is not exactly a registered one is
  answered 400 and never redirected (RFC 6749 §4.1.2.1); every other outcome is a 302 to the redirect URI with
  ``code``/``state`` or ``error``/``state``, and ``iss`` (RFC 9207);
* ``POST /token``: ``authorization_code`` (single-use code bound to client, redirect URI, challenge, nonce, scopes
  and user; a replayed code is refused and revokes every token issued from it), ``refresh_token`` (rotated: the
  used one is dead; a narrower ``scope`` is allowed, a wider one refused) and ``client_credentials``
  (``sub`` = client id). Clients authenticate with HTTP Basic or ``client_secret_post``; public clients (no
  secret) with their ``client_id`` only. Access tokens are RFC 9068 JWTs (``typ: at+jwt``), with an OIDC
  ``id_token`` (``typ: JWT``) when ``openid`` was granted on a code. Errors are RFC 6749 JSON bodies, 400 or 401;
* ``GET /userinfo``: ``{"sub"}`` for a valid, unrevoked access token of this issuer (401 otherwise).

Knobs for failure tests, thread-safe: :meth:`OAuthIssuer.deny_next`, :meth:`OAuthIssuer.fail_next_token`,
:attr:`OAuthIssuer.delay_token_s`. Counters: :attr:`OAuthIssuer.token_requests`, :attr:`OAuthIssuer.issued`.
:func:`pkce_pair` and :func:`follow_authorize` drive the browser's part without a browser::

    app = IssuerClient("app", "s3cret", ("http://127.0.0.1:9/cb",), ("authorization_code", "refresh_token"))
    with OAuthIssuer(clients={"app": app}) as issuer:
        verifier, challenge = pkce_pair()
        query = {"response_type": "code", "client_id": "app", "redirect_uri": "http://127.0.0.1:9/cb",
                 "scope": "openid", "state": "xyz", "code_challenge": challenge, "code_challenge_method": "S256"}
        code, state = follow_authorize(issuer.authorization_endpoint + "?" + urlencode(query))
        tokens = requests.post(issuer.token_endpoint, auth=("app", "s3cret"), data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": "http://127.0.0.1:9/cb",
            "code_verifier": verifier}).json()

No raw token, code or secret appears in a ``repr``, a log line or an error raised here.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import math
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import parse_qs, parse_qsl, unquote_plus, urlencode, urlsplit

import jwt
import requests
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from adk_actors.errors import AuthError, ConfigError

__all__ = ["GRANTS", "IssuedToken", "IssuerClient", "OAuthIssuer", "follow_authorize", "pkce_pair"]

GRANTS = ("authorization_code", "client_credentials", "refresh_token")
"""The grant types the issuer implements."""

_ALGORITHMS = {"rsa": "RS256", "ec": "ES256"}
_MAX_PARAM_CHARS = 2048
"""Bound on one request parameter (longer is ``invalid_request``)."""
_MAX_FORM_BYTES = 64 * 1024
"""Bound on a token request body."""
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
"""A scope token (RFC 6749 §3.3)."""
_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
"""An S256 challenge: base64url of a SHA-256 digest, unpadded."""
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")
"""A PKCE code verifier (RFC 7636 §4.1)."""
_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def _config_error(key: str, message: str) -> ConfigError:
    return ConfigError(message, reason="invalid_value", details={"key": key})


@dataclass(frozen=True, slots=True)
class IssuerClient:
    """A client registered at the issuer."""

    client_id: str
    """The public identifier."""
    client_secret: str | None = field(default=None, repr=False)
    """The secret for ``client_secret_basic`` / ``client_secret_post``; ``None`` makes a public client (PKCE only,
    no secret accepted)."""
    redirect_uris: tuple[str, ...] = ()
    """The exact redirect URIs an authorization request may name (absolute, no fragment)."""
    grants: tuple[str, ...] = ("authorization_code", "refresh_token")
    """The grant types the client may use (of :data:`GRANTS`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.client_id, str) or not self.client_id or len(self.client_id) > 256:
            raise _config_error("client_id", "client_id must be a non-empty str of at most 256 characters")
        if self.client_secret is not None and (not isinstance(self.client_secret, str) or not self.client_secret):
            raise _config_error("client_secret", "client_secret must be a non-empty str or None")
        if isinstance(self.redirect_uris, str) or not isinstance(self.redirect_uris, tuple):
            raise _config_error("redirect_uris", "redirect_uris must be a tuple of URIs")
        for uri in self.redirect_uris:
            parts = urlsplit(uri) if isinstance(uri, str) else None
            if parts is None or not parts.scheme or not parts.netloc or parts.fragment or "#" in uri:
                raise _config_error("redirect_uris", "a redirect URI must be absolute and have no fragment")
        if isinstance(self.grants, str) or not isinstance(self.grants, tuple) or not set(self.grants) <= set(GRANTS):
            raise _config_error("grants", "grants must be a tuple of " + ", ".join(GRANTS))
        if "authorization_code" in self.grants and not self.redirect_uris:
            raise _config_error("redirect_uris", "a client of the code grant needs a redirect URI")


class IssuedToken(NamedTuple):
    """One token response the issuer gave (what was issued, never the token)."""

    grant: str
    client_id: str
    sub: str
    scopes: tuple[str, ...]


@dataclass(slots=True)
class _Code:
    client_id: str
    redirect_uri: str
    challenge: str
    nonce: str | None
    scopes: tuple[str, ...]
    sub: str
    expires_at: float
    grant_id: str


@dataclass(slots=True)
class _Refresh:
    client_id: str
    sub: str
    scopes: tuple[str, ...]
    grant_id: str


class _OAuthFailure(Exception):
    """An RFC 6749 error answer of the token or userinfo endpoint (internal: becomes a JSON response)."""

    def __init__(self, error: str, status: int = 400, description: str = "") -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.description = description


def pkce_pair() -> tuple[str, str]:
    """A fresh PKCE ``(code_verifier, code_challenge)`` for method ``S256`` (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)  # 64 characters of the unreserved set
    return verifier, _s256(verifier)


def _s256(verifier: str) -> str:
    """The ``S256`` challenge of ``verifier``: unpadded base64url of its SHA-256 digest."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def follow_authorize(url: str, *, timeout_s: float = 10.0) -> tuple[str, str]:
    """Play the browser's part of the code flow: GET the authorization ``url`` without following the redirect
    and read ``(code, state)`` from the ``Location`` the server answered with.

    Raises:
        AuthError: ``authorization_refused`` (details: ``status``, ``oauth_error``) when the server answers
            without a redirect; ``authorization_error`` (details: ``oauth_error``) when the redirect carries an
            error; ``invalid_authorization_response`` when it carries no code or state; ``authorization_failed``
            when the request itself fails.
    """
    try:
        answer = requests.get(url, allow_redirects=False, timeout=timeout_s)
    except requests.RequestException as exc:
        raise AuthError(
            "the authorization request failed", reason="authorization_failed", details={"cause": type(exc).__name__}
        ) from None
    location = answer.headers.get("Location")
    if answer.status_code not in (302, 303) or not location:
        try:
            error = answer.json().get("error")
        except (ValueError, AttributeError):
            error = None
        raise AuthError(
            "the authorization server did not redirect",
            reason="authorization_refused",
            details={"status": answer.status_code, "oauth_error": error if isinstance(error, str) else None},
        )
    query = parse_qs(urlsplit(location).query)
    if "error" in query:
        raise AuthError(
            "the authorization server redirected with an error",
            reason="authorization_error",
            details={"oauth_error": query["error"][0]},
        )
    code, state = query.get("code", [""])[0], query.get("state", [""])[0]
    if not code or not state:
        raise AuthError("the redirect carries no code or state", reason="invalid_authorization_response")
    return code, state


class OAuthIssuer:
    """The authorization server (see the module docstring); a context manager that starts and stops it.

    Args:
        clients: The registered clients, by client id.
        users: The users who can sign in (the first one signs in unless ``login_hint`` names another).
        key_kind: ``"rsa"`` (RS256, 2048-bit keys) or ``"ec"`` (ES256, P-256 keys).
        access_token_ttl_s: Lifetime of access and id tokens.
        code_ttl_s: Lifetime of an authorization code.
        audience: The ``aud`` of access tokens when the request names no ``resource`` (RFC 8707).
        clock: Wall-clock seconds, for ``iat``/``exp`` and code expiry.

    Raises:
        ConfigError: ``invalid_value`` (details: ``key``) for a bad argument.
    """

    def __init__(
        self,
        *,
        clients: Mapping[str, IssuerClient],
        users: Iterable[str] = ("alice",),
        key_kind: str = "rsa",
        access_token_ttl_s: int = 300,
        code_ttl_s: int = 60,
        audience: str = "https://agents.test",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(clients, Mapping) or not all(
            isinstance(c, IssuerClient) and c.client_id == k for k, c in clients.items()
        ):
            raise _config_error("clients", "clients maps each client id to its IssuerClient")
        user_list = tuple(users)
        if not user_list or not all(isinstance(u, str) and u and len(u) <= 256 for u in user_list):
            raise _config_error("users", "users must be non-empty str values, at least one")
        if key_kind not in _ALGORITHMS:
            raise _config_error("key_kind", "key_kind must be 'rsa' or 'ec'")
        for key, ttl in (("access_token_ttl_s", access_token_ttl_s), ("code_ttl_s", code_ttl_s)):
            if isinstance(ttl, bool) or not isinstance(ttl, int) or not 1 <= ttl <= 86400:
                raise _config_error(key, f"{key} must be an int in [1, 86400]")
        if not isinstance(audience, str) or not audience:
            raise _config_error("audience", "audience must be a non-empty str")
        self.clients: dict[str, IssuerClient] = dict(clients)
        self.users = user_list
        self.key_kind = key_kind
        self.algorithm = _ALGORITHMS[key_kind]
        """``RS256`` or ``ES256``."""
        self.access_token_ttl_s = access_token_ttl_s
        self.code_ttl_s = code_ttl_s
        self.audience = audience
        self._clock = clock
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._keys: dict[str, Any] = {}
        self._signing_kid = ""
        self._key_serial = 0
        self._codes: dict[str, _Code] = {}
        self._spent_codes: dict[str, str] = {}
        """Used code → its grant id (a replay revokes the grant)."""
        self._refresh: dict[str, _Refresh] = {}
        self._jti_grant: dict[str, str] = {}
        self._revoked_grants: set[str] = set()
        self._token_requests: Counter[str] = Counter()
        self._issued: list[IssuedToken] = []
        self._secrets: list[str] = []
        self._deny = 0
        self._fail = 0
        self._fail_status = 503
        self._delay_token_s = 0.0
        self._server: Any = None
        self._url = ""
        self.rotate_key()

    # ---- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> OAuthIssuer:
        """Serve on 127.0.0.1 on a free port; returns once the server accepts connections.

        Raises:
            ConfigError: ``already_started`` when called twice; as
                :func:`~adk_actors.web.serve.start_in_thread` when the server cannot start.
        """
        from adk_actors.web.serve import start_in_thread

        if self._server is not None:
            raise ConfigError("the issuer was already started", reason="already_started")
        self._server = start_in_thread(self._app(), "127.0.0.1", 0, graceful_shutdown_s=1, max_connections=512)
        self._url = self._server.url
        return self

    def stop(self) -> None:
        """Stop serving: release delayed token requests, close the port and join the server thread."""
        self._closing.set()
        if self._server is not None:
            self._server.stop()

    @property
    def running(self) -> bool:
        """Whether the server thread is alive."""
        return self._server is not None and bool(self._server.running)

    def __enter__(self) -> OAuthIssuer:
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"OAuthIssuer(url={self._url or None!r}, clients={sorted(self.clients)!r}, "
            f"algorithm={self.algorithm!r}, running={self.running!r})"
        )

    # ---- addresses ------------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, the issuer identifier (``iss``); known once started.

        Raises:
            ConfigError: ``not_started`` before :meth:`start`.
        """
        if not self._url:
            raise ConfigError("the issuer has not been started", reason="not_started")
        return self._url

    @property
    def authorization_endpoint(self) -> str:
        return self.url + "/authorize"

    @property
    def token_endpoint(self) -> str:
        return self.url + "/token"

    @property
    def jwks_uri(self) -> str:
        return self.url + "/jwks"

    @property
    def userinfo_endpoint(self) -> str:
        return self.url + "/userinfo"

    # ---- keys -----------------------------------------------------------------------------------------------------
    def rotate_key(self) -> str:
        """Make a new signing key and publish it; the previous keys stay published (tokens they signed still
        verify) until :meth:`retire`. Returns the new key's ``kid``."""
        key: Any = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if self.key_kind == "rsa"
            else ec.generate_private_key(ec.SECP256R1())
        )
        with self._lock:
            self._key_serial += 1
            kid = f"{self.key_kind}-{self._key_serial}-{secrets.token_hex(4)}"
            self._keys[kid] = key
            self._signing_kid = kid
        return kid

    def retire(self, kid: str | None = None) -> list[str]:
        """Stop publishing ``kid``, or every key but the signing one when ``kid`` is ``None``; tokens signed by a
        retired key no longer verify. Returns the retired kids.

        Raises:
            ConfigError: ``invalid_value`` for the signing key or an unknown kid.
        """
        with self._lock:
            if kid is None:
                gone = [k for k in self._keys if k != self._signing_kid]
            elif kid == self._signing_kid or kid not in self._keys:
                raise _config_error("kid", "only a published key other than the signing key can be retired")
            else:
                gone = [kid]
            for k in gone:
                del self._keys[k]
        return gone

    @property
    def signing_kid(self) -> str:
        """The ``kid`` new tokens are signed with."""
        with self._lock:
            return self._signing_kid

    @property
    def kids(self) -> list[str]:
        """The published key ids, oldest first."""
        with self._lock:
            return list(self._keys)

    def jwks(self) -> dict[str, Any]:
        """The published key set (public halves only)."""
        with self._lock:
            keys = list(self._keys.items())
        out = []
        for kid, key in keys:
            algorithm: Any = jwt.algorithms.RSAAlgorithm if self.key_kind == "rsa" else jwt.algorithms.ECAlgorithm
            jwk = algorithm.to_jwk(key.public_key(), as_dict=True)
            out.append({**jwk, "kid": kid, "use": "sig", "alg": self.algorithm})
        return {"keys": out}

    # ---- knobs and counters ---------------------------------------------------------------------------------------
    def deny_next(self, n: int = 1) -> None:
        """The next ``n`` valid authorization requests end with ``error=access_denied`` (the user said no)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise _config_error("n", "n must be an int >= 0")
        with self._lock:
            self._deny = n

    def fail_next_token(self, n: int = 1, status: int = 503) -> None:
        """The next ``n`` token requests are answered ``status`` (``temporarily_unavailable`` for 503,
        ``server_error`` otherwise) before any other check; they still count in :attr:`token_requests`."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise _config_error("n", "n must be an int >= 0")
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            raise _config_error("status", "status must be an HTTP error status")
        with self._lock:
            self._fail, self._fail_status = n, status

    @property
    def delay_token_s(self) -> float:
        """Seconds the token endpoint waits before answering (0: none); :meth:`stop` cuts the wait short."""
        with self._lock:
            return self._delay_token_s

    @delay_token_s.setter
    def delay_token_s(self, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise _config_error("delay_token_s", "delay_token_s must be a finite number >= 0")
        with self._lock:
            self._delay_token_s = float(value)

    @property
    def token_requests(self) -> dict[str, int]:
        """Token requests received, by ``grant_type`` (``"other"`` for a missing or unknown one), failed ones
        included; a snapshot."""
        with self._lock:
            return dict(self._token_requests)

    @property
    def issued(self) -> list[IssuedToken]:
        """Every token response given, in order; a snapshot."""
        with self._lock:
            return list(self._issued)

    def secrets_issued(self) -> tuple[str, ...]:
        """Every code, access token, refresh token and id token handed out, for tests that check none leaks."""
        with self._lock:
            return tuple(self._secrets)

    # ---- the app --------------------------------------------------------------------------------------------------
    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self._metadata, methods=["GET"]),
                Route("/.well-known/oauth-authorization-server", self._metadata, methods=["GET"]),
                Route("/jwks", self._jwks, methods=["GET"]),
                Route("/authorize", self._authorize, methods=["GET"]),
                Route("/token", self._token, methods=["POST"]),
                Route("/userinfo", self._userinfo, methods=["GET"]),
            ]
        )

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.url,
                "authorization_endpoint": self.authorization_endpoint,
                "token_endpoint": self.token_endpoint,
                "jwks_uri": self.jwks_uri,
                "userinfo_endpoint": self.userinfo_endpoint,
                "response_types_supported": ["code"],
                "response_modes_supported": ["query"],
                "grant_types_supported": list(GRANTS),
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
                "id_token_signing_alg_values_supported": [self.algorithm],
                "subject_types_supported": ["public"],
                "scopes_supported": ["openid"],
                "claims_supported": ["iss", "sub", "aud", "exp", "iat", "nonce", "azp"],
                "authorization_response_iss_parameter_supported": True,
            }
        )

    async def _jwks(self, request: Request) -> Response:
        return JSONResponse(self.jwks(), headers={"Cache-Control": "max-age=0"})

    # ---- /authorize -----------------------------------------------------------------------------------------------
    async def _authorize(self, request: Request) -> Response:
        items = request.query_params.multi_items()
        params: dict[str, str] = {}
        repeated: set[str] = set()
        for name, value in items:
            if name in params:
                repeated.add(name)
            params[name] = value
        client = self.clients.get(params.get("client_id", ""))
        redirect_uri = params.get("redirect_uri", "")
        # Errors about the client or its redirect URI are shown, never redirected: the URI is not trusted.
        if client is None or "client_id" in repeated:
            return _error_page("invalid_client", "unknown client")
        if "redirect_uri" in repeated or redirect_uri not in client.redirect_uris:
            return _error_page("invalid_request", "the redirect_uri is not one registered for the client")
        state = params.get("state") if "state" not in repeated else None

        def refuse(error: str) -> Response:
            return self._redirect(redirect_uri, {"error": error, "state": state})

        if repeated or any(len(v) > _MAX_PARAM_CHARS for v in params.values()):
            return refuse("invalid_request")
        if params.get("response_type") != "code":
            return refuse("unsupported_response_type")
        if "authorization_code" not in client.grants:
            return refuse("unauthorized_client")
        if not state:
            return refuse("invalid_request")
        challenge = params.get("code_challenge", "")
        if params.get("code_challenge_method") != "S256" or not _CHALLENGE.fullmatch(challenge):
            return refuse("invalid_request")
        scopes = _scopes(params.get("scope"))
        if scopes is None:
            return refuse("invalid_scope")
        hint = params.get("login_hint")
        user = hint if hint in self.users else self.users[0]
        code = secrets.token_urlsafe(32)
        with self._lock:
            if self._deny:
                self._deny -= 1
                denied = True
            else:
                denied = False
                self._codes[code] = _Code(
                    client_id=client.client_id,
                    redirect_uri=redirect_uri,
                    challenge=challenge,
                    nonce=params.get("nonce") or None,
                    scopes=scopes,
                    sub=user,
                    expires_at=self._clock() + self.code_ttl_s,
                    grant_id=secrets.token_hex(8),
                )
                self._secrets.append(code)
        if denied:
            return refuse("access_denied")
        return self._redirect(redirect_uri, {"code": code, "state": state})

    def _redirect(self, redirect_uri: str, query: dict[str, str | None]) -> Response:
        fields = {k: v for k, v in query.items() if v}
        fields["iss"] = self.url
        glue = "&" if urlsplit(redirect_uri).query else "?"
        return RedirectResponse(redirect_uri + glue + urlencode(fields), status_code=302, headers=_NO_STORE)

    # ---- /token ---------------------------------------------------------------------------------------------------
    async def _token(self, request: Request) -> Response:
        form, form_error = await _read_form(request)
        grant = form.get("grant_type", "")
        with self._lock:
            self._token_requests[grant if grant in GRANTS else "other"] += 1
            delay = self._delay_token_s
            failing = self._fail > 0
            if failing:
                self._fail -= 1
            fail_status = self._fail_status
        if delay > 0:
            await asyncio.to_thread(self._closing.wait, delay)
        if failing:
            error = "temporarily_unavailable" if fail_status == 503 else "server_error"
            return _oauth_error(_OAuthFailure(error, fail_status))
        try:
            if form_error:
                raise _OAuthFailure("invalid_request", description=form_error)
            client = self._client_of(request, form)
            if grant not in GRANTS:
                raise _OAuthFailure("unsupported_grant_type")
            if grant not in client.grants:
                raise _OAuthFailure("unauthorized_client")
            if grant == "authorization_code":
                body = self._code_grant(client, form)
            elif grant == "refresh_token":
                body = self._refresh_grant(client, form)
            else:
                body = self._client_credentials_grant(client, form)
        except _OAuthFailure as failure:
            return _oauth_error(failure)
        return JSONResponse(body, headers=_NO_STORE)

    def _client_of(self, request: Request, form: dict[str, str]) -> IssuerClient:
        header = request.headers.get("authorization", "")
        if header:
            scheme, _, value = header.partition(" ")
            if scheme.lower() != "basic" or "client_secret" in form:
                raise _OAuthFailure("invalid_request", description="one client authentication method at a time")
            try:
                decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise _OAuthFailure("invalid_client", 401) from None
            raw_id, sep, raw_secret = decoded.partition(":")
            if not sep:
                raise _OAuthFailure("invalid_client", 401)
            client_id, secret = unquote_plus(raw_id), unquote_plus(raw_secret)
            if form.get("client_id", client_id) != client_id:
                raise _OAuthFailure("invalid_request", description="client_id differs from the authenticated one")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        client = self.clients.get(client_id)
        if client is None:
            raise _OAuthFailure("invalid_client", 401)
        if client.client_secret is None:
            if secret:
                raise _OAuthFailure("invalid_client", 401)
        elif not secrets.compare_digest(secret.encode(), client.client_secret.encode()):
            raise _OAuthFailure("invalid_client", 401)
        return client

    def _code_grant(self, client: IssuerClient, form: dict[str, str]) -> dict[str, Any]:
        code = form.get("code", "")
        verifier = form.get("code_verifier", "")
        with self._lock:
            # Any attempt spends the code: a failed exchange cannot be retried with another verifier.
            record = self._codes.pop(code, None)
            if record is None:
                grant_id = self._spent_codes.get(code)
                if grant_id is not None:  # a replay: what the first exchange issued is revoked (RFC 6749 §4.1.2)
                    self._revoked_grants.add(grant_id)
                raise _OAuthFailure("invalid_grant")
            self._spent_codes[code] = record.grant_id
        if (
            record.client_id != client.client_id
            or record.redirect_uri != form.get("redirect_uri")
            or record.expires_at <= self._clock()
            or not _VERIFIER.fullmatch(verifier)
            or not secrets.compare_digest(_s256(verifier), record.challenge)
        ):
            raise _OAuthFailure("invalid_grant")
        return self._grant_response(
            "authorization_code", client, record.sub, record.scopes, record.grant_id, form, nonce=record.nonce
        )

    def _refresh_grant(self, client: IssuerClient, form: dict[str, str]) -> dict[str, Any]:
        token = form.get("refresh_token", "")
        with self._lock:
            record = self._refresh.get(token)
            if record is None or record.client_id != client.client_id or record.grant_id in self._revoked_grants:
                raise _OAuthFailure("invalid_grant")
            scopes = record.scopes
            if "scope" in form:
                asked = _scopes(form["scope"])
                if asked is None or not set(asked) <= set(record.scopes):
                    raise _OAuthFailure("invalid_scope")
                scopes = asked
            del self._refresh[token]  # rotation: the used refresh token is dead
        return self._grant_response(
            "refresh_token", client, record.sub, scopes, record.grant_id, form, refresh_scopes=record.scopes
        )

    def _client_credentials_grant(self, client: IssuerClient, form: dict[str, str]) -> dict[str, Any]:
        scopes = _scopes(form.get("scope"))
        if scopes is None:
            raise _OAuthFailure("invalid_scope")
        return self._grant_response("client_credentials", client, client.client_id, scopes, None, form)

    def _grant_response(
        self,
        grant: str,
        client: IssuerClient,
        sub: str,
        scopes: tuple[str, ...],
        grant_id: str | None,
        form: dict[str, str],
        *,
        nonce: str | None = None,
        refresh_scopes: tuple[str, ...] | None = None,
    ) -> dict[str, Any]:
        resource = form.get("resource")
        if resource is not None:
            parts = urlsplit(resource)
            if not parts.scheme or not parts.netloc or parts.fragment:
                raise _OAuthFailure("invalid_target")
        now = int(self._clock())
        jti = secrets.token_urlsafe(16)
        access = self._sign(
            {
                "iss": self.url,
                "sub": sub,
                "aud": resource or self.audience,
                "client_id": client.client_id,
                "scope": " ".join(scopes),
                "iat": now,
                "exp": now + self.access_token_ttl_s,
                "jti": jti,
            },
            "at+jwt",
        )
        body: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.access_token_ttl_s,
            "scope": " ".join(scopes),
        }
        issued = [access]
        if grant_id is not None:
            refresh = secrets.token_urlsafe(32)
            body["refresh_token"] = refresh
            issued.append(refresh)
        if grant == "authorization_code" and "openid" in scopes:
            claims: dict[str, Any] = {
                "iss": self.url,
                "sub": sub,
                "aud": client.client_id,
                "azp": client.client_id,
                "iat": now,
                "exp": now + self.access_token_ttl_s,
            }
            if nonce:
                claims["nonce"] = nonce
            body["id_token"] = self._sign(claims, "JWT")
            issued.append(body["id_token"])
        with self._lock:
            if grant_id is not None:
                if grant_id in self._revoked_grants:  # revoked while this response was being made
                    raise _OAuthFailure("invalid_grant")
                self._refresh[body["refresh_token"]] = _Refresh(
                    client.client_id, sub, refresh_scopes or scopes, grant_id
                )
                self._jti_grant[jti] = grant_id
            self._issued.append(IssuedToken(grant, client.client_id, sub, scopes))
            self._secrets.extend(issued)
        return body

    def _sign(self, claims: dict[str, Any], typ: str) -> str:
        with self._lock:
            kid = self._signing_kid
            key = self._keys[kid]
        return jwt.encode(claims, key, algorithm=self.algorithm, headers={"kid": kid, "typ": typ})

    # ---- /userinfo ------------------------------------------------------------------------------------------------
    async def _userinfo(self, request: Request) -> Response:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return JSONResponse(
                {"error": "invalid_request"}, 401, headers={"WWW-Authenticate": 'Bearer realm="issuer"'}
            )
        try:
            sub = self._verify_access_token(token.strip())
        except jwt.PyJWTError:
            return JSONResponse(
                {"error": "invalid_token"}, 401, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}
            )
        return JSONResponse({"sub": sub}, headers=_NO_STORE)

    def _verify_access_token(self, token: str) -> str:
        header = jwt.get_unverified_header(token)
        with self._lock:
            key = self._keys.get(str(header.get("kid")))
        if key is None or header.get("typ") != "at+jwt":
            raise jwt.InvalidTokenError("unknown key or wrong type")
        claims = jwt.decode(
            token,
            key.public_key(),
            algorithms=[self.algorithm],
            issuer=self.url,
            options={"require": ["iss", "sub", "exp", "iat", "jti"], "verify_aud": False},
        )
        with self._lock:
            grant_id = self._jti_grant.get(str(claims["jti"]))
            if grant_id is not None and grant_id in self._revoked_grants:
                raise jwt.InvalidTokenError("revoked")
        return str(claims["sub"])


def _scopes(value: str | None) -> tuple[str, ...] | None:
    """The scope tokens of a ``scope`` parameter (order kept, repeats dropped); ``None`` when malformed."""
    if value is None:
        return ()
    tokens = value.split(" ")
    if not all(_SCOPE_TOKEN.fullmatch(t) for t in tokens):
        return None
    return tuple(dict.fromkeys(tokens))


async def _read_form(request: Request) -> tuple[dict[str, str], str]:
    """A token request's form (empty values dropped, RFC 6749 §3.2) and a problem description ("" when none)."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        return {}, "the body must be application/x-www-form-urlencoded"
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_FORM_BYTES:
            return {}, "the body is too large"
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=False, max_num_fields=64)
    except (UnicodeDecodeError, ValueError):
        return {}, "the body is not a form"
    form: dict[str, str] = {}
    for name, value in pairs:
        if name in form:
            return {}, "a parameter is repeated"
        if len(value) > _MAX_PARAM_CHARS:
            return {}, "a parameter is too long"
        form[name] = value
    return form, ""


def _oauth_error(failure: _OAuthFailure) -> Response:
    body = {"error": failure.error}
    if failure.description:
        body["error_description"] = failure.description
    headers = dict(_NO_STORE)
    if failure.status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="issuer"'
    return JSONResponse(body, failure.status, headers=headers)


def _error_page(error: str, description: str) -> Response:
    return JSONResponse({"error": error, "error_description": description}, 400, headers=_NO_STORE)

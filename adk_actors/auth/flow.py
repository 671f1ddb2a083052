"""Interactive OAuth 2.0 authorization code + PKCE (S256 only): the node's supervised flow manager.

::

    flows = AuthorizationFlows.start(store, providers=[AuthCodeProvider(name="calendar", ...)])
    request = flows.begin(CredentialScope(app="crm", user="u1"), "calendar")    # a CredentialRequest
    redirect_user_to(request.authorization_uri.reveal())                       # or, in a tool: return
    ...                                                                        # request_credential(request)
    answer = flows.complete(state, code)        # at the HTTPS callback: {"flow_ref", "correlation_id"}
    runner.resume(session_id, answer)           # a paused run continues: the tool is called again
    flows.client_for(scope, "calendar")         # an OAuthClient for the TokenService (refresh-token grant)

One ``permanent`` tier-2 actor per node (:class:`AuthorizationFlowActor`) holds the pending flows: the PKCE
verifier, the nonce and the state never leave it (the state only inside the authorization URI, handed to the
caller that began the flow). A flow is single use: its state is claimed atomically before the code exchange, so a
replayed, raced, expired or cancelled callback fails closed. The exchange runs on the actor's I/O threads with a
deadline; with an OIDC issuer configured the ``id_token`` is verified (signature against the issuer's JWKS, issuer,
audience = client id, lifetime, and the flow's nonce). The refresh token is stored, encrypted, in the credential
store under the flow's scope as ``oauth.<provider>.refresh``; nothing secret is returned. A crash of the actor loses
only the pending flows (their callbacks then fail with ``unknown_flow_state``); stored credentials stay.
A pause carries :meth:`CredentialRequest.public`: the flow reference, provider, scopes, expiry and a digest of the
state, never the state itself or the URI.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import requests

from adk_actors.auth.credentials import CredentialRef, CredentialScope
from adk_actors.auth.jwks import check_url
from adk_actors.auth.service import system_or_current
from adk_actors.auth.tokens import MAX_RESPONSE_BYTES, OAuthClient, oauth_error, post_form
from adk_actors.errors import AdkError, AskTimeout, AuthError, ConfigError
from adk_actors.runtime.messages import Request
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer
from adk_actors.secrets import Secret
from adk_actors.tools.suspension import state_digest

__all__ = [
    "DEFAULT_NAME",
    "AuthCodeProvider",
    "AuthorizationFlowActor",
    "AuthorizationFlows",
    "CredentialRequest",
    "pkce_challenge",
    "refresh_credential_name",
    "state_digest",
]

DEFAULT_NAME = "adk.auth_flows"
ACTOR = "adk_actors.auth.flow.AuthorizationFlowActor"
MAX_PENDING = 10_000
MAX_CODE_CHARS = 2048
MAX_STATE_CHARS = 256
_PROVIDER_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SCOPE_RE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,128}")


def pkce_challenge(verifier: str) -> str:
    """The S256 code challenge of ``verifier`` (RFC 7636: base64url of its SHA-256, unpadded)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def refresh_credential_name(provider: str) -> str:
    """The credential-store name of a user's refresh token for ``provider``."""
    return f"oauth.{provider}.refresh"


def _bad(key: str, message: str, reason: str = "invalid_value") -> ConfigError:
    return ConfigError(message, reason=reason, details={"key": key})


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthCodeProvider:
    """One authorization server and our client there (operator configuration: no secret, only references)."""

    name: str
    authorization_url: str
    token_url: str
    client_id: str
    redirect_uri: str
    """Our HTTPS callback, sent exactly (the server compares it to the registered one)."""
    allowed_scopes: tuple[str, ...]
    default_scopes: tuple[str, ...] = ()
    client_secret: CredentialRef | None = None
    """A confidential client's secret in the credential store (``None`` for a public client)."""
    resource: str = ""
    """Sent as the RFC 8707 ``resource`` parameter when set."""
    issuer: str = ""
    """OIDC: the exact ``iss``; with ``jwks_url`` the ``id_token`` is required (when ``openid`` is asked) and
    verified."""
    jwks_url: str = ""
    lifetime_s: float = 600.0
    """How long a begun flow may wait for its callback."""
    exchange_timeout_s: float = 30.0
    allow_http_loopback: bool = False
    """Accept ``http`` URLs on a loopback host (tests)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _PROVIDER_RE.fullmatch(self.name):
            raise _bad("name", "a provider name is 1-64 characters of [A-Za-z0-9_.-]")
        loop = self.allow_http_loopback is True
        for key in ("authorization_url", "token_url", "redirect_uri"):
            check_url(getattr(self, key), field=key, allow_http_loopback=loop)
        if urlsplit(self.authorization_url).query:
            raise _bad("authorization_url", "the authorization URL must not carry a query")
        if not isinstance(self.client_id, str) or not 0 < len(self.client_id) <= 256:
            raise _bad("client_id", "client_id must be a non-empty str")
        if self.client_secret is not None and not isinstance(self.client_secret, CredentialRef):
            raise _bad("client_secret", "client_secret must be a CredentialRef (the secret stays in the store)")
        for key in ("allowed_scopes", "default_scopes"):
            value = getattr(self, key)
            if not isinstance(value, tuple) or not all(isinstance(s, str) and _SCOPE_RE.fullmatch(s) for s in value):
                raise _bad(key, f"{key} must be a tuple of scope tokens")
        if not self.allowed_scopes or not set(self.default_scopes) <= set(self.allowed_scopes):
            raise _bad("default_scopes", "default_scopes must be a subset of a non-empty allowed_scopes")
        if bool(self.issuer) != bool(self.jwks_url):
            raise _bad("issuer", "set both issuer and jwks_url (OIDC) or neither")
        if self.issuer:
            check_url(self.issuer, field="issuer", allow_http_loopback=loop)
            check_url(self.jwks_url, field="jwks_url", allow_http_loopback=loop)
        for key, high in (("lifetime_s", 3600.0), ("exchange_timeout_s", 120.0)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= high:
                raise _bad(key, f"{key} must be in (0, {high:g}]")

    def scopes_for(self, asked: Iterable[str] | None) -> tuple[str, ...]:
        scopes = tuple(asked) if asked is not None else self.default_scopes
        if not scopes or not all(isinstance(s, str) for s in scopes):
            raise AuthError("no scope to ask for", reason="invalid_scope", details={"provider": self.name})
        outside = sorted(set(scopes) - set(self.allowed_scopes))
        if outside:
            raise AuthError(
                "a scope outside the provider's allowed scopes",
                reason="scope_not_allowed",
                details={"provider": self.name, "scopes": outside[:16]},
            )
        return tuple(dict.fromkeys(scopes))


@dataclass(frozen=True, slots=True, kw_only=True)
class CredentialRequest:
    """A begun flow: send the user to :attr:`authorization_uri`; a pause carries only :meth:`public`."""

    flow_ref: str
    provider: str
    scopes: tuple[str, ...]
    expires_at: float
    """Epoch seconds after which the callback is refused."""
    authorization_uri: Secret = field(repr=False)
    """The URI with the state and the PKCE challenge in it (the state is a one-time secret)."""
    correlation_id: Secret = field(repr=False)
    """The state: the callback and the resume present it."""
    pkce_method: str = "S256"

    def public(self) -> dict[str, Any]:
        """What may be shown and stored (events, pauses, status): no state, no URI."""
        return {
            "flow_ref": self.flow_ref,
            "provider": self.provider,
            "scopes": list(self.scopes),
            "expires_at": self.expires_at,
            "pkce_method": self.pkce_method,
            "state_digest": state_digest(self.correlation_id.reveal()),
        }


# ---- messages ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class FlowArgs:
    store: Any
    providers: tuple[AuthCodeProvider, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginFlow(Request[CredentialRequest]):
    scope: CredentialScope
    provider: str
    scopes: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompleteFlow(Request[dict[str, str]]):
    state: str = field(repr=False)
    code: str = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelFlow(Request[bool]):
    state: str = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizationUri(Request[Secret]):
    flow_ref: str
    scope: CredentialScope


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientFor(Request["OAuthClient | None"]):
    scope: CredentialScope
    provider: str


@dataclass(slots=True)
class _Flow:
    flow_ref: str
    scope: CredentialScope
    provider: AuthCodeProvider
    scopes: tuple[str, ...]
    verifier: str
    nonce: str
    uri: Secret
    expires_at: float
    status: str = "pending"  # pending | exchanging


def _refuse(reason: str, message: str, **details: Any) -> AuthError:
    return AuthError(message, reason=reason, details=details)


def _exchange(_token: Any, store: Any, flow: _Flow, code: str, session: requests.Session) -> str:
    """The code exchange (an I/O thread): returns the stored credential's name."""
    provider = flow.provider
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": provider.redirect_uri,
        "client_id": provider.client_id,
        "code_verifier": flow.verifier,
    }
    if provider.client_secret is not None:
        form["client_secret"] = store.get(provider.client_secret).reveal()
    if provider.resource:
        form["resource"] = provider.resource
    status, body = post_form(session, provider.token_url, form, provider.exchange_timeout_s)
    if status == 0:
        raise _refuse("token_request_failed", "the token endpoint did not answer", provider=provider.name)
    if status != 200:
        raise _refuse(
            "token_endpoint_refused",
            "the token endpoint refused the code",
            provider=provider.name,
            status=status,
            oauth_error=oauth_error(body),
        )
    try:
        if len(body) > MAX_RESPONSE_BYTES:
            raise ValueError("too large")
        data = json.loads(body)
        refresh = data["refresh_token"]
        if not isinstance(refresh, str) or not refresh or str(data.get("token_type", "")).lower() != "bearer":
            raise ValueError("refresh_token")
    except (ValueError, KeyError, TypeError):
        raise _refuse(
            "invalid_token_response", "the token response lacks a bearer refresh token", provider=provider.name
        ) from None
    if provider.issuer and "openid" in flow.scopes:
        _check_id_token(provider, data.get("id_token"), flow.nonce)
    name = refresh_credential_name(provider.name)
    store.put(flow.scope, name, refresh)
    return name


def _check_id_token(provider: AuthCodeProvider, id_token: Any, nonce: str) -> None:
    from adk_actors.auth.jwt_policy import JwtPolicy

    if not isinstance(id_token, str) or not id_token:
        raise _refuse("invalid_id_token", "the token response has no id_token", provider=provider.name)
    policy = JwtPolicy(
        issuer=provider.issuer,
        audience=provider.client_id,
        jwks_url=provider.jwks_url,
        token_types=("JWT",),
        max_lifetime_s=86400.0,
        allow_http_loopback=provider.allow_http_loopback,
    )
    try:
        claims = policy.verify(id_token)
    except AuthError as err:
        raise _refuse(
            "invalid_id_token", "the id_token was refused", provider=provider.name, cause=err.reason
        ) from None
    if not secrets.compare_digest(str(claims.claims.get("nonce", "")), nonce):
        raise _refuse("nonce_mismatch", "the id_token's nonce is not the flow's", provider=provider.name)


class AuthorizationFlowActor(GenServer):
    """Pending authorization-code flows of the node (see the module docstring)."""

    def init(self, args: Any) -> Any:
        if not isinstance(args, FlowArgs):
            raise ConfigError("the authorization flow manager needs FlowArgs", reason="invalid_request")
        self.store = args.store
        self.providers = {p.name: p for p in args.providers}
        self.flows: dict[str, _Flow] = {}  # by state digest
        self.by_ref: dict[str, str] = {}
        self.session = requests.Session()
        self.session.trust_env = False
        self.completed = self.failed = 0
        return None

    def _provider(self, name: str) -> AuthCodeProvider:
        provider = self.providers.get(name) if isinstance(name, str) else None
        if provider is None:
            raise _refuse("unknown_provider", "no such authorization provider", provider=str(name)[:64])
        return provider

    def _expire(self) -> None:
        now = time.time()
        for digest in [d for d, f in self.flows.items() if f.expires_at <= now and f.status == "pending"]:
            self._drop(digest)

    def _drop(self, digest: str) -> _Flow | None:
        flow = self.flows.pop(digest, None)
        if flow is not None:
            self.by_ref.pop(flow.flow_ref, None)
        return flow

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, BeginFlow):
            return self._begin(request)
        if isinstance(request, CompleteFlow):
            return self._complete(request, ctx)
        if isinstance(request, CancelFlow):
            flow = self.flows.get(state_digest(request.state)) if isinstance(request.state, str) else None
            if flow is None or flow.status != "pending":
                return False
            self._drop(state_digest(request.state))
            return True
        if isinstance(request, AuthorizationUri):
            digest = self.by_ref.get(request.flow_ref)
            flow = self.flows.get(digest) if digest else None
            if flow is None or flow.scope != request.scope or flow.status != "pending":
                raise _refuse("unknown_flow", "no pending flow with that reference for this scope")
            return flow.uri
        if isinstance(request, ClientFor):
            return self._client_for(request, ctx)
        return super().handle_call(request, ctx)

    def _begin(self, request: BeginFlow) -> CredentialRequest:
        if not isinstance(request.scope, CredentialScope):
            raise _refuse("invalid_request", "begin needs a CredentialScope")
        provider = self._provider(request.provider)
        scopes = provider.scopes_for(request.scopes)
        self._expire()
        if len(self.flows) >= MAX_PENDING:
            raise _refuse("too_many_flows", "too many authorization flows are pending", limit=MAX_PENDING)
        state, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(64)
        nonce = secrets.token_urlsafe(24) if "openid" in scopes else ""
        query = {
            "response_type": "code",
            "client_id": provider.client_id,
            "redirect_uri": provider.redirect_uri,
            "scope": " ".join(scopes),
            "state": state,
            "code_challenge": pkce_challenge(verifier),
            "code_challenge_method": "S256",
        }
        if nonce:
            query["nonce"] = nonce
        if provider.resource:
            query["resource"] = provider.resource
        uri = Secret(provider.authorization_url + "?" + urlencode(query))
        flow = _Flow(
            flow_ref="flow_" + secrets.token_hex(16),
            scope=request.scope,
            provider=provider,
            scopes=scopes,
            verifier=verifier,
            nonce=nonce,
            uri=uri,
            expires_at=time.time() + provider.lifetime_s,
        )
        digest = state_digest(state)
        self.flows[digest] = flow
        self.by_ref[flow.flow_ref] = digest
        return CredentialRequest(
            flow_ref=flow.flow_ref,
            provider=provider.name,
            scopes=scopes,
            expires_at=flow.expires_at,
            authorization_uri=uri,
            correlation_id=Secret(state),
        )

    def _complete(self, request: CompleteFlow, ctx: CallCtx) -> Any:
        state, code = request.state, request.code
        if not isinstance(state, str) or not 0 < len(state) <= MAX_STATE_CHARS:
            raise _refuse("unknown_flow_state", "no pending flow for that state")
        if not isinstance(code, str) or not 0 < len(code) <= MAX_CODE_CHARS or not code.isprintable():
            raise _refuse("invalid_authorization_code", "the authorization code is empty, too long or not printable")
        digest = state_digest(state)
        flow = self.flows.get(digest)
        if flow is None:
            raise _refuse("unknown_flow_state", "no pending flow for that state")
        if flow.status != "pending":
            raise _refuse("flow_already_used", "the flow's callback was already received")
        if flow.expires_at <= time.time():
            self._drop(digest)
            raise _refuse("flow_expired", "the flow expired before its callback")
        flow.status = "exchanging"  # claimed: a second callback with this state fails from now on

        def done(value: Any, error: AdkError | None) -> None:
            self._drop(digest)
            if isinstance(error, AskTimeout):
                error = _refuse("token_timeout", "the code exchange passed its deadline", provider=flow.provider.name)
            if error is not None:
                self.failed += 1
                self.fail(ctx, error)
                return
            self.completed += 1
            self.reply(ctx, {"flow_ref": flow.flow_ref, "correlation_id": state})

        deadline = min(ctx.deadline, time.monotonic() + flow.provider.exchange_timeout_s)
        self.io_call(_exchange, (self.store, flow, code, self.session), deadline, done)
        return DEFERRED

    def _client_for(self, request: ClientFor, ctx: CallCtx) -> Any:
        provider = self._provider(request.provider)
        name = refresh_credential_name(provider.name)
        scope = request.scope

        def lookup(_token: Any, store: Any) -> bool:
            return name in store.names(scope)

        def done(value: Any, error: AdkError | None) -> None:
            if error is not None:
                self.fail(ctx, error)
                return
            client = None
            if value:
                client = OAuthClient(
                    token_url=provider.token_url,
                    client_id=provider.client_id,
                    client_secret=provider.client_secret,
                    refresh_token=CredentialRef(scope.app, scope.user, name),
                    scopes=provider.default_scopes or provider.allowed_scopes,
                    audience=provider.resource,
                    allow_http_loopback=provider.allow_http_loopback,
                )
            self.reply(ctx, client)

        self.io_call(lookup, (self.store,), ctx.deadline, done)
        return DEFERRED

    def status(self) -> dict[str, Any]:
        return {
            **super().status(),
            "providers": sorted(self.providers),
            "pending": len(self.flows),
            "completed": self.completed,
            "failed": self.failed,
        }

    def terminate(self, reason: str) -> None:
        self.session.close()
        super().terminate(reason)


@dataclass(frozen=True, slots=True)
class AuthorizationFlows:
    """A handle on the node's flow manager (picklable: only its registered name)."""

    name: str = DEFAULT_NAME

    @classmethod
    def start(
        cls,
        store: Any,
        providers: Iterable[AuthCodeProvider],
        *,
        system: Any = None,
        name: str = DEFAULT_NAME,
    ) -> AuthorizationFlows:
        """Start the manager (``permanent``) with the operator's provider profiles.

        Raises:
            ConfigError: a provider is not an :class:`AuthCodeProvider`, or two share a name.
        """
        listed = tuple(providers)
        if not listed or not all(isinstance(p, AuthCodeProvider) for p in listed):
            raise _bad("providers", "providers must be a non-empty list of AuthCodeProvider")
        if len({p.name for p in listed}) != len(listed):
            raise _bad("providers", "two providers share a name", reason="duplicate_provider")
        handle = system_or_current(system)
        handle.spawn(ACTOR, FlowArgs(store=store, providers=listed), id=name, name=name, restart="permanent")
        return cls(name)

    def begin(
        self, scope: CredentialScope, provider: str, scopes: Iterable[str] | None = None, *, system: Any = None
    ) -> CredentialRequest:
        """Begin a flow for ``scope`` (the app and user the credential will belong to).

        Raises:
            AuthError: ``unknown_provider``, ``invalid_scope``, ``scope_not_allowed``, ``too_many_flows``.
        """
        asked = tuple(scopes) if scopes is not None else None
        return system_or_current(system).ask(self.name, BeginFlow(scope=scope, provider=provider, scopes=asked))

    def authorization_uri(self, flow_ref: str, scope: CredentialScope, *, system: Any = None) -> Secret:
        """The authorization URI of a pending flow of ``scope`` (for the application that shows the pause).

        Raises:
            AuthError: ``unknown_flow`` (no pending flow of that reference for that scope).
        """
        return system_or_current(system).ask(self.name, AuthorizationUri(flow_ref=flow_ref, scope=scope))

    def complete(self, state: str, code: str, *, system: Any = None, timeout: float = 35.0) -> dict[str, str]:
        """The callback: exchange ``code`` for the flow named by ``state``; the answer resumes the paused run.

        Returns:
            ``{"flow_ref": <flow ref>, "correlation_id": <state>}``.

        Raises:
            AuthError: ``unknown_flow_state``, ``flow_already_used``, ``flow_expired``,
                ``invalid_authorization_code``, ``token_endpoint_refused``, ``token_request_failed``,
                ``invalid_token_response``, ``invalid_id_token``, ``nonce_mismatch``, ``token_timeout``.
        """
        return system_or_current(system).ask(self.name, CompleteFlow(state=state, code=code), timeout)

    def cancel(self, state: str, *, system: Any = None) -> bool:
        """Abandon a pending flow (the browser gave up); ``False`` when none was pending."""
        return system_or_current(system).ask(self.name, CancelFlow(state=state))

    def client_for(self, scope: CredentialScope, provider: str, *, system: Any = None) -> OAuthClient | None:
        """The refresh-token client of ``scope`` at ``provider`` once a flow completed, else ``None``."""
        result: OAuthClient | None = system_or_current(system).ask(self.name, ClientFor(scope=scope, provider=provider))
        return result

    def stop(self, *, system: Any = None) -> None:
        handle = system_or_current(system)
        handle.stop_inner(handle.resolve(self.name))

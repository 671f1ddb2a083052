"""The auth broker: which credential an operation's request carries, fetched just before the request is sent.

::

    broker = AuthBroker({
        "api_key": StoredCredential(store, "petstore-key"),             # the caller's scope (app, user)
        "petstore_auth": ClientCredentials(OAuthClient(...)),           # the node's token service
        "calendar_auth": UserAuthorization(flows, "calendar"),          # the user signs in: a credential pause
    })
    tools = openapi_toolset(doc, allowed_hosts=[...], auth=broker)

Sources are keyed by the document's security scheme names. For one operation the broker takes the first
alternative of its ``security`` list whose every scheme has a source (an empty alternative means anonymous access
is allowed); when none qualifies the call fails with ``no_credential_for_operation``. The credential goes where the
scheme says: an ``apiKey`` in its header, query parameter or cookie; ``http`` ``bearer``, ``oauth2`` and
``openIdConnect`` as ``Authorization: Bearer``. ``http`` ``basic``/``digest`` and ``mutualTLS`` are refused when
the toolset is built.

A source answers with a :class:`~adk_actors.secrets.Secret`, or with a dict that the tool returns instead of
sending the request (a source that must first ask for a credential answers with a pause this way). Secrets are
revealed only by the transport, into the request: never into a result, an error or a log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from adk_actors.auth import AuthorizationFlows, TokenService
from adk_actors.auth.credentials import CredentialRef, CredentialScope
from adk_actors.auth.tokens import OAuthClient
from adk_actors.errors import AdkError, ConfigError, ToolError, ValidationError
from adk_actors.openapi.compile import Operation, SecurityScheme
from adk_actors.openapi.transport import check_cookie_value, check_header_value, no_credential
from adk_actors.secrets import Secret
from adk_actors.tools.suspension import request_credential

__all__ = [
    "AuthBroker",
    "ClientCredentials",
    "CredentialSource",
    "Injection",
    "StoredCredential",
    "UserAuthorization",
]

BEARER_TYPES = frozenset({"oauth2", "openIdConnect"})
_API_KEY_FORBIDDEN = frozenset(
    {"cookie", "host", "content-length", "transfer-encoding", "connection", "te", "trailer", "upgrade", "expect"}
)


@runtime_checkable
class CredentialSource(Protocol):
    """Where one security scheme's credential comes from."""

    def credential(self, scheme: SecurityScheme, context: Any) -> Secret | dict[str, Any]:
        """The credential for one request (a :class:`Secret`), or a dict the tool returns without sending it.

        ``context`` is the call's :class:`~adk_actors.tools.ToolContext` (app, user, session), or ``None``.
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Injection:
    """What the broker adds to one request (values stay :class:`Secret` until the transport writes them)."""

    headers: tuple[tuple[str, Secret], ...] = ()
    query: tuple[tuple[str, Secret], ...] = ()
    cookies: tuple[tuple[str, Secret], ...] = ()
    schemes: tuple[str, ...] = ()
    """The schemes used (their names, no secret)."""


def _supported(scheme: SecurityScheme) -> str | None:
    """Why ``scheme`` cannot be served (``None``: it can)."""
    if scheme.type == "apiKey":
        if scheme.location not in ("header", "query", "cookie") or not scheme.parameter_name:
            return "api_key_without_location"
        if scheme.location == "header" and (
            scheme.parameter_name.lower() in _API_KEY_FORBIDDEN or scheme.parameter_name.lower().startswith("proxy-")
        ):
            return "api_key_header_not_allowed"
        if scheme.location == "cookie" and not check_cookie_value(scheme.parameter_name):
            return "api_key_cookie_name"
        return None
    if scheme.type == "http":
        return None if (scheme.scheme or "").lower() == "bearer" else "http_" + (scheme.scheme or "unknown").lower()
    if scheme.type in BEARER_TYPES:
        return None
    return scheme.type


class AuthBroker:
    """Credential sources by security scheme name (see the module docstring).

    Args:
        sources: ``{scheme name: CredentialSource}``.

    Raises:
        ConfigError: ``invalid_value`` (not a mapping of names to sources).
    """

    def __init__(self, sources: Mapping[str, CredentialSource], *, schemes: Iterable[SecurityScheme] = ()) -> None:
        if not isinstance(sources, Mapping):
            raise ConfigError("sources is a mapping", reason="invalid_value", details={"key": "sources"})
        for name, source in sources.items():
            if not isinstance(name, str) or not isinstance(source, CredentialSource):
                raise ConfigError(
                    "each source is a CredentialSource under a scheme name",
                    reason="invalid_value",
                    details={"key": "sources", "scheme": str(name)[:128]},
                )
        self.sources: dict[str, CredentialSource] = dict(sources)
        self.schemes: dict[str, SecurityScheme] = {s.name: s for s in schemes}

    def __repr__(self) -> str:
        return f"AuthBroker(schemes={sorted(self.sources)!r})"

    def bind(self, schemes: Iterable[SecurityScheme]) -> AuthBroker:
        """A broker for a document's declared ``schemes`` (what the toolset carries).

        Raises:
            ConfigError: ``unknown_security_scheme`` (a source for a scheme the document does not declare) or
                ``unsupported_security_scheme`` (a source for ``http`` basic/digest, ``mutualTLS`` ...).
        """
        declared = {s.name: s for s in schemes}
        unknown = sorted(set(self.sources) - set(declared))
        if unknown:
            raise ConfigError(
                "the auth broker has sources for schemes the document does not declare",
                reason="unknown_security_scheme",
                details={"schemes": unknown[:16], "declared": sorted(declared)[:32]},
            )
        for name in sorted(self.sources):
            why = _supported(declared[name])
            if why is not None:
                raise ConfigError(
                    "this security scheme is not supported",
                    reason="unsupported_security_scheme",
                    details={"scheme": name, "type": declared[name].type, "rule": why},
                )
        return AuthBroker(self.sources, schemes=declared.values())

    def authorize(self, operation: Operation, context: Any = None) -> Injection | dict[str, Any]:
        """The credentials for one request of ``operation``, or the dict a source answered instead.

        Raises:
            ToolError: ``no_credential_for_operation`` (no alternative of the operation's security has a source
                for each of its schemes), ``auth_broker_not_bound`` (sources, but :meth:`bind` was not called),
                ``invalid_credential`` (a value that cannot be sent), or what a source
                raises (``credential_missing``, ``credential_unavailable``).
        """
        if not operation.security:
            return Injection()
        if self.sources and not self.schemes:
            raise ToolError(
                "the auth broker is not bound to the document's security schemes (AuthBroker.bind)",
                reason="auth_broker_not_bound",
                details={"operation": operation.name},
            )
        chosen = next(
            (alt for alt in operation.security if all(s in self.sources and s in self.schemes for s in alt.schemes)),
            None,
        )
        if chosen is None:
            raise no_credential(operation, "no credential source serves this operation's security")
        headers: list[tuple[str, Secret]] = []
        query: list[tuple[str, Secret]] = []
        cookies: list[tuple[str, Secret]] = []
        for name in chosen.schemes:
            scheme = self.schemes[name]
            answer = self.sources[name].credential(scheme, context)
            if isinstance(answer, dict):
                return answer
            if not isinstance(answer, Secret):
                raise ToolError(
                    "a credential source returned neither a Secret nor a dict",
                    reason="invalid_credential",
                    details={"operation": operation.name, "scheme": name},
                )
            if scheme.type == "apiKey":
                target = {"header": headers, "query": query, "cookie": cookies}[str(scheme.location)]
                value = answer
            else:
                target, value = headers, Secret("Bearer " + answer.reveal())
            key = str(scheme.parameter_name) if scheme.type == "apiKey" else "Authorization"
            if target is cookies:
                bad = not check_cookie_value(value.reveal())
            else:  # a query value is percent-encoded whole; a header value must be printable ASCII
                bad = target is headers and not check_header_value(value.reveal())
            if bad or any(k.lower() == key.lower() for k, _ in target):
                raise ToolError(
                    "the credential cannot be sent in this scheme's place",
                    reason="invalid_credential",
                    details={"operation": operation.name, "scheme": name},
                )
            target.append((key, value))
        return Injection(
            headers=tuple(headers), query=tuple(query), cookies=tuple(cookies), schemes=tuple(chosen.schemes)
        )


def _scope_of(context: Any) -> CredentialScope | None:
    app, user = getattr(context, "app_name", ""), getattr(context, "user_id", "")
    if not isinstance(app, str) or not app:
        return None
    try:
        return CredentialScope(app=app, user=user if isinstance(user, str) else "")
    except ValidationError:
        return None


@dataclass(frozen=True, slots=True)
class StoredCredential:
    """A credential from the credential store, read when the request is made.

    Args:
        store: A credential store (``SqlCredentialStore`` pickles as its URL; each process reads the keys itself).
        name: The credential's name in the store.
        scope: Whose credential; ``None`` means the calling user's, ``CredentialScope(app, user)`` of the tool
            context (calls without an app, such as a direct ``prompt``, then have none).
    """

    store: Any
    name: str
    scope: CredentialScope | None = dataclasses.field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if not callable(getattr(self.store, "get", None)):
            raise ConfigError("store must be a credential store", reason="invalid_value", details={"key": "store"})
        try:
            CredentialScope(app=self.name)  # credential names follow the same rules as scope names
        except ValidationError:
            raise ConfigError(
                "name must be 1-128 characters of [A-Za-z0-9_.:@-]", reason="invalid_value", details={"key": "name"}
            ) from None
        if self.scope is not None and not isinstance(self.scope, CredentialScope):
            raise ConfigError("scope must be a CredentialScope", reason="invalid_value", details={"key": "scope"})

    def credential(self, scheme: SecurityScheme, context: Any) -> Secret:
        """The stored secret.

        Raises:
            ToolError: ``credential_missing`` (no scope, or nothing stored under the name) or
                ``credential_unavailable`` (the store failed or cannot decrypt it; ``details["cause"]``).
        """
        details = {"scheme": scheme.name, "name": self.name}
        scope = self.scope if self.scope is not None else _scope_of(context)
        if scope is None:
            raise ToolError(
                "no caller scope (app and user) to look the credential up in",
                reason="credential_missing",
                details=details,
            )
        try:
            secret = self.store.get(CredentialRef(scope.app, scope.user, self.name))
        except AdkError as exc:
            if exc.reason == "credential_not_found":
                raise ToolError("the credential is not stored", reason="credential_missing", details=details) from None
            raise ToolError(
                "the credential store failed", reason="credential_unavailable", details={**details, "cause": exc.reason}
            ) from None
        if not isinstance(secret, Secret):
            raise ToolError("the store returned no Secret", reason="invalid_credential", details=details)
        return secret


def _token_secret(token: Any, scheme: SecurityScheme) -> Secret:
    """The access token's :class:`Secret` (an :class:`~adk_actors.auth.AccessToken` from a token source)."""
    secret = getattr(token, "token", None)
    if not isinstance(secret, Secret):
        raise ToolError(
            "the token source returned no token", reason="invalid_credential", details={"scheme": scheme.name}
        )
    return secret


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """An OAuth 2.0 access token for ``client`` (client credentials or refresh token grant).

    Args:
        client: The OAuth client (its secret and refresh token are references into the credential store).
        tokens: Anything with ``access_token(client) -> AccessToken``: a ``TokenManager`` (in this process only),
            or ``None`` for the node's token service (``adk_actors.auth.TokenService()``), which a tool in a worker
            process reaches too.
    """

    client: OAuthClient
    tokens: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.client, OAuthClient):
            raise ConfigError("client must be an OAuthClient", reason="invalid_value", details={"key": "client"})
        if self.tokens is not None and not callable(getattr(self.tokens, "access_token", None)):
            raise ConfigError(
                "tokens must have access_token(client)", reason="invalid_value", details={"key": "tokens"}
            )

    def credential(self, scheme: SecurityScheme, context: Any) -> Secret:
        """The current access token.

        Raises:
            ToolError: ``credential_unavailable`` (``details["cause"]`` is the token error's reason).
        """
        tokens = self.tokens if self.tokens is not None else TokenService()
        try:
            token = tokens.access_token(self.client)
        except AdkError as exc:
            raise ToolError(
                "no access token could be obtained",
                reason="credential_unavailable",
                details={"scheme": scheme.name, "cause": exc.reason},
            ) from None
        return _token_secret(token, scheme)


@dataclass(frozen=True, slots=True)
class UserAuthorization:
    """The calling user's own OAuth 2.0 token, from an authorization-code + PKCE sign-in (docs/AUTH.md).

    Until the user has signed in with ``provider`` (``flows.client_for`` finds no refresh token for the caller's
    scope), the call begins a flow and the tool returns :func:`~adk_actors.tools.request_credential` instead of
    sending the request: under a Runner the run pauses with reason ``credential``, and after the resume the call is
    made again with the user's token. A refresh token the server no longer honours (``invalid_grant``: revoked or
    expired) asks the user again the same way.

    Args:
        flows: The node's :class:`~adk_actors.auth.AuthorizationFlows` handle.
        provider: The provider profile's name.
        scopes: Scopes to ask for (default: the provider's default scopes).
        tokens: The token source (default: the node's :class:`~adk_actors.auth.TokenService`).
    """

    flows: AuthorizationFlows
    provider: str
    scopes: tuple[str, ...] | None = None
    tokens: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.flows, AuthorizationFlows):
            raise ConfigError("flows must be AuthorizationFlows", reason="invalid_value", details={"key": "flows"})
        if not isinstance(self.provider, str) or not self.provider:
            raise ConfigError("provider must be a name", reason="invalid_value", details={"key": "provider"})

    def credential(self, scheme: SecurityScheme, context: Any) -> Secret | dict[str, Any]:
        """The user's access token, or the credential request that pauses the run.

        Raises:
            ToolError: ``credential_missing`` (no caller scope: only a Runner call has a user),
                ``credential_unavailable`` (``details["cause"]``: the flow manager's or token service's reason).
        """
        scope = _scope_of(context)
        if scope is None or not scope.user:
            raise ToolError(
                "a user's sign-in needs the caller's app and user",
                reason="credential_missing",
                details={"scheme": scheme.name},
            )
        try:
            client = self.flows.client_for(scope, self.provider)
            if client is not None:
                tokens = self.tokens if self.tokens is not None else TokenService()
                try:
                    token = tokens.access_token(client)
                except AdkError as exc:
                    if exc.reason != "token_endpoint_refused" or exc.details.get("oauth_error") != "invalid_grant":
                        raise
                    tokens.revoke(client)
                else:
                    return _token_secret(token, scheme)
            return request_credential(self.flows.begin(scope, self.provider, self.scopes))
        except ToolError:
            raise
        except AdkError as exc:
            raise ToolError(
                "the user's credential could not be obtained",
                reason="credential_unavailable",
                details={"scheme": scheme.name, "cause": exc.reason},
            ) from None

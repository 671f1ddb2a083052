"""Authentication (docs/AUTH.md): verify bearer JWTs from one issuer (:class:`JwtPolicy`) against its JWKS
(:class:`JwksCache`) and guard an ASGI edge with them (:func:`bearer_claims`, :class:`JwtGuard`); the encrypted
credential store (:mod:`~adk_actors.auth.credentials`), the OAuth 2.0 token manager (:mod:`~adk_actors.auth.tokens`)
and the node's token actor (:mod:`~adk_actors.auth.service`), and the authorization-code + PKCE flow manager behind
credential pauses (:mod:`~adk_actors.auth.flow`)."""

from adk_actors.auth.credentials import (
    CredentialKeys,
    CredentialRef,
    CredentialScope,
    InMemoryCredentialStore,
    SqlCredentialStore,
)
from adk_actors.auth.flow import AuthCodeProvider, AuthorizationFlows, CredentialRequest
from adk_actors.auth.jwks import JwksCache, SigningKey
from adk_actors.auth.jwt_policy import (
    ASYMMETRIC_ALGORITHMS,
    CLAIMS_STATE_KEY,
    Claims,
    JwtGuard,
    JwtPolicy,
    bearer_claims,
    guard_response,
)
from adk_actors.auth.service import TokenService
from adk_actors.auth.tokens import AccessToken, OAuthClient, TokenManager

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "CLAIMS_STATE_KEY",
    "AccessToken",
    "AuthCodeProvider",
    "AuthorizationFlows",
    "Claims",
    "CredentialKeys",
    "CredentialRef",
    "CredentialRequest",
    "CredentialScope",
    "InMemoryCredentialStore",
    "JwksCache",
    "JwtGuard",
    "JwtPolicy",
    "OAuthClient",
    "SigningKey",
    "SqlCredentialStore",
    "TokenManager",
    "TokenService",
    "bearer_claims",
    "guard_response",
]

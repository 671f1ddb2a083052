"""The node's token service: one supervised actor that fetches and caches OAuth 2.0 access tokens for every process.

::

    tokens = TokenService.start(SqlCredentialStore("sqlite:///creds.db"))     # once per node
    tokens.access_token(client).reveal()      # from the application, a tool worker or another actor's process

:class:`TokenService` is a small picklable handle (the actor's registered name): a tool running in a worker process
or an actor elsewhere in the node asks the same actor, so single flight holds node-wide — N concurrent callers
for one client (token URL, client id, scopes, audience) cause one token request. The actor keeps tokens only in
memory and runs each token request on its I/O threads (its mailbox never blocks). It is a ``permanent`` tier-2
child: a crash restarts it with an empty cache, and the next caller fetches a new token; the credential store
(client secrets, refresh tokens) is untouched by a crash, and a rotated refresh token is stored before the access
token is released (:class:`~adk_actors.auth.tokens.TokenManager`). Waiters per client and clients cached are
bounded. The store pickles as its URL: the actor's process reads the encryption keys from its own environment.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from adk_actors.auth.tokens import AccessToken, OAuthClient, TokenManager
from adk_actors.errors import AdkError, AskTimeout, AuthError, ConfigError
from adk_actors.runtime.messages import Request
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["DEFAULT_NAME", "GetAccessToken", "RevokeToken", "TokenService", "TokenServiceActor"]

DEFAULT_NAME = "adk.tokens"
ACTOR = "adk_actors.auth.service.TokenServiceActor"
MAX_CLIENTS = 4096
MAX_WAITERS = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceArgs:
    store: Any
    skew_s: float = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GetAccessToken(Request[AccessToken]):
    """Answered with an :class:`AccessToken` for ``client`` (cached, or fetched once for all waiters)."""

    client: OAuthClient
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RevokeToken(Request[bool]):
    """Forget ``client``'s cached token (call it before deleting or revoking the credential)."""

    client: OAuthClient


@dataclass(slots=True)
class _Flight:
    waiters: list[CallCtx] = field(default_factory=list)


def _fetch(_token: Any, manager: TokenManager, client: OAuthClient, timeout: float) -> AccessToken:
    return manager.access_token(client, timeout=timeout)


class TokenServiceActor(GenServer):
    """Holds the node's access-token cache; one token request per client at a time (single flight)."""

    def init(self, args: Any) -> Any:
        if not isinstance(args, ServiceArgs):
            raise ConfigError("the token service needs ServiceArgs", reason="invalid_request")
        self.manager = TokenManager(args.store, skew_s=args.skew_s)
        self.flights: dict[tuple[str, str, tuple[str, ...], str], _Flight] = {}
        self.cached: dict[tuple[str, str, tuple[str, ...], str], AccessToken] = {}
        self.fetches = 0
        return None

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, GetAccessToken):
            return self._get(request, ctx)
        if isinstance(request, RevokeToken):
            key = request.client.cache_key
            self.cached.pop(key, None)
            self.manager.revoke(request.client)
            return True
        return super().handle_call(request, ctx)

    def _get(self, request: GetAccessToken, ctx: CallCtx) -> Any:
        client, key = request.client, request.client.cache_key
        token = self.cached.get(key)
        if token is not None and token.expires_at - self.manager.skew_s > self.manager.clock():
            return token
        flight = self.flights.get(key)
        if flight is not None:
            if len(flight.waiters) >= MAX_WAITERS:
                raise AuthError("too many callers wait for this token", reason="token_service_overloaded")
            flight.waiters.append(ctx)
            return DEFERRED
        if len(self.cached) >= MAX_CLIENTS:
            self.cached.pop(next(iter(self.cached)))
        flight = self.flights[key] = _Flight([ctx])
        remaining = max(0.001, ctx.deadline - time.monotonic())
        limit = client.timeout_s * client.max_attempts if request.timeout_s is None else request.timeout_s
        limit = min(limit, remaining)
        self.fetches += 1

        def done(value: Any, error: AdkError | None) -> None:
            self.flights.pop(key, None)
            if isinstance(error, AskTimeout):
                error = AuthError("the token request passed its deadline", reason="token_timeout")
            if error is None:
                self.cached[key] = value
            for waiter in flight.waiters:
                if error is None:
                    self.reply(waiter, value)
                else:
                    self.fail(waiter, error)

        self.io_call(_fetch, (self.manager, client, limit), time.monotonic() + limit + 0.5, done)
        return DEFERRED

    def status(self) -> dict[str, Any]:
        return {
            **super().status(),
            "clients_cached": len(self.cached),
            "in_flight": len(self.flights),
            "fetches": self.fetches,
        }


@dataclass(frozen=True, slots=True)
class TokenService:
    """A handle on the node's token actor (picklable: it is only the actor's registered name)."""

    name: str = DEFAULT_NAME

    @classmethod
    def start(cls, store: Any, *, system: Any = None, name: str = DEFAULT_NAME, skew_s: float = 60.0) -> TokenService:
        """Start the token actor (``permanent``: restarted on a crash) under ``name``.

        Raises:
            AdkError: ``already_started`` when a token service of that name runs.
        """
        handle = system_or_current(system)
        handle.spawn(ACTOR, ServiceArgs(store=store, skew_s=float(skew_s)), id=name, name=name, restart="permanent")
        return cls(name)

    def access_token(self, client: OAuthClient, *, timeout: float | None = None, system: Any = None) -> AccessToken:
        """A valid access token for ``client`` from the node's cache, or fetched once for all waiting callers.

        Raises:
            AuthError: ``token_request_failed``, ``token_endpoint_refused``, ``invalid_token_response``,
                ``token_timeout``, ``token_service_overloaded``.
            StorageError: the client's secret or refresh token is not in the store.
        """
        if not isinstance(client, OAuthClient):
            raise ConfigError("access_token needs an OAuthClient", reason="invalid_value", details={"key": "client"})
        limit = client.timeout_s * client.max_attempts if timeout is None else float(timeout)
        return system_or_current(system).ask(self.name, GetAccessToken(client=client, timeout_s=limit), limit + 1.0)

    def revoke(self, client: OAuthClient, *, system: Any = None) -> None:
        """Forget the cached token of ``client`` node-wide."""
        system_or_current(system).ask(self.name, RevokeToken(client=client))

    def stop(self, *, system: Any = None) -> None:
        """Stop the token actor (cached tokens are dropped; stored credentials stay)."""
        handle = system_or_current(system)
        handle.stop_inner(handle.resolve(self.name))


def system_or_current(system: Any) -> Any:
    """``system``, or this process's current system (inside a node process: attached by ``$ADK_SYSTEM_PORT``)."""
    if system is not None:
        return system
    from adk_actors.runtime.system import current_system

    return current_system()

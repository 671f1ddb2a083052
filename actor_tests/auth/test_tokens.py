"""The token manager against a real OAuth 2.0 token endpoint on 127.0.0.1: client credentials and refresh grants,
single flight under concurrency, expiry skew, bounded retries, OAuth refusals, rotated refresh tokens persisted, and
no token or secret in any error."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest

from adk_actors.auth.credentials import CredentialScope, InMemoryCredentialStore
from adk_actors.auth.tokens import OAuthClient, TokenManager
from adk_actors.errors import AuthError, ConfigError, StorageError

SCOPE = CredentialScope(app="crm")
CLIENT_SECRET = "client-secret-" + secrets.token_hex(8)


class TokenServer:
    """A token endpoint: checks the client, issues opaque tokens, counts requests, can fail on purpose."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self.fail_next = 0  # answer 503 this many times
        self.delay_s = 0.0
        self.expires_in = 3600
        self.refresh_tokens = {"refresh-1"}
        self.issued: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                owner.requests.append(form)
                time.sleep(owner.delay_s)
                if owner.fail_next > 0:
                    owner.fail_next -= 1
                    self._answer(503, {"error": "temporarily_unavailable"})
                    return
                body = owner.grant(form)
                self._answer(200 if "access_token" in body else 400, body)

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def grant(self, form: dict[str, str]) -> dict[str, Any]:
        token = "access-" + secrets.token_hex(8)
        if form.get("grant_type") == "client_credentials":
            if form.get("client_id") != "crm" or form.get("client_secret") != CLIENT_SECRET:
                return {"error": "invalid_client", "error_description": f"bad secret {form.get('client_secret')}"}
            self.issued.append(token)
            return {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": self.expires_in,
                "scope": "orders.read",
            }
        if form.get("grant_type") == "refresh_token":
            if form.get("refresh_token") not in self.refresh_tokens:
                return {"error": "invalid_grant"}
            self.refresh_tokens.discard(form["refresh_token"])
            rotated = "refresh-" + secrets.token_hex(4)
            self.refresh_tokens.add(rotated)
            self.issued.append(token)
            return {"access_token": token, "token_type": "bearer", "expires_in": 60, "refresh_token": rotated}
        return {"error": "unsupported_grant_type"}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def idp() -> Iterator[TokenServer]:
    server = TokenServer()
    yield server
    server.stop()


@pytest.fixture
def store() -> InMemoryCredentialStore:
    return InMemoryCredentialStore()


def client_for(idp: TokenServer, store: InMemoryCredentialStore, **extra: Any) -> OAuthClient:
    ref = store.put(SCOPE, "crm-secret", CLIENT_SECRET)
    options: dict[str, Any] = {"scopes": ("orders.read",), "allow_http_loopback": True, **extra}
    return OAuthClient(token_url=idp.url, client_id="crm", client_secret=ref, **options)


def test_client_credentials_token_is_fetched_once_and_reused_until_the_skew(
    idp: TokenServer, store: InMemoryCredentialStore
) -> None:
    now = [1000.0]
    manager = TokenManager(store, skew_s=60, clock=lambda: now[0])
    client = client_for(idp, store)
    token = manager.access_token(client)
    assert token.reveal() == idp.issued[-1] and token.scopes == ("orders.read",)
    assert idp.requests[0]["grant_type"] == "client_credentials" and idp.requests[0]["scope"] == "orders.read"
    assert manager.access_token(client) is token and len(idp.requests) == 1
    now[0] += 3600 - 59  # inside the skew: a new token
    assert manager.access_token(client).reveal() != token.reveal() and len(idp.requests) == 2
    assert token.reveal() not in repr(token) and CLIENT_SECRET not in repr(manager)


def test_concurrent_callers_share_one_token_request(idp: TokenServer, store: InMemoryCredentialStore) -> None:
    idp.delay_s = 0.3
    manager = TokenManager(store)
    client = client_for(idp, store)
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(manager.access_token(client).reveal())) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(got) == 20 and len(set(got)) == 1
    assert len(idp.requests) == 1  # single flight


def test_transient_failures_are_retried_a_bounded_number_of_times(
    idp: TokenServer, store: InMemoryCredentialStore
) -> None:
    manager = TokenManager(store)
    idp.fail_next = 2
    assert manager.access_token(client_for(idp, store, max_attempts=3)).reveal() == idp.issued[-1]
    assert len(idp.requests) == 3
    idp.fail_next = 10
    with pytest.raises(AuthError) as caught:
        manager.access_token(client_for(idp, store, max_attempts=2, scopes=("other",)))
    assert caught.value.reason == "token_request_failed" and len(idp.requests) == 5


def test_an_oauth_refusal_is_not_retried_and_echoes_nothing(idp: TokenServer, store: InMemoryCredentialStore) -> None:
    wrong = store.put(SCOPE, "wrong", "not-the-secret-" + secrets.token_hex(4))
    client = OAuthClient(token_url=idp.url, client_id="crm", client_secret=wrong, allow_http_loopback=True)
    with pytest.raises(AuthError) as caught:
        TokenManager(store).access_token(client)
    err = caught.value
    assert err.reason == "token_endpoint_refused" and err.details == {"status": 400, "oauth_error": "invalid_client"}
    assert "not-the-secret" not in str(err.to_dict()) and len(idp.requests) == 1


def test_a_rotated_refresh_token_is_stored_before_the_access_token_is_used(
    idp: TokenServer, store: InMemoryCredentialStore
) -> None:
    refresh = store.put(CredentialScope(app="crm", user="u1"), "orders-refresh", "refresh-1")
    client = OAuthClient(token_url=idp.url, client_id="crm", refresh_token=refresh, allow_http_loopback=True)
    now = [0.0]
    manager = TokenManager(store, skew_s=10, clock=lambda: now[0])
    first = manager.access_token(client)
    stored = store.get(refresh).reveal()
    assert stored != "refresh-1" and stored in idp.refresh_tokens  # rotated and persisted
    now[0] += 55
    second = manager.access_token(client)  # refreshed with the rotated token
    assert second.reveal() != first.reveal() and idp.requests[-1]["refresh_token"] == stored
    # A new manager (a restarted process) continues from the store: nothing was lost.
    assert TokenManager(store).access_token(client).reveal() == idp.issued[-1]


def test_revoke_forgets_the_cached_token(idp: TokenServer, store: InMemoryCredentialStore) -> None:
    manager = TokenManager(store)
    client = client_for(idp, store)
    first = manager.access_token(client)
    manager.revoke(client)
    assert manager.access_token(client).reveal() != first.reveal() and len(idp.requests) == 2


def test_a_missing_secret_and_bad_clients_are_clear_errors(idp: TokenServer, store: InMemoryCredentialStore) -> None:
    ghost = store.put(SCOPE, "ghost", "x")
    store.delete(ghost)
    with pytest.raises(StorageError) as missing:
        TokenManager(store).access_token(
            OAuthClient(token_url=idp.url, client_id="crm", client_secret=ghost, allow_http_loopback=True)
        )
    assert missing.value.reason == "credential_not_found"
    for kwargs, reason in (
        ({"token_url": "http://idp.example/token"}, "insecure_url"),
        ({"token_url": idp.url}, "insecure_url"),  # loopback http needs the opt-in
        ({"token_url": "https://user:pw@idp.example/token"}, "invalid_value"),
        ({"token_url": "https://idp.example/token", "client_secret": None}, "invalid_value"),
        ({"token_url": "https://idp.example/token", "scopes": ("a b",)}, "invalid_value"),
    ):
        with pytest.raises(ConfigError) as caught:
            OAuthClient(**{"client_id": "crm", "client_secret": ghost, **kwargs})
        assert caught.value.reason == reason, kwargs

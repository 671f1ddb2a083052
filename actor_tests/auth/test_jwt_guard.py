"""JwtGuard and bearer_claims at a real edge: a Starlette app behind the guard, served by uvicorn on 127.0.0.1,
called with httpx; refusals answer 401/403/503 with a Bearer challenge in the edge's error shape."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from actor_tests.auth.conftest import Issuer
from adk_actors.auth import CLAIMS_STATE_KEY, JwtGuard, JwtPolicy, bearer_claims
from adk_actors.errors import AuthError, ConfigError
from adk_actors.web import start_in_thread

Make = Callable[..., JwtPolicy]


async def whoami(request: Request) -> JSONResponse:
    claims = getattr(request.state, CLAIMS_STATE_KEY, None)
    return JSONResponse({"sub": claims.subject if claims else None, "scopes": sorted(claims.scopes) if claims else []})


@pytest.fixture
def client(make_policy: Make) -> Iterator[httpx.Client]:
    app = Starlette(routes=[Route("/whoami", whoami), Route("/healthz", whoami), Route("/public/x", whoami)])
    guarded = JwtGuard(app, make_policy(), public_paths=("/healthz", "/public/"), realm="agents")
    server = start_in_thread(guarded)
    try:
        with httpx.Client(base_url=server.url, trust_env=False, timeout=10.0) as http:
            yield http
    finally:
        assert server.stop()


def test_a_valid_token_reaches_the_app_with_its_claims(issuer: Issuer, client: httpx.Client) -> None:
    answer = client.get("/whoami", headers={"Authorization": f"Bearer {issuer.token()}"})
    assert answer.status_code == 200
    assert answer.json() == {"sub": "user-1", "scopes": ["agent.run", "profile"]}


def test_a_missing_token_is_401_with_a_bare_challenge(client: httpx.Client) -> None:
    answer = client.get("/whoami")
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'Bearer realm="agents"'
    assert answer.json()["error"]["reason"] == "missing_token"


def test_a_bad_token_is_401_invalid_token_without_echoing_it(issuer: Issuer, client: httpx.Client) -> None:
    token = issuer.token(aud="https://other.test")
    answer = client.get("/whoami", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'Bearer realm="agents", error="invalid_token"'
    assert answer.json() == {
        "error": {"reason": "wrong_audience", "message": "the token is not meant for this audience"}
    }
    for part in token.split("."):
        assert part not in answer.text


def test_a_missing_scope_is_403_insufficient_scope(issuer: Issuer, client: httpx.Client) -> None:
    answer = client.get("/whoami", headers={"Authorization": f"Bearer {issuer.token(scope='profile')}"})
    assert answer.status_code == 403
    assert answer.headers["www-authenticate"] == 'Bearer realm="agents", error="insufficient_scope", scope="agent.run"'
    assert answer.json()["error"]["reason"] == "insufficient_scope"


def test_public_paths_pass_without_a_token(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"sub": None, "scopes": []}
    assert client.get("/public/x").status_code == 200
    assert client.get("/healthz/more").status_code == 401  # exact paths stay exact


def test_an_unreachable_jwks_is_503_without_a_challenge(issuer: Issuer, client: httpx.Client) -> None:
    token = issuer.token()
    issuer.stop()
    answer = client.get("/whoami", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 503 and "www-authenticate" not in answer.headers
    assert answer.json()["error"]["reason"] == "jwks_unavailable"


def test_bearer_claims_reads_only_one_bearer_authorization_header(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy()
    token = issuer.token()
    assert bearer_claims({"authorization": f"bearer {token}"}, policy).subject == "user-1"
    assert bearer_claims([(b"Authorization", f"Bearer {token}".encode())], policy).subject == "user-1"
    for headers, reason in [
        ({}, "missing_token"),
        ({"Authorization": f"Basic {token}"}, "invalid_request"),
        ({"Authorization": "Bearer "}, "invalid_request"),
        ([(b"authorization", f"Bearer {token}".encode())] * 2, "invalid_request"),
        ({"Authorization": "Bearer not-a-token"}, "invalid_token"),
    ]:
        with pytest.raises(AuthError) as caught:
            bearer_claims(headers, policy)
        assert caught.value.reason == reason


def test_the_guard_refuses_a_bad_configuration(make_policy: Make) -> None:
    app = Starlette()
    with pytest.raises(ConfigError):
        JwtGuard(app, object(), public_paths=())  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        JwtGuard(app, make_policy(), public_paths=("healthz",))
    with pytest.raises(ConfigError):
        JwtGuard(app, make_policy(), realm='a"b')

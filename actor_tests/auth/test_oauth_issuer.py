"""The OAuth 2.0 / OIDC test issuer (adk_actors.devtools.oauth_issuer) over real HTTP on 127.0.0.1: the code flow
with PKCE S256 verified with PyJWT against its JWKS, the refusals RFC 6749 / 7636 ask for (no or plain PKCE, a
wrong verifier, a replayed code, an unregistered redirect URI never redirected, bad client credentials), refresh
rotation, client credentials, the failure knobs, EC keys and key rotation. Every server is stopped by its test and
its port is closed afterwards."""

from __future__ import annotations

import base64
import hashlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
import requests

from adk_actors.auth import JwtPolicy
from adk_actors.devtools.oauth_issuer import IssuedToken, IssuerClient, OAuthIssuer, follow_authorize, pkce_pair
from adk_actors.errors import AuthError, ConfigError

pytestmark = pytest.mark.timeout(60)

REDIRECT = "http://127.0.0.1:9/callback"
WEB_SECRET = "web-secret-4b1d9e"
SVC_SECRET = "svc-secret-77c2a0"
AUDIENCE = "https://agents.test"
CLIENTS = {
    "web": IssuerClient("web", WEB_SECRET, (REDIRECT,), ("authorization_code", "refresh_token")),
    "spa": IssuerClient("spa", None, (REDIRECT, "http://127.0.0.1:9/other"), ("authorization_code", "refresh_token")),
    "svc": IssuerClient("svc", SVC_SECRET, (REDIRECT,), ("client_credentials",)),
}


def _port_closed(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return False
    except OSError:
        return True


def _stopped(issuer: OAuthIssuer) -> None:
    """Stop ``issuer`` and check nothing of it is left: thread joined, port closed."""
    issuer.stop()
    assert not issuer.running
    assert _port_closed(urlsplit(issuer.url).port or 0)


@pytest.fixture
def server() -> Iterator[OAuthIssuer]:
    issuer = OAuthIssuer(clients=CLIENTS, users=("alice", "bob"))
    with issuer:
        yield issuer
    _stopped(issuer)


def authorize_url(issuer: OAuthIssuer, challenge: str, **overrides: str | None) -> str:
    query: dict[str, str | None] = {
        "response_type": "code",
        "client_id": "web",
        "redirect_uri": REDIRECT,
        "scope": "openid calendar.read",
        "state": "state-123",
        "nonce": "nonce-456",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    query.update(overrides)
    return issuer.authorization_endpoint + "?" + urlencode({k: v for k, v in query.items() if v is not None})


def token_request(issuer: OAuthIssuer, form: dict[str, str], auth: tuple[str, str] | None = None) -> requests.Response:
    return requests.post(issuer.token_endpoint, data=form, auth=auth, timeout=10, allow_redirects=False)


def code_form(code: str, verifier: str, **overrides: str) -> dict[str, str]:
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier}
    return form | overrides


def sign_in(issuer: OAuthIssuer, **overrides: str | None) -> tuple[str, str]:
    """A code and its verifier, from an authorization with a fresh PKCE pair."""
    verifier, challenge = pkce_pair()
    code, _state = follow_authorize(authorize_url(issuer, challenge, **overrides))
    return code, verifier


def tokens_for(issuer: OAuthIssuer, **overrides: str | None) -> dict[str, Any]:
    code, verifier = sign_in(issuer, **overrides)
    answer = token_request(issuer, code_form(code, verifier), auth=("web", WEB_SECRET))
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def verify(issuer: OAuthIssuer, token: str, *, typ: str, audience: str) -> dict[str, Any]:
    """Verify ``token`` with PyJWT against the issuer's published keys (fetched over HTTP)."""
    header = jwt.get_unverified_header(token)
    assert header["typ"] == typ and header["alg"] == issuer.algorithm
    keys = jwt.PyJWKSet.from_dict(requests.get(issuer.jwks_uri, timeout=10).json())
    return dict(
        jwt.decode(token, keys[header["kid"]].key, algorithms=[header["alg"]], audience=audience, issuer=issuer.url)
    )


def oauth_error(answer: requests.Response) -> tuple[int, str]:
    return answer.status_code, str(answer.json()["error"])


def redirect_query(answer: requests.Response) -> dict[str, str]:
    assert answer.status_code == 302
    location = answer.headers["Location"]
    assert location.startswith(REDIRECT + "?")
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def userinfo(issuer: OAuthIssuer, access_token: str) -> requests.Response:
    return requests.get(issuer.userinfo_endpoint, headers={"Authorization": "Bearer " + access_token}, timeout=10)


# ---- the code flow --------------------------------------------------------------------------------------------------


def test_the_code_flow_with_pkce_gives_tokens_that_verify_against_the_jwks(server: OAuthIssuer) -> None:
    meta = requests.get(server.url + "/.well-known/openid-configuration", timeout=10).json()
    assert meta["issuer"] == server.url and meta["jwks_uri"] == server.jwks_uri
    assert meta["authorization_endpoint"] == server.authorization_endpoint
    assert meta["token_endpoint"] == server.token_endpoint and meta["code_challenge_methods_supported"] == ["S256"]

    verifier, challenge = pkce_pair()
    answer = requests.get(authorize_url(server, challenge, login_hint="bob"), allow_redirects=False, timeout=10)
    query = redirect_query(answer)
    assert query["state"] == "state-123" and query["iss"] == server.url and query["code"]

    tokens = token_request(server, code_form(query["code"], verifier), auth=("web", WEB_SECRET))
    assert tokens.status_code == 200 and tokens.headers["Cache-Control"] == "no-store"
    body = tokens.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 300 and body["scope"] == "openid calendar.read"
    assert body["refresh_token"] and body["refresh_token"].count(".") == 0  # opaque, not a JWT

    access = verify(server, body["access_token"], typ="at+jwt", audience=AUDIENCE)
    assert access["sub"] == "bob" and access["client_id"] == "web" and access["scope"] == "openid calendar.read"
    assert access["exp"] - access["iat"] == 300 and access["jti"]
    identity = verify(server, body["id_token"], typ="JWT", audience="web")
    assert identity["sub"] == "bob" and identity["nonce"] == "nonce-456" and identity["azp"] == "web"
    # The project's own verifier accepts both (the consumer the issuer exists for).
    policy = JwtPolicy(issuer=server.url, audience=AUDIENCE, jwks_url=server.jwks_uri, allow_http_loopback=True)
    assert policy.verify(body["access_token"]).claims["sub"] == "bob"

    assert userinfo(server, body["access_token"]).json() == {"sub": "bob"}
    assert server.token_requests == {"authorization_code": 1}
    assert server.issued == [IssuedToken("authorization_code", "web", "bob", ("openid", "calendar.read"))]
    issued = server.secrets_issued()
    assert query["code"] in issued and body["access_token"] in issued and body["id_token"] in issued
    assert not any(secret in repr(server) for secret in (*issued, WEB_SECRET))
    assert WEB_SECRET not in repr(CLIENTS["web"])


def test_a_public_client_signs_in_without_a_secret_and_the_first_user_is_the_default(server: OAuthIssuer) -> None:
    code, verifier = sign_in(server, client_id="spa", login_hint="mallory", scope="calendar.read", nonce=None)
    answer = token_request(server, code_form(code, verifier, client_id="spa"))
    assert answer.status_code == 200
    body = answer.json()
    assert "id_token" not in body  # no openid scope
    assert verify(server, body["access_token"], typ="at+jwt", audience=AUDIENCE)["sub"] == "alice"


def test_authorization_without_s256_pkce_or_state_is_refused_by_an_error_redirect(server: OAuthIssuer) -> None:
    _verifier, challenge = pkce_pair()
    cases: list[tuple[dict[str, str | None], str]] = [
        ({"code_challenge": None, "code_challenge_method": None}, "invalid_request"),
        ({"code_challenge_method": None}, "invalid_request"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": "too-short"}, "invalid_request"),
        ({"state": None}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"scope": 'openid "quoted"'}, "invalid_scope"),
        ({"client_id": "svc"}, "unauthorized_client"),  # svc may not use the code grant
    ]
    for overrides, error in cases:
        answer = requests.get(authorize_url(server, challenge, **overrides), allow_redirects=False, timeout=10)
        query = redirect_query(answer)
        assert query["error"] == error, overrides
        assert "code" not in query and query["iss"] == server.url
        assert query.get("state") == (None if "state" in overrides else "state-123")
    with pytest.raises(AuthError) as refused:
        follow_authorize(authorize_url(server, challenge, code_challenge_method="plain"))
    assert refused.value.reason == "authorization_error" and refused.value.details == {"oauth_error": "invalid_request"}
    assert server.secrets_issued() == ()


def test_an_unknown_client_or_unregistered_redirect_uri_is_answered_400_and_never_redirected(
    server: OAuthIssuer,
) -> None:
    _verifier, challenge = pkce_pair()
    for overrides in (
        {"client_id": "nobody"},
        {"redirect_uri": REDIRECT + "/"},
        {"redirect_uri": REDIRECT + "?x=1"},
        {"redirect_uri": "http://127.0.0.1:10/callback"},
        {"redirect_uri": "http://evil.test/callback"},
        {"redirect_uri": None},
        {"client_id": "web", "redirect_uri": "http://127.0.0.1:9/other"},  # registered, but for spa
    ):
        answer = requests.get(authorize_url(server, challenge, **overrides), allow_redirects=False, timeout=10)
        assert answer.status_code == 400 and "Location" not in answer.headers, overrides
        assert answer.json()["error"] in ("invalid_client", "invalid_request")
    twice = authorize_url(server, challenge) + "&" + urlencode({"redirect_uri": "http://evil.test/"})
    answer = requests.get(twice, allow_redirects=False, timeout=10)
    assert answer.status_code == 400 and "Location" not in answer.headers
    with pytest.raises(AuthError) as refused:
        follow_authorize(authorize_url(server, challenge, client_id="nobody"))
    assert refused.value.reason == "authorization_refused"
    assert refused.value.details == {"status": 400, "oauth_error": "invalid_client"}


def test_a_wrong_verifier_is_refused_and_spends_the_code(server: OAuthIssuer) -> None:
    code, verifier = sign_in(server)
    other, _ = pkce_pair()
    auth = ("web", WEB_SECRET)
    assert oauth_error(token_request(server, code_form(code, other), auth=auth)) == (400, "invalid_grant")
    # The right verifier no longer helps: a failed exchange spent the code.
    assert oauth_error(token_request(server, code_form(code, verifier), auth=auth)) == (400, "invalid_grant")
    code, verifier = sign_in(server)
    missing = code_form(code, verifier)
    del missing["code_verifier"]
    assert oauth_error(token_request(server, missing, auth=auth)) == (400, "invalid_grant")
    assert server.issued == []


def test_a_replayed_code_is_refused_and_revokes_the_tokens_issued_from_it(server: OAuthIssuer) -> None:
    code, verifier = sign_in(server)
    auth = ("web", WEB_SECRET)
    first = token_request(server, code_form(code, verifier), auth=auth).json()
    assert userinfo(server, first["access_token"]).status_code == 200
    assert oauth_error(token_request(server, code_form(code, verifier), auth=auth)) == (400, "invalid_grant")
    revoked = userinfo(server, first["access_token"])
    assert revoked.status_code == 401 and 'error="invalid_token"' in revoked.headers["WWW-Authenticate"]
    refresh = {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
    assert oauth_error(token_request(server, refresh, auth=auth)) == (400, "invalid_grant")


def test_a_code_is_bound_to_its_client_and_redirect_uri(server: OAuthIssuer) -> None:
    code, verifier = sign_in(server)
    assert oauth_error(token_request(server, code_form(code, verifier, client_id="spa"))) == (400, "invalid_grant")
    code, verifier = sign_in(server)
    other = code_form(code, verifier, redirect_uri="http://127.0.0.1:9/other")
    assert oauth_error(token_request(server, other, auth=("web", WEB_SECRET))) == (400, "invalid_grant")


def test_a_code_expires_after_code_ttl_s() -> None:
    now = [time.time()]
    issuer = OAuthIssuer(clients=CLIENTS, code_ttl_s=60, clock=lambda: now[0]).start()
    try:
        code, verifier = sign_in(issuer)
        now[0] += 61.0
        assert oauth_error(token_request(issuer, code_form(code, verifier), auth=("web", WEB_SECRET))) == (
            400,
            "invalid_grant",
        )
    finally:
        _stopped(issuer)


# ---- refresh and client credentials --------------------------------------------------------------------------------


def test_a_refresh_token_rotates_and_a_narrower_scope_is_allowed_but_not_a_wider_one(server: OAuthIssuer) -> None:
    auth = ("web", WEB_SECRET)
    first = tokens_for(server, login_hint="bob")
    refresh = {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
    second = token_request(server, refresh, auth=auth).json()
    assert second["refresh_token"] != first["refresh_token"] and second["scope"] == "openid calendar.read"
    claims = verify(server, second["access_token"], typ="at+jwt", audience=AUDIENCE)
    assert (
        claims["sub"] == "bob"
        and claims["jti"] != verify(server, first["access_token"], typ="at+jwt", audience=AUDIENCE)["jti"]
    )
    # The used refresh token is dead.
    assert oauth_error(token_request(server, refresh, auth=auth)) == (400, "invalid_grant")

    wider = {"grant_type": "refresh_token", "refresh_token": second["refresh_token"], "scope": "openid admin"}
    assert oauth_error(token_request(server, wider, auth=auth)) == (400, "invalid_scope")
    narrower = dict(wider, scope="calendar.read")
    third = token_request(server, narrower, auth=auth).json()
    assert third["scope"] == "calendar.read"
    # The rotated refresh token keeps the grant's full scope.
    fourth = token_request(server, {"grant_type": "refresh_token", "refresh_token": third["refresh_token"]}, auth)
    assert fourth.json()["scope"] == "openid calendar.read"
    # Another client cannot use it.
    stolen = {"grant_type": "refresh_token", "refresh_token": fourth.json()["refresh_token"], "client_id": "spa"}
    assert oauth_error(token_request(server, stolen)) == (400, "invalid_grant")
    assert server.token_requests == {"authorization_code": 1, "refresh_token": 6}
    assert [t.grant for t in server.issued] == ["authorization_code", "refresh_token", "refresh_token", "refresh_token"]


def test_client_credentials_issue_a_token_for_the_client_itself(server: OAuthIssuer) -> None:
    form = {"grant_type": "client_credentials", "scope": "orders.read orders.write", "resource": "https://api.test"}
    answer = token_request(server, form, auth=("svc", SVC_SECRET))
    assert answer.status_code == 200
    body = answer.json()
    assert "refresh_token" not in body and "id_token" not in body and body["scope"] == "orders.read orders.write"
    claims = verify(server, body["access_token"], typ="at+jwt", audience="https://api.test")
    assert claims["sub"] == "svc" and claims["client_id"] == "svc" and claims["scope"] == "orders.read orders.write"
    posted = token_request(
        server, {"grant_type": "client_credentials", "client_id": "svc", "client_secret": SVC_SECRET}
    )
    assert posted.status_code == 200 and posted.json()["scope"] == ""
    assert server.issued[-1] == IssuedToken("client_credentials", "svc", "svc", ())


def test_bad_client_credentials_are_refused_with_401(server: OAuthIssuer) -> None:
    grant = {"grant_type": "client_credentials"}
    for answer in (
        token_request(server, grant, auth=("svc", "not-the-secret")),
        token_request(server, grant | {"client_id": "svc", "client_secret": "not-the-secret"}),
        token_request(server, grant | {"client_id": "svc"}),
        token_request(server, grant, auth=("nobody", SVC_SECRET)),
        token_request(server, grant | {"client_id": "spa", "client_secret": "public-clients-have-none"}),
    ):
        assert oauth_error(answer) == (401, "invalid_client")
        assert answer.headers["WWW-Authenticate"].startswith("Basic")
        assert "not-the-secret" not in answer.text and SVC_SECRET not in answer.text
    both = token_request(server, grant | {"client_secret": SVC_SECRET}, auth=("svc", SVC_SECRET))
    assert oauth_error(both) == (400, "invalid_request")
    assert oauth_error(token_request(server, {"grant_type": "password"}, auth=("svc", SVC_SECRET))) == (
        400,
        "unsupported_grant_type",
    )
    assert oauth_error(token_request(server, {"grant_type": "refresh_token"}, auth=("svc", SVC_SECRET))) == (
        400,
        "unauthorized_client",
    )
    as_json = requests.post(server.token_endpoint, json=grant, auth=("svc", SVC_SECRET), timeout=10)
    assert oauth_error(as_json) == (400, "invalid_request")
    assert server.issued == []


# ---- knobs ----------------------------------------------------------------------------------------------------------


def test_fail_next_token_answers_the_status_then_the_endpoint_recovers(server: OAuthIssuer) -> None:
    grant = {"grant_type": "client_credentials"}
    server.fail_next_token(2)
    for _ in range(2):
        assert oauth_error(token_request(server, grant, auth=("svc", SVC_SECRET))) == (503, "temporarily_unavailable")
    server.fail_next_token(1, status=500)
    assert oauth_error(token_request(server, grant, auth=("svc", SVC_SECRET))) == (500, "server_error")
    assert token_request(server, grant, auth=("svc", SVC_SECRET)).status_code == 200
    assert server.token_requests == {"client_credentials": 4} and len(server.issued) == 1


def test_deny_next_makes_the_next_authorization_access_denied(server: OAuthIssuer) -> None:
    server.deny_next()
    _verifier, challenge = pkce_pair()
    denied = requests.get(authorize_url(server, challenge), allow_redirects=False, timeout=10)
    assert redirect_query(denied) == {"error": "access_denied", "state": "state-123", "iss": server.url}
    sign_in(server)  # only the next one


def test_delay_token_s_holds_the_answer_and_stop_releases_a_held_request() -> None:
    issuer = OAuthIssuer(clients=CLIENTS).start()
    grant = {"grant_type": "client_credentials"}
    try:
        issuer.delay_token_s = 0.3
        started = time.monotonic()
        assert token_request(issuer, grant, auth=("svc", SVC_SECRET)).status_code == 200
        assert time.monotonic() - started >= 0.3
        issuer.delay_token_s = 30.0
        outcome: list[object] = []

        def held() -> None:
            try:
                outcome.append(token_request(issuer, grant, auth=("svc", SVC_SECRET)).status_code)
            except requests.RequestException as exc:
                outcome.append(type(exc).__name__)

        thread = threading.Thread(target=held)
        thread.start()
        deadline = time.monotonic() + 10
        while issuer.token_requests.get("client_credentials") != 2 and time.monotonic() < deadline:
            thread.join(0.01)
        assert issuer.token_requests.get("client_credentials") == 2
        started = time.monotonic()
    finally:
        _stopped(issuer)
    thread.join(10)
    assert not thread.is_alive() and time.monotonic() - started < 10 and len(outcome) == 1


# ---- keys -----------------------------------------------------------------------------------------------------------


def test_an_ec_issuer_signs_es256_tokens_with_p256_keys() -> None:
    issuer = OAuthIssuer(clients=CLIENTS, key_kind="ec").start()
    try:
        (key,) = requests.get(issuer.jwks_uri, timeout=10).json()["keys"]
        assert key["kty"] == "EC" and key["crv"] == "P-256" and key["alg"] == "ES256" and "d" not in key
        body = tokens_for(issuer)
        assert jwt.get_unverified_header(body["access_token"])["alg"] == "ES256"
        assert verify(issuer, body["id_token"], typ="JWT", audience="web")["nonce"] == "nonce-456"
        meta = requests.get(issuer.url + "/.well-known/openid-configuration", timeout=10).json()
        assert meta["id_token_signing_alg_values_supported"] == ["ES256"]
    finally:
        _stopped(issuer)


def test_a_rotated_key_is_published_beside_the_old_one_until_retired(server: OAuthIssuer) -> None:
    old_kid = server.signing_kid
    (key,) = requests.get(server.jwks_uri, timeout=10).json()["keys"]
    assert key["kid"] == old_kid and key["kty"] == "RSA" and "d" not in key
    old = tokens_for(server)["access_token"]

    new_kid = server.rotate_key()
    assert [k["kid"] for k in requests.get(server.jwks_uri, timeout=10).json()["keys"]] == [old_kid, new_kid]
    new = tokens_for(server)["access_token"]
    assert jwt.get_unverified_header(new)["kid"] == new_kid
    assert verify(server, old, typ="at+jwt", audience=AUDIENCE)["sub"] == "alice"  # the old key still verifies
    assert userinfo(server, old).status_code == 200

    with pytest.raises(ConfigError):
        server.retire(new_kid)  # the signing key stays
    assert server.retire() == [old_kid]
    assert [k["kid"] for k in requests.get(server.jwks_uri, timeout=10).json()["keys"]] == [new_kid]
    assert userinfo(server, old).status_code == 401 and userinfo(server, new).status_code == 200


# ---- the rest -----------------------------------------------------------------------------------------------------


def test_pkce_pair_gives_a_fresh_s256_pair() -> None:
    verifier, challenge = pkce_pair()
    assert 43 <= len(verifier) <= 128 and len(challenge) == 43
    digest = hashlib.sha256(verifier.encode()).digest()
    assert challenge == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert pkce_pair()[0] != verifier


def test_bad_configuration_is_refused() -> None:
    for make in (
        lambda: IssuerClient("c", "s", ("http://127.0.0.1:9/cb#frag",)),
        lambda: IssuerClient("c", "s", ("/relative",)),
        lambda: IssuerClient("c", "s", (REDIRECT,), ("password",)),
        lambda: IssuerClient("c", "s", (), ("authorization_code",)),
        lambda: OAuthIssuer(clients=CLIENTS, key_kind="hs"),
        lambda: OAuthIssuer(clients=CLIENTS, users=()),
        lambda: OAuthIssuer(clients={"other": CLIENTS["web"]}),
    ):
        with pytest.raises(ConfigError) as refused:
            make()
        assert refused.value.reason == "invalid_value"
    idle = OAuthIssuer(clients=CLIENTS)
    with pytest.raises(ConfigError) as early:
        _ = idle.url
    assert early.value.reason == "not_started" and not idle.running


def test_userinfo_needs_a_valid_bearer_token(server: OAuthIssuer) -> None:
    assert requests.get(server.userinfo_endpoint, timeout=10).status_code == 401
    assert userinfo(server, "not-a-jwt").status_code == 401
    body = tokens_for(server)
    assert userinfo(server, body["id_token"]).status_code == 401  # an id token is not an access token

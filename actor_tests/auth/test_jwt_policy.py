"""JwtPolicy: real RS256/ES256 tokens from the test issuer, checked against its JWKS over HTTP on 127.0.0.1;
every refusal is a AuthError with its reason tag and never echoes the token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import pickle
import time
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.auth.conftest import AUDIENCE, Issuer
from adk_actors.auth import Claims, JwtPolicy
from adk_actors.errors import AuthError, ConfigError

Make = Callable[..., JwtPolicy]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(header: dict[str, Any], claims: dict[str, Any]) -> str:
    return _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())


def _refused(policy: JwtPolicy, token: Any, reason: str) -> AuthError:
    with pytest.raises(AuthError) as caught:
        policy.verify(token)
    err = caught.value
    assert err.reason == reason, err
    text = json.dumps(err.to_dict()) + str(err) + repr(err)
    if isinstance(token, str) and len(token) > 20:
        for part in token.split("."):
            assert not part or part not in text, "the error echoes the token"
    return err


def test_a_valid_rs256_and_es256_token_gives_frozen_claims(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy()
    claims = policy.verify(issuer.token("rsa-1", aud=[AUDIENCE, "other"], custom="x"))
    assert isinstance(claims, Claims)
    assert claims.subject == "user-1" and claims.issuer == issuer.url
    assert claims.scopes == frozenset({"agent.run", "profile"})
    assert claims.audience == (AUDIENCE, "other")
    assert claims.claims["custom"] == "x" and claims.principal == f"{issuer.url}#user-1"
    with pytest.raises(AttributeError):
        claims.subject = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        claims.claims["sub"] = "other"  # type: ignore[index]
    es = policy.verify(issuer.token("ec-1", scope=None, scp=["agent.run"], typ="application/at+JWT"))
    assert es.scopes == frozenset({"agent.run"})
    assert issuer.requests == 1  # one fetch served both keys


def test_a_forged_or_tampered_signature_is_invalid_token(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy()
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _refused(policy, issuer.token("rsa-1", key=forger), "invalid_token")
    head, body, sig = issuer.token("rsa-1").split(".")
    tampered = _b64(json.dumps(issuer.claims(sub="admin")).encode())
    _refused(policy, f"{head}.{tampered}.{sig}", "invalid_token")
    ec_forger = ec.generate_private_key(ec.SECP256R1())
    _refused(policy, issuer.token("ec-1", key=ec_forger), "invalid_token")


def test_time_claims_are_checked_with_leeway(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy(leeway_s=30)
    now = int(time.time())
    _refused(policy, issuer.token(iat=now - 700, exp=now - 60), "expired_token")
    assert policy.verify(issuer.token(iat=now - 700, exp=now - 10)).subject == "user-1"  # inside the leeway
    _refused(policy, issuer.token(nbf=now + 120), "token_not_yet_valid")
    _refused(policy, issuer.token(iat=now + 120, exp=now + 600), "token_not_yet_valid")
    assert policy.verify(issuer.token(nbf=now + 10)).subject == "user-1"
    _refused(policy, issuer.token(exp=None), "invalid_token")
    _refused(policy, issuer.token(iat=None), "invalid_token")
    _refused(policy, issuer.token(exp="tomorrow"), "invalid_token")


def test_a_token_living_longer_than_the_policy_allows_is_refused(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy(max_lifetime_s=600)
    now = int(time.time())
    assert policy.verify(issuer.token(iat=now, exp=now + 600)).subject == "user-1"
    err = _refused(policy, issuer.token(iat=now, exp=now + 601), "token_lifetime_too_long")
    assert err.details == {"max_lifetime_s": 600.0}


def test_audience_and_issuer_must_match_exactly(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy()
    _refused(policy, issuer.token(aud="https://other.test"), "wrong_audience")
    _refused(policy, issuer.token(aud=["https://other.test"]), "wrong_audience")
    _refused(policy, issuer.token(aud=AUDIENCE + "/"), "wrong_audience")
    _refused(policy, issuer.token(aud=None), "wrong_audience")
    _refused(policy, issuer.token(iss=issuer.url + "/"), "wrong_issuer")
    _refused(policy, issuer.token(iss="https://evil.test"), "wrong_issuer")
    _refused(policy, issuer.token(sub=""), "invalid_token")


def test_alg_none_is_refused_whatever_the_signature(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy()
    claims = issuer.claims()
    for alg in ("none", "None", "NONE"):
        _refused(policy, _unsigned({"alg": alg, "typ": "at+jwt", "kid": "rsa-1"}, claims) + ".", "disallowed_algorithm")
    _refused(policy, _unsigned({"typ": "at+jwt", "kid": "rsa-1"}, claims) + ".", "disallowed_algorithm")


def test_hs256_signed_with_the_public_key_is_refused(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy()
    public_pem = (
        issuer.private["rsa-1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    signing_input = _unsigned({"alg": "HS256", "typ": "at+jwt", "kid": "rsa-1"}, issuer.claims())
    mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    _refused(policy, signing_input + "." + _b64(mac), "disallowed_algorithm")
    assert issuer.requests == 0  # refused before any key was looked up


def test_an_algorithm_that_does_not_fit_the_key_is_refused(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy(algorithms=("RS256", "ES256", "PS256"))
    # ES256 header naming the RSA key: the key's type decides, not the header.
    token = jwt.encode(
        issuer.claims(), issuer.private["ec-1"], algorithm="ES256", headers={"kid": "rsa-1", "typ": "JWT"}
    )
    _refused(policy, token, "disallowed_algorithm")
    # PS256 with the RSA key is allowed by this policy and fits the key.
    ps = jwt.encode(issuer.claims(), issuer.private["rsa-1"], algorithm="PS256", headers={"kid": "rsa-1", "typ": "JWT"})
    assert policy.verify(ps).subject == "user-1"
    # RS512 is a fine algorithm but not in this policy's allow-list.
    rs512 = jwt.encode(
        issuer.claims(), issuer.private["rsa-1"], algorithm="RS512", headers={"kid": "rsa-1", "typ": "JWT"}
    )
    _refused(policy, rs512, "disallowed_algorithm")


def test_the_token_type_header_must_be_allowed(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy(token_types=("at+jwt",))
    _refused(policy, issuer.token(typ="JWT"), "wrong_token_type")
    _refused(policy, issuer.token(typ="id_token+jwt"), "wrong_token_type")
    token = jwt.encode(issuer.claims(), issuer.private["rsa-1"], algorithm="RS256", headers={"kid": "rsa-1"})
    assert "typ" in jwt.get_unverified_header(token)  # PyJWT adds typ=JWT by default
    _refused(policy, token, "wrong_token_type")
    assert policy.verify(issuer.token(typ="at+jwt")).subject == "user-1"


def test_missing_required_scopes_are_insufficient_scope(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy(required_scopes=("agent.run", "agent.admin"))
    err = _refused(policy, issuer.token(), "insufficient_scope")
    assert err.details == {"required_scopes": ["agent.admin"]}
    _refused(policy, issuer.token(scope="agent.runner agent.admin"), "insufficient_scope")
    _refused(policy, issuer.token(scope=None), "insufficient_scope")
    assert policy.verify(issuer.token(scope=None, scp=["agent.admin", "agent.run"])).subject == "user-1"
    assert policy.verify(issuer.token(scope="agent.admin  agent.run")).subject == "user-1"


def test_malformed_tokens_are_invalid_token(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy()
    good = issuer.token()
    for bad in (None, 42, b"bytes", "", "a.b", "a.b.c.d", good + " ", "x" * 20000, "!!.!!.!!"):
        _refused(policy, bad, "invalid_token")
    head = _unsigned({"alg": "RS256", "typ": "at+jwt", "kid": "rsa-1", "crit": ["exp"]}, issuer.claims())
    _refused(policy, head + ".c2ln", "invalid_token")
    _refused(policy, _unsigned({"alg": "RS256", "typ": "at+jwt"}, issuer.claims()) + ".c2ln", "invalid_token")


def test_errors_pickle_and_keep_their_reason(issuer: Issuer, make_policy: Make) -> None:
    err = _refused(make_policy(), issuer.token(aud="x"), "wrong_audience")
    again = pickle.loads(pickle.dumps(err))
    assert isinstance(again, AuthError) and again.reason == "wrong_audience"


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"algorithms": ("none",)}, "disallowed_algorithm"),
        ({"algorithms": ("RS256", "HS256")}, "disallowed_algorithm"),
        ({"algorithms": ()}, "invalid_value"),
        ({"issuer": "http://id.example.com"}, "insecure_url"),
        ({"jwks_url": "http://id.example.com/jwks"}, "insecure_url"),
        ({"issuer": "https://user:pw@id.example.com"}, "invalid_value"),
        ({"issuer": "https://id.example.com#frag"}, "invalid_value"),
        ({"issuer": "id.example.com"}, "invalid_value"),
        ({"allow_http_loopback": False}, "insecure_url"),
        ({"leeway_s": 3600}, "invalid_value"),
        ({"max_lifetime_s": 0}, "invalid_value"),
        ({"max_lifetime_s": float("nan")}, "invalid_value"),
        ({"required_scopes": ("bad scope\n",)}, "invalid_value"),
        ({"audience": ""}, "invalid_value"),
        ({"token_types": ()}, "invalid_value"),
        ({"jwks_timeout_s": 0}, "invalid_value"),
    ],
)
def test_a_bad_policy_is_refused_at_construction(make_policy: Make, options: dict[str, Any], reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_policy(**options)
    assert caught.value.reason == reason


def test_http_is_accepted_only_for_loopback_hosts_with_the_flag(issuer: Issuer) -> None:
    for host in ("127.0.0.1", "localhost", "[::1]"):
        JwtPolicy(issuer=f"http://{host}:1", audience="a", jwks_url=f"http://{host}:1/j", allow_http_loopback=True)
    with pytest.raises(ConfigError) as caught:
        JwtPolicy(issuer="http://10.0.0.1", audience="a", jwks_url="http://10.0.0.1/j", allow_http_loopback=True)
    assert caught.value.reason == "insecure_url"


_segment = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", max_size=60)
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_header = st.fixed_dictionaries(
    {},
    optional={
        "alg": st.sampled_from(["RS256", "ES256", "none", "HS256", "PS256"]) | st.text(max_size=8),
        "typ": st.sampled_from(["at+jwt", "JWT"]) | _json_value,
        "kid": st.sampled_from(["rsa-1", "ec-1"]) | _json_value,
        "crit": _json_value,
    },
)


@st.composite
def _token_like(draw: st.DrawFn) -> str:
    header = draw(_header)
    payload = draw(_json_value)
    text = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(payload).encode())
    return text + "." + draw(_segment)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.text(max_size=300) | _token_like() | st.binary(max_size=64) | st.integers())
def test_any_input_is_refused_with_the_policy_error_class(make_policy: Make, token: Any) -> None:
    policy = make_policy()
    with pytest.raises(AuthError) as caught:
        policy.verify(token)
    assert caught.value.reason in {
        "invalid_token",
        "disallowed_algorithm",
        "wrong_token_type",
        "unknown_key",
        "jwks_unavailable",
    }

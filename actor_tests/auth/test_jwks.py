"""JwksCache against the test issuer's real HTTP endpoint: TTL, rotation, a bounded refresh rate under a kid flood,
single-flight fetches, and a down, failing, slow, trickling or oversized endpoint refused within the deadline while
the keys already held keep working."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from actor_tests.auth.conftest import FakeClock, Issuer
from adk_actors.auth import JwksCache, JwtPolicy
from adk_actors.errors import AuthError

MakeCache = Callable[..., tuple[JwksCache, FakeClock]]
Make = Callable[..., JwtPolicy]


def _reason(call: Callable[[], Any]) -> AuthError:
    with pytest.raises(AuthError) as caught:
        call()
    return caught.value


def test_keys_are_cached_for_the_ttl_then_refetched(issuer: Issuer, cache_with_clock: MakeCache) -> None:
    cache, clock = cache_with_clock(ttl_s=300.0)
    assert cache.key("rsa-1").kty == "RSA" and cache.key("ec-1").crv == "P-256"
    assert issuer.requests == 1
    clock.advance(299.0)
    cache.key("rsa-1")
    assert issuer.requests == 1
    clock.advance(2.0)
    cache.key("rsa-1")
    assert issuer.requests == 2


def test_an_unknown_kid_refetches_once_per_interval_and_rotation_is_found(
    issuer: Issuer, cache_with_clock: MakeCache
) -> None:
    cache, clock = cache_with_clock(min_refresh_interval_s=30.0)
    cache.key("rsa-1")
    issuer.add_key("rsa-2")  # rotation at the issuer
    assert _reason(lambda: cache.key("rsa-2")).reason == "unknown_key"  # inside the interval: no fetch
    assert issuer.requests == 1
    clock.advance(30.0)
    assert cache.key("rsa-2").kty == "RSA"  # the refetch finds the new key
    assert issuer.requests == 2
    issuer.retire("rsa-1")
    clock.advance(301.0)  # stale: the next lookup refetches and the retired key is gone
    assert _reason(lambda: cache.key("rsa-1")).reason == "unknown_key"
    assert cache.kids == {"rsa-2", "ec-1"}


def test_a_flood_of_random_kids_makes_one_fetch_per_interval(issuer: Issuer, cache_with_clock: MakeCache) -> None:
    cache, clock = cache_with_clock(min_refresh_interval_s=30.0)
    cache.key("rsa-1")
    for _ in range(200):
        assert _reason(lambda: cache.key(secrets.token_hex(8))).reason == "unknown_key"
    assert issuer.requests == 1
    clock.advance(30.0)
    for _ in range(200):
        _reason(lambda: cache.key(secrets.token_hex(8)))
    assert issuer.requests == 2


def test_concurrent_callers_share_one_fetch(issuer: Issuer, cache_with_clock: MakeCache) -> None:
    issuer.mode = "delay"  # the fetch takes a while, so every thread arrives while it is in flight
    cache, _ = cache_with_clock(timeout_s=5.0)
    start = threading.Barrier(16)
    found: list[str] = []

    def lookup() -> None:
        start.wait(5.0)
        found.append(cache.key("rsa-1").kid)

    threads = [threading.Thread(target=lookup) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30.0)
    assert found == ["rsa-1"] * 16
    assert issuer.requests == 1 and cache.fetch_count == 1


def test_a_down_endpoint_is_jwks_unavailable_and_cached_keys_keep_working(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy(min_refresh_interval_s=0.0, jwks_timeout_s=2.0)
    assert policy.verify(issuer.token("rsa-1")).subject == "user-1"
    issuer.add_key("rsa-2")
    token2 = issuer.token("rsa-2")
    issuer.stop()
    began = time.monotonic()
    err = _reason(lambda: policy.verify(token2))
    assert err.reason == "jwks_unavailable" and err.details == {"cause": "connection_failed"}
    assert time.monotonic() - began < 2.0
    assert policy.verify(issuer.token("rsa-1")).subject == "user-1"


def test_a_cold_cache_with_a_down_endpoint_is_jwks_unavailable(issuer: Issuer, make_policy: Make) -> None:
    policy = make_policy()
    issuer.stop()
    assert _reason(lambda: policy.verify(issuer.token())).reason == "jwks_unavailable"


def test_an_error_status_keeps_the_old_keys(issuer: Issuer, cache_with_clock: MakeCache) -> None:
    cache, clock = cache_with_clock(ttl_s=10.0, min_refresh_interval_s=0.0)
    cache.key("rsa-1")
    issuer.mode = "error"
    clock.advance(11.0)  # stale: the refetch fails, the held key is still used
    assert cache.key("rsa-1").kid == "rsa-1"
    err = _reason(lambda: cache.key("new"))
    assert err.reason == "jwks_unavailable" and err.details == {"cause": "http_status", "status": 500}
    issuer.mode = "ok"
    assert _reason(lambda: cache.key("new")).reason == "unknown_key"  # the endpoint is back: a real answer


@pytest.mark.parametrize("mode", ["slow", "trickle"])
def test_a_slow_endpoint_is_jwks_unavailable_within_the_timeout(issuer: Issuer, make_policy: Make, mode: str) -> None:
    issuer.mode = mode
    policy = make_policy(jwks_timeout_s=0.5)
    began = time.monotonic()
    err = _reason(lambda: policy.verify(issuer.token()))
    elapsed = time.monotonic() - began
    assert err.reason == "jwks_unavailable" and err.details["cause"] == "timeout"
    assert elapsed < 1.5, elapsed


def test_an_oversized_response_is_refused(issuer: Issuer, make_policy: Make) -> None:
    issuer.mode = "huge"
    policy = make_policy(jwks_max_bytes=64 * 1024)
    err = _reason(lambda: policy.verify(issuer.token()))
    assert err.reason == "jwks_unavailable" and err.details == {"cause": "too_large", "max_bytes": 65536}


def test_unusable_keys_are_skipped_and_a_set_without_usable_keys_is_a_failed_fetch(
    issuer: Issuer, cache_with_clock: MakeCache
) -> None:
    good = issuer.jwks()["keys"][0]
    private = {**issuer.jwks()["keys"][1], "kid": "private", "d": "AAAA"}
    unusable = [
        {"kty": "oct", "kid": "sym", "k": "c2VjcmV0"},
        {**good, "kid": "enc", "use": "enc"},
        {k: v for k, v in good.items() if k != "kid"},
        "not a key",
        {"kty": "EC", "kid": "bad", "crv": "P-256", "x": "AA", "y": "AA"},
        private,
    ]
    issuer.body = json.dumps({"keys": [*unusable, good, {**good, "n": "AQAB"}]}).encode()
    cache, clock = cache_with_clock(min_refresh_interval_s=0.0)
    assert cache.key("rsa-1").kty == "RSA"
    assert cache.kids == {"rsa-1"}  # the duplicate kid kept the first key
    for body in (b'{"keys": []}', b"[]", b"not json", b'{"keys": [NaN]}', json.dumps({"keys": unusable}).encode()):
        issuer.body = body
        clock.advance(1000.0)
        assert cache.key("rsa-1").kid == "rsa-1"  # the failed fetch kept the old keys
        assert _reason(lambda: cache.key("other")).reason == "jwks_unavailable"

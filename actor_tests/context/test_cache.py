"""The provider prefix cache against the real emulator, cross-checked with the official google-genai SDK listing the
provider's caches: reuse across sessions of one scope, isolation of scopes, TTL, invalidation, the deadline race,
failure modes, a stale cache, concurrency, and strict option validation (docs/CONTEXT.md)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google import genai
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.runner.conftest import config_for, until
from adk_actors import Runner, telemetry
from adk_actors.agents.turn.options import runner_options
from adk_actors.context.cache import (
    COUNTERS,
    CREATE_COOLDOWN_S,
    CacheDecision,
    CacheTable,
    ContextCache,
    context_cache_options,
    prefix_fingerprint,
    scope_fingerprint,
)
from adk_actors.emulator import Emulator
from adk_actors.errors import AdkError, AgentError, ConfigError
from adk_actors.models.gemini.caches import cache_prefix
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService

APP = "cache_tests"
MODEL = "gemini-3.1-flash-lite"
INSTRUCTIONS = "You are the archive clerk. " + " ".join(
    f"Rule {i}: keep record {i} filed under shelf {i % 7}." for i in range(60)
)
"""About 2,900 characters: ~730 estimated tokens, above the lowered minimums below."""
MIN_TOKENS = 256


@pytest.fixture
def cache(system: ActorSystemHandle) -> Iterator[ContextCache]:
    handle = ContextCache.start(system=system, name=f"cache-{uuid.uuid4().hex[:8]}")
    yield handle
    handle.stop(system=system)


@pytest.fixture
def lowered(emu: Emulator) -> Emulator:
    emu.engine.min_cache_tokens = MIN_TOKENS
    return emu


@pytest.fixture
def sdk(emu: Emulator) -> genai.Client:
    return genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=emu.base_url, api_version="v1beta"))


def provider_caches(sdk: genai.Client) -> list[str]:
    """The names of the caches the provider holds, as the official SDK lists them."""
    return sorted(str(c.name) for c in sdk.caches.list())


def generate_requests(emu: Emulator) -> list[dict[str, Any]]:
    return [r for r in emu.requests if r["path"].endswith(":generateContent")]


def options(cache: ContextCache, **extra: Any) -> dict[str, Any]:
    return {"cache": cache, "min_prefix_tokens": MIN_TOKENS, **extra}


def scope_of(user: str, model: str = MODEL, policy: dict[str, Any] | None = None) -> str:
    return scope_fingerprint(APP, user, model, policy or {})


def prefix_for(emu: Emulator, text: str = INSTRUCTIONS) -> tuple[dict[str, Any], dict[str, Any]]:
    config = config_for(emu, model=MODEL, instructions=text)
    return cache_prefix(config, [], []), config


# ---- through the Runner ------------------------------------------------------------------------------------------


def test_two_sessions_of_one_user_share_one_created_cache_and_report_cached_tokens(
    system: ActorSystemHandle,
    lowered: Emulator,
    svc: ActorSessionService,
    agent_factory: Callable[..., str],
    cache: ContextCache,
    sdk: genai.Client,
) -> None:
    agent = agent_factory("Cached", model=MODEL, instructions=INSTRUCTIONS)
    runner = Runner(agent, APP, svc, system=system, context_cache=options(cache))
    with telemetry.attach("agent.model.stop", "agent.context.cache", system=system) as sub:
        first = runner.run("u1", "s-one", "Where is record 3?")
        second = runner.run("u1", "s-two", "Where is record 4?")
        seen = [sub.next(10) for _ in range(4)]
    assert (first, second) == ("You said: Where is record 3?", "You said: Where is record 4?")
    assert cache.stats(scope_of("u1"), system=system) == {
        **dict.fromkeys(COUNTERS, 0),
        "entries": 1,
        "creating": 0,
        "misses": 1,
        "creates": 1,
        "hits": 1,
    }
    names = provider_caches(sdk)
    assert len(names) == 1
    requests = generate_requests(lowered)
    assert [r["body"].get("cachedContent") for r in requests] == names * 2
    assert not any("systemInstruction" in r["body"] or "tools" in r["body"] for r in requests)
    outcomes = [e.metadata["outcome"] for e in seen if e.name == "agent.context.cache"]
    assert outcomes == ["created", "hit"]
    stops = [e.measurements for e in seen if e.name == "agent.model.stop"]
    assert len(stops) == 2
    for usage in stops:  # the emulator counts the cached prefix inside the prompt, as Gemini does
        assert usage["cached_tokens"] >= MIN_TOKENS
        assert usage["input_tokens"] > usage["cached_tokens"]
        assert usage["total_tokens"] >= usage["input_tokens"] + usage["output_tokens"]  # plus thoughts


def test_a_streamed_call_uses_the_cache_too(
    system: ActorSystemHandle,
    lowered: Emulator,
    svc: ActorSessionService,
    agent_factory: Callable[..., str],
    cache: ContextCache,
) -> None:
    agent = agent_factory("Streamed", model=MODEL, instructions=INSTRUCTIONS)
    runner = Runner(agent, APP, svc, system=system, streaming_mode="text", context_cache=options(cache))
    assert [runner.run("u1", s, "stream please") for s in ("a", "b")] == ["You said: stream please"] * 2
    streamed = [r for r in lowered.requests if r["path"].endswith(":streamGenerateContent")]
    assert len(streamed) == 2 and all(r["body"]["cachedContent"] for r in streamed)
    assert all("systemInstruction" not in r["body"] for r in streamed)
    stats = cache.stats(scope_of("u1"), system=system)
    assert (stats["creates"], stats["hits"]) == (1, 1)


def test_different_users_and_models_never_share_a_cache(
    system: ActorSystemHandle,
    lowered: Emulator,
    svc: ActorSessionService,
    agent_factory: Callable[..., str],
    cache: ContextCache,
    sdk: genai.Client,
) -> None:
    lite = agent_factory("Lite", model=MODEL, instructions=INSTRUCTIONS)
    flash = agent_factory("Flash", model="gemini-2.5-flash", instructions=INSTRUCTIONS)
    Runner(lite, APP, svc, system=system, context_cache=options(cache)).run("u1", "a", "hello")
    Runner(lite, APP, svc, system=system, context_cache=options(cache)).run("u2", "b", "hello")
    Runner(flash, APP, svc, system=system, context_cache=options(cache)).run("u1", "c", "hello")
    policy = {"purpose": "audit"}
    Runner(lite, APP, svc, system=system, context_cache=options(cache, policy=policy)).run("u1", "d", "hello")
    scopes = [scope_of("u1"), scope_of("u2"), scope_of("u1", "gemini-2.5-flash"), scope_of("u1", policy=policy)]
    assert len(set(scopes)) == 4
    assert [cache.stats(s, system=system)["creates"] for s in scopes] == [1, 1, 1, 1]
    assert cache.stats(system=system)["hits"] == 0
    assert len(provider_caches(sdk)) == 4
    used = [r["body"]["cachedContent"] for r in generate_requests(lowered)]
    assert len(set(used)) == 4


def test_failure_mode_bypass_sends_the_full_request_and_fail_fails_the_turn_with_structural_details(
    system: ActorSystemHandle,
    emu: Emulator,
    svc: ActorSessionService,
    agent_factory: Callable[..., str],
    cache: ContextCache,
    sdk: genai.Client,
) -> None:
    emu.engine.min_cache_tokens = 10**6  # every create is refused: "Cached content is too small" (400)
    agent = agent_factory("Refused", model=MODEL, instructions=INSTRUCTIONS)
    bypass = Runner(agent, APP, svc, system=system, context_cache=options(cache))
    assert bypass.run("u1", "s1", "hello") == "You said: hello"
    (request,) = generate_requests(emu)
    assert "cachedContent" not in request["body"] and "Rule 59" in str(request["body"]["systemInstruction"])
    fail = Runner(agent, APP, svc, system=system, context_cache=options(cache, failure_mode="fail"))
    with pytest.raises(AgentError) as info:
        fail.run("u2", "s2", "hello")
    assert info.value.reason == "context_cache_failed"
    assert info.value.details == {"cause": "create_failed", "status": 400, "provider_reason": "invalid_argument"}
    assert len(generate_requests(emu)) == 1  # the failed turn never reached the model
    # u1's prefix failed a moment ago: its next turn bypasses without asking the provider again (the cooldown)
    creates = len([r for r in emu.requests if r["path"].endswith("cachedContents")])
    assert creates == 2  # one refused create per scope so far
    assert bypass.run("u1", "s3", "again") == "You said: again"
    assert len([r for r in emu.requests if r["path"].endswith("cachedContents")]) == creates
    for user, bypasses in (("u1", 2), ("u2", 1)):
        stats = cache.stats(scope_of(user), system=system)
        assert (stats["create_failures"], stats["bypasses"], stats["entries"]) == (1, bypasses, 0)
    assert provider_caches(sdk) == []


def test_a_stopped_cache_actor_is_bypassed_or_fails_the_turn(
    system: ActorSystemHandle,
    lowered: Emulator,
    svc: ActorSessionService,
    agent_factory: Callable[..., str],
) -> None:
    gone = ContextCache(name=f"cache-missing-{uuid.uuid4().hex[:6]}")
    agent = agent_factory("NoCache", model=MODEL, instructions=INSTRUCTIONS)
    bypass = Runner(agent, APP, svc, system=system, context_cache=options(gone, acquire_timeout_ms=400))
    assert bypass.run("u1", "s1", "hi") == "You said: hi"
    fail = Runner(
        agent, APP, svc, system=system, context_cache=options(gone, acquire_timeout_ms=400, failure_mode="fail")
    )
    with pytest.raises(AgentError) as info:
        fail.run("u1", "s2", "hi")
    assert info.value.reason == "context_cache_failed"


def test_a_cache_the_provider_forgot_is_invalidated_and_the_call_retried_uncached_once(
    system: ActorSystemHandle,
    lowered: Emulator,
    svc: ActorSessionService,
    agent_factory: Callable[..., str],
    cache: ContextCache,
    sdk: genai.Client,
) -> None:
    agent = agent_factory("Stale", model=MODEL, instructions=INSTRUCTIONS)
    runner = Runner(agent, APP, svc, system=system, context_cache=options(cache))
    runner.run("u1", "s1", "one")
    (name,) = provider_caches(sdk)
    sdk.caches.delete(name=name)  # behind the cache's back: the next use is a 403
    assert runner.run("u1", "s1", "two") == "You said: two"
    bodies = [r["body"] for r in generate_requests(lowered)]
    statuses = [r["status"] for r in generate_requests(lowered)]
    assert statuses == [200, 403, 200]
    assert bodies[1]["cachedContent"] == name and "cachedContent" not in bodies[2]
    assert "systemInstruction" in bodies[2]
    assert cache.stats(scope_of("u1"), system=system)["invalidations"] == 1
    runner.run("u1", "s1", "three")  # a fresh create replaces the forgotten entry
    assert cache.stats(scope_of("u1"), system=system)["creates"] == 2
    assert len(provider_caches(sdk)) == 1


# ---- through the client ------------------------------------------------------------------------------------------


def test_ttl_expiry_recreates_the_cache(
    system: ActorSystemHandle, lowered: Emulator, cache: ContextCache, sdk: genai.Client
) -> None:
    prefix, config = prefix_for(lowered)
    scope = scope_of("u-ttl")

    def acquire() -> CacheDecision:
        return cache.acquire(scope, prefix, time.monotonic() + 10, config=config, ttl_ms=1000, system=system)

    first = acquire()
    assert first.outcome == "created" and acquire() == CacheDecision(outcome="hit", name=first.name)
    # Each check is a real acquisition: hits until the entry's local expiry (a margin before the provider's).
    renewed = until(lambda: (d := acquire()).outcome == "created" and d, 5.0, "a new create after the TTL")
    assert renewed.name != first.name
    stats = cache.stats(scope, system=system)
    assert (stats["creates"], stats["expirations"]) == (2, 1)
    # The provider drops the expired one by itself, a margin after the cache stopped handing it out.
    until(lambda: first.name not in provider_caches(sdk), 5.0, "the provider's expiry")


def test_invalidate_drops_every_entry_of_the_scope_and_deletes_its_resources(
    system: ActorSystemHandle, lowered: Emulator, cache: ContextCache, sdk: genai.Client
) -> None:
    config = config_for(lowered, model=MODEL)
    scope, other = scope_of("u-inv"), scope_of("u-keep")
    deadline = time.monotonic() + 10
    for text in (INSTRUCTIONS, INSTRUCTIONS + " Extra rule."):
        prefix = cache_prefix({**config, "instructions": text}, [], [])
        assert cache.acquire(scope, prefix, deadline, config=config, system=system).outcome == "created"
    prefix, _ = prefix_for(lowered)
    kept = cache.acquire(other, prefix, deadline, config=config, system=system)
    assert len(provider_caches(sdk)) == 3
    assert cache.invalidate(scope, system=system) == 2
    assert cache.stats(scope, system=system)["entries"] == 0
    until(lambda: provider_caches(sdk) == [kept.name], 5.0, "the invalidated resources deleted")
    assert cache.acquire(scope, prefix, deadline, config=config, system=system).outcome == "created"
    assert cache.invalidate(scope_of("nobody"), system=system) == 0


def test_a_waiter_whose_deadline_passed_during_creation_gets_a_bypass_and_the_orphan_is_deleted(
    system: ActorSystemHandle, lowered: Emulator, cache: ContextCache, sdk: genai.Client
) -> None:
    prefix, config = prefix_for(lowered)
    scope = scope_of("u-race")
    lowered.latency_ms = 600  # the create outlives the caller's deadline
    decision = cache.acquire(scope, prefix, time.monotonic() + 0.2, config=config, system=system)
    assert decision == CacheDecision(outcome="bypass", reason="deadline")
    stats = until(
        lambda: (s := cache.stats(scope, system=system))["orphans_deleted"] == 1 and s, 10.0, "the orphan deleted"
    )
    assert (stats["creates"], stats["expired_waiters"], stats["entries"]) == (1, 1, 0)
    lowered.latency_ms = 0
    creates = [r for r in lowered.requests if r["method"] == "POST" and r["path"].endswith("/cachedContents")]
    deletes = [r for r in lowered.requests if r["method"] == "DELETE"]
    assert (len(creates), len(deletes)) == (1, 1) and creates[0]["status"] == 200
    assert provider_caches(sdk) == []


def test_invalidating_a_scope_during_a_create_bypasses_its_waiter_and_deletes_the_new_resource(
    system: ActorSystemHandle, lowered: Emulator, cache: ContextCache, sdk: genai.Client
) -> None:
    prefix, config = prefix_for(lowered)
    scope = scope_of("u-inflight")
    lowered.latency_ms = 500
    result: list[CacheDecision] = []
    waiter = threading.Thread(
        target=lambda: result.append(cache.acquire(scope, prefix, time.monotonic() + 10, config=config, system=system))
    )
    waiter.start()
    until(lambda: cache.stats(scope, system=system)["creating"] == 1, 5.0, "the create in flight")
    assert cache.invalidate(scope, system=system) == 1
    waiter.join(10)
    assert result == [CacheDecision(outcome="bypass", reason="invalidated")]
    until(lambda: cache.stats(scope, system=system)["orphans_deleted"] == 1, 10.0, "the orphan deleted")
    lowered.latency_ms = 0
    assert provider_caches(sdk) == [] and cache.stats(scope, system=system)["entries"] == 0


def test_128_concurrent_acquisitions_over_four_scopes_make_four_creates(
    system: ActorSystemHandle, lowered: Emulator, cache: ContextCache, sdk: genai.Client
) -> None:
    prefix, config = prefix_for(lowered)
    scopes = [scope_of(f"u-{i}") for i in range(4)]
    lowered.latency_ms = 300  # the creates are in flight while the others arrive
    results: list[CacheDecision] = [CacheDecision(outcome="none")] * 128
    start = threading.Barrier(128)

    def worker(i: int) -> None:
        start.wait()
        results[i] = cache.acquire(scopes[i % 4], prefix, time.monotonic() + 20, config=config, system=system)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(128)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    lowered.latency_ms = 0
    assert {r.outcome for r in results} <= {"created", "hit"} and all(r.name for r in results)
    for i, scope in enumerate(scopes):
        assert len({r.name for r in results[i::4]}) == 1
        stats = cache.stats(scope, system=system)
        assert (stats["creates"], stats["misses"], stats["hits"]) == (1, 1, 31)
    assert len(provider_caches(sdk)) == 4


# ---- the pure table (fake clock) ---------------------------------------------------------------------------------


class _Waiter:
    def __init__(self, deadline: float) -> None:
        self.deadline = deadline


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_table_expires_entries_a_margin_before_the_provider_and_evicts_the_least_recently_used() -> None:
    clock = _Clock()
    table: CacheTable[_Waiter] = CacheTable(max_entries=2, clock=clock)
    for key in ("a", "b"):
        assert type(table.lookup("s", key, _Waiter(200), {})).__name__ == "Create"
        assert table.created("s", key, f"cachedContents/{key}", 100.0).waiters
    assert type(table.lookup("s", "a", _Waiter(200), {})).__name__ == "Hit"  # "a" is now the most recent
    table.lookup("s", "c", _Waiter(200), {})
    evicted = table.created("s", "c", "cachedContents/c", 100.0).evicted
    assert [e.name for e in evicted] == ["cachedContents/b"]
    clock.now += 94.9  # the margin is min(5 s, ttl / 10)
    assert type(table.lookup("s", "a", _Waiter(300), {})).__name__ == "Hit"
    clock.now += 0.2
    assert type(table.lookup("s", "a", _Waiter(300), {})).__name__ == "Create"
    assert table.stats("s")["expirations"] == 1 and table.stats("s")["evictions"] == 1


def test_table_rechecks_waiter_deadlines_and_orphans_a_create_of_an_invalidated_scope() -> None:
    clock = _Clock()
    table: CacheTable[_Waiter] = CacheTable(clock=clock)
    early, late = _Waiter(101), _Waiter(150)
    table.lookup("s", "k", early, {})
    assert type(table.lookup("s", "k", late, {})).__name__ == "Wait"
    clock.now = 120
    installed = table.created("s", "k", "cachedContents/x", 3600)
    assert installed.waiters == [late] and not installed.orphan
    waiting = _Waiter(200)
    table.lookup("t", "k", waiting, {})
    assert table.invalidate("t") == (1, [])
    orphaned = table.created("t", "k", "cachedContents/y", 3600)
    assert orphaned.orphan and orphaned.waiters == [] and orphaned.stale == [waiting]
    assert table.stats("t")["entries"] == 0 and table.stats("t")["bypasses"] == 1
    table.lookup("u", "k", _Waiter(110), {})
    assert table.created("u", "k", "cachedContents/z", 3600).orphan  # every waiter gone
    assert table.stats(None)["expired_waiters"] == 2


def test_fingerprints_are_stable_sha256_of_canonical_json() -> None:
    a = scope_fingerprint("app", "u", "m", {"x": 1, "y": [1, 2]})
    assert a == scope_fingerprint("app", "u", "m", {"y": [1, 2], "x": 1}) and len(a) == 64
    assert a != scope_fingerprint("app", "u", "m", {"x": 2}) != scope_fingerprint("app", "v", "m", {"x": 1})
    assert prefix_fingerprint({"b": 1, "a": 2}) == prefix_fingerprint({"a": 2, "b": 1})


# ---- option validation -------------------------------------------------------------------------------------------

_HANDLE = ContextCache(name="adk.context_cache")
_hostile = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(["ttl_ms", "min_prefix_tokens", "failure_mode", "policy", "acquire_timeout_ms", "cache"]),
    value=_hostile,
)
def test_hostile_context_cache_values_are_refused_with_config_error(key: str, value: Any) -> None:
    try:
        parsed = context_cache_options({"cache": _HANDLE, key: value})
    except ConfigError as err:
        assert err.reason == "invalid_value" and err.details["key"] == f"context_cache.{key}"
        return
    assert parsed is not None  # accepted only when in range
    if key in ("ttl_ms", "min_prefix_tokens", "acquire_timeout_ms"):
        assert isinstance(value, int) and not isinstance(value, bool) and getattr(parsed, key) == value
    elif key == "failure_mode":
        assert value in ("bypass", "fail")
    elif key == "policy":
        assert isinstance(value, dict) and parsed.policy == value


@settings(max_examples=60, deadline=None)
@given(value=st.one_of(_hostile, st.dictionaries(st.text(max_size=8), _hostile, max_size=3)))
def test_context_cache_option_shapes_are_validated_by_runner_options(value: Any) -> None:
    try:
        runner_options(context_cache=value)
    except ConfigError as err:
        assert err.reason in ("invalid_value", "unknown_key")
        assert str(err.details["key"]).startswith("context_cache")
        return
    assert value is None


def test_policy_too_large_or_not_json_is_refused() -> None:
    for policy in ({"big": "x" * 5000}, {"bad": float("nan")}, {1: "int key"}, {"nested": {"v": object()}}):
        with pytest.raises(ConfigError) as info:
            context_cache_options({"cache": _HANDLE, "policy": policy})
        assert info.value.details["key"] == "context_cache.policy"
    with pytest.raises(AdkError) as unknown:
        runner_options(context_cache={"cache": _HANDLE, "ttl": 5})
    assert unknown.value.reason == "unknown_key" and unknown.value.details["key"] == "context_cache.ttl"


def test_table_bypasses_without_trying_again_for_a_while_after_a_failed_create() -> None:
    clock = _Clock()
    table: CacheTable[_Waiter] = CacheTable(clock=clock)
    table.lookup("s", "k", _Waiter(200), {})
    assert len(table.failed("s", "k")) == 1
    refused = table.lookup("s", "k", _Waiter(200), {})
    assert type(refused).__name__ == "Bypass" and refused.reason == "create_cooling_down"
    assert type(table.lookup("s", "other", _Waiter(200), {})).__name__ == "Create"  # another prefix is not held back
    clock.now += CREATE_COOLDOWN_S
    assert type(table.lookup("s", "k", _Waiter(300), {})).__name__ == "Create"
    table.failed("s", "k")
    table.invalidate("s")  # an operator's invalidation clears the cooldown
    assert type(table.lookup("s", "k", _Waiter(300), {})).__name__ == "Create"
    assert table.stats("s")["create_failures"] == 2 and table.stats("s")["bypasses"] == 3  # 1 waiter per failure

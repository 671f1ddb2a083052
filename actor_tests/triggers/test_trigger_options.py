"""Pure trigger logic: strict options, hostile deliveries, sessions, backoff with jitter, the deadline rule."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors import ConfigError, TriggerError
from adk_actors.triggers.options import (
    Delivery,
    RetryPolicy,
    TriggerOptions,
    backoff_ms,
    check_delivery,
    event_timeout_ms,
    retryable,
    session_for,
    trigger_options,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4)
    ),
    max_leaves=6,
)


class HostileMapping(Mapping[str, Any]):
    """A mapping whose iteration raises (a delivery decoded by a buggy adapter)."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("boom")

    def __len__(self) -> int:
        return 1


deliveries = st.one_of(
    json_values,
    st.dictionaries(
        st.sampled_from(["payload", "idempotency_key", "metadata", "timeout_ms", "session", "extra"]),
        json_values,
        max_size=6,
    ),
    st.builds(
        dict,
        payload=json_values,
        idempotency_key=st.one_of(st.text(max_size=300), json_values),
        metadata=json_values,
        timeout_ms=json_values,
    ),
    st.just(HostileMapping()),
    st.builds(dict, payload=st.just(HostileMapping()), idempotency_key=st.just("k")),
)


@settings(max_examples=120, deadline=None)
@given(delivery=deliveries, explicit=st.booleans())
def test_hostile_deliveries_raise_only_trigger_errors_with_a_key(delivery: Any, explicit: bool) -> None:
    options = trigger_options({"session_policy": {"mode": "explicit"}} if explicit else None)
    try:
        checked = check_delivery(delivery, options)
    except TriggerError as err:
        assert err.reason in ("invalid_delivery", "event_too_large")
        assert isinstance(err.details.get("key"), str)
        return
    assert isinstance(checked, Delivery) and 0 < len(checked.idempotency_key) <= 256
    assert isinstance(checked.payload, str | dict) and checked.size <= options.max_event_bytes


def test_a_valid_delivery_is_copied_and_sized() -> None:
    checked = check_delivery(
        {"payload": {"k": [1, 2]}, "idempotency_key": "mailbox:42:v1", "metadata": {"source": "q"}, "timeout_ms": 50}
    )
    assert checked.payload == '{"k": [1, 2]}' and checked.metadata == {"source": "q"} and checked.timeout_ms == 50
    content = {"role": "user", "parts": [{"text": "hi"}]}
    assert check_delivery({"payload": content, "idempotency_key": "k"}).payload == content
    with pytest.raises(TriggerError) as big:
        check_delivery({"payload": "x" * 11, "idempotency_key": "k"}, trigger_options({"max_event_bytes": 10}))
    assert big.value.reason == "event_too_large"


def test_the_session_key_follows_the_session_policy() -> None:
    explicit = trigger_options({"session_policy": {"mode": "explicit"}})
    with pytest.raises(TriggerError) as missing:
        check_delivery({"payload": "x", "idempotency_key": "k"}, explicit)
    assert missing.value.details == {"key": "session", "rule": "missing"}
    with pytest.raises(TriggerError) as refused:
        check_delivery(
            {"payload": "x", "idempotency_key": "k", "session": {"user_id": "u", "session_id": "s"}},
            trigger_options(None),
        )
    assert refused.value.details["rule"] == "not_explicit_policy"
    d = check_delivery(
        {"payload": "x", "idempotency_key": "k", "session": {"user_id": "u", "session_id": "s"}}, explicit
    )
    assert session_for(explicit.session_policy, d) == ("u", "s")
    per_event = trigger_options({"session_policy": {"user_id": "bg", "prefix": "inbox-"}})
    one = session_for(per_event.session_policy, check_delivery({"payload": "x", "idempotency_key": "k1"}))
    assert one == session_for(per_event.session_policy, check_delivery({"payload": "y", "idempotency_key": "k1"}))
    assert one[0] == "bg" and one[1].startswith("inbox-")
    assert one != session_for(per_event.session_policy, check_delivery({"payload": "x", "idempotency_key": "k2"}))
    shared = trigger_options({"session_policy": {"mode": "shared", "user_id": "u", "session_id": "all"}})
    assert session_for(shared.session_policy, d) == ("u", "all")


@pytest.mark.parametrize(
    ("options", "key", "reason"),
    [
        ({"max_queue": 0}, "max_queue", "invalid_value"),
        ({"max_concurrency": True}, "max_concurrency", "invalid_value"),
        ({"nope": 1}, "options.nope", "unknown_key"),
        ({"retry": {"jitter": "half"}}, "retry.jitter", "invalid_value"),
        ({"retry": {"attempts": 2}}, "retry.attempts", "unknown_key"),
        ({"retry": {"initial_delay_ms": 10, "max_delay_ms": 5}}, "retry.max_delay_ms", "invalid_value"),
        ({"session_policy": {"mode": "shared"}}, "session_policy.session_id", "invalid_value"),
        ({"session_policy": {"mode": "sometimes"}}, "session_policy.mode", "invalid_value"),
        ({"durable": {"store": 3}}, "durable.store", "invalid_value"),
        ({"durable": {"url": "x"}}, "durable.url", "unknown_key"),
    ],
)
def test_options_are_strict(options: dict[str, Any], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        trigger_options(options)
    assert (info.value.details["key"], info.value.reason) == (key, reason)


def test_defaults_follow_the_reference() -> None:
    o = trigger_options(None)
    assert (o.max_concurrency, o.max_queue, o.event_timeout_ms, o.retention_ms, o.max_retained) == (
        8, 256, 120000, 300000, 1000)  # fmt: skip
    assert o.max_event_bytes == 1 << 20 and o.retry == RetryPolicy() and o.session_policy.mode == "per_event"
    assert trigger_options(o) == o and isinstance(o, TriggerOptions)


@given(
    failures=st.integers(1, 60),
    initial=st.integers(0, 10000),
    spread=st.integers(0, 10000),
    factor=st.floats(1.0, 100.0),
    seed=st.integers(0, 2**32),
)
def test_backoff_is_full_jitter_under_the_capped_exponential_bound(
    failures: int, initial: int, spread: int, factor: float, seed: int
) -> None:
    policy = RetryPolicy(initial_delay_ms=initial, max_delay_ms=initial + spread, backoff_factor=factor)
    bound = min(initial + spread, initial * factor ** (failures - 1))
    delay = backoff_ms(policy, failures, random.Random(seed))
    assert 0.0 <= delay <= bound + 1e-6
    fixed = backoff_ms(RetryPolicy(initial_delay_ms=initial, max_delay_ms=initial + spread, backoff_factor=factor,
                                   jitter="none"), failures)  # fmt: skip
    assert abs(fixed - bound) <= 1e-6 * max(1.0, bound)


@given(registered=st.integers(1, 10**9), asked=st.one_of(st.none(), st.integers(1, 10**12)))
def test_a_per_event_timeout_only_ever_shortens(registered: int, asked: int | None) -> None:
    options = trigger_options({"event_timeout_ms": registered})
    budget = event_timeout_ms(options, Delivery(payload="x", idempotency_key="k", timeout_ms=asked))
    assert budget <= registered and (asked is None or budget <= asked)


def test_cancellations_denials_and_invalid_input_are_not_retried() -> None:
    assert retryable("http_500", {"type": "ProviderHttpError"})
    assert not retryable("invalid_argument", {"type": "ProviderHttpError"})
    assert not retryable("policy_denied", {})
    assert not retryable("tool_denied", {"type": "PolicyDenied"})

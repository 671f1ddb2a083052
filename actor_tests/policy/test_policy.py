"""Runtime policy: fail-closed selectors, deny wins, byte budgets, audit records without payloads."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.errors import ConfigError
from adk_actors.policy import DEFAULT_MAX_ARGUMENT_BYTES, RuntimePolicy, content_bytes


def test_omitted_allow_allows_nothing_and_deny_wins_over_all() -> None:
    closed = RuntimePolicy.from_config({"id": "p"})
    assert not closed.check_agent("A").allowed and closed.check_agent("A").reason == "not_allowed"
    assert not closed.check_tool("t").allowed
    policy = RuntimePolicy.from_config(
        {"agents": {"allow": "all", "deny": ["Evil"]}, "tools": {"allow": ["get_weather"], "deny": ["get_weather"]}}
    )
    assert policy.check_agent("Good").allowed
    assert policy.check_agent("Evil").reason == "denied"
    assert policy.check_tool("get_weather").reason == "denied"


def test_budgets_measure_utf8_text_and_canonical_json() -> None:
    policy = RuntimePolicy.from_config({"tools": {"allow": "all"}, "max_argument_bytes": 20, "max_content_bytes": 6})
    assert policy.check_arguments("t", {"b": 1, "a": "x"}).size == len('{"a":"x","b":1}')
    assert policy.check_arguments("t", {"a": "x" * 50}).reason == "argument_budget_exceeded"
    assert policy.check_content("input_content", "A", "héllo").size == 6  # UTF-8: é is two bytes
    assert policy.check_content("input_content", "A", "héllo").allowed
    assert policy.check_content("input_content", "A", "héllo!").reason == "content_budget_exceeded"
    assert policy.check_content("tool_result", "t", {"nan": float("nan")}).reason == "invalid_content"
    assert RuntimePolicy.from_config({}).max_argument_bytes == DEFAULT_MAX_ARGUMENT_BYTES


def test_denial_records_carry_ids_and_counts_but_never_the_payload() -> None:
    policy = RuntimePolicy.from_config({"id": "readme-policy", "tools": {"allow": "all"}, "max_argument_bytes": 8})
    secret_arg = {"password": "hunter2-and-more"}
    record = policy.check_arguments("login", secret_arg).record(invocation_id="inv-1", run_id="run-1")
    assert record["outcome"] == "denied" and record["reason"] == "argument_budget_exceeded"
    assert record["policy_id"] == "readme-policy" and len(record["policy_fingerprint"]) == 32
    assert record["invocation_id"] == "inv-1" and record["bytes"] > record["limit_bytes"] == 8
    assert "hunter2" not in json.dumps(record)


def test_the_fingerprint_is_stable_and_changes_with_the_policy() -> None:
    a = RuntimePolicy.from_config({"agents": {"allow": ["B", "A"]}})
    b = RuntimePolicy.from_config({"agents": {"allow": ["A", "B"]}})
    c = RuntimePolicy.from_config({"agents": {"allow": ["A"]}})
    assert a.fingerprint == b.fingerprint != c.fingerprint


@pytest.mark.parametrize(
    "bad",
    [
        {"agentz": {}},
        {"agents": {"allow": "A"}},
        {"agents": {"allow": ["A"], "x": 1}},
        {"max_content_bytes": 0},
        {"max_argument_bytes": True},
        {"id": ""},
        {"tools": ["a"]},
    ],
)
def test_malformed_policies_are_config_errors(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as info:
        RuntimePolicy.from_config(bad)
    assert info.value.reason in ("unknown_key", "invalid_value")


@given(
    st.dictionaries(
        st.text(max_size=12),
        st.one_of(
            st.none(),
            st.integers(),
            st.text(max_size=5),
            st.lists(st.text(max_size=4), max_size=3),
            st.dictionaries(st.text(max_size=6), st.text(max_size=4), max_size=3),
        ),
        max_size=5,
    )
)
def test_from_config_only_ever_raises_config_error(config: dict[str, object]) -> None:
    try:
        RuntimePolicy.from_config(config)
    except ConfigError:
        pass


def test_content_bytes_rejects_non_json() -> None:
    assert content_bytes("abc") == 3
    assert content_bytes({"a": [1, 2]}) == len('{"a":[1,2]}')

"""Model output is untrusted input: hostile answers become typed errors, and every call is bounded in time and size.

Hostile answers come from the real emulator's scripts (NUL, deep nesting, huge payloads, oversize text) and, for
what the emulator cannot send (lone surrogates on the wire, non-object args, unknown part kinds, endless or dripping
bodies, silence), from small hostile peers on 127.0.0.1 (``hostile.py``). No test reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.models.conftest import API_KEY, _client_sockets, open_emulator, user
from actor_tests.models.hostile import hostile
from adk_actors import content, models
from adk_actors.errors import AdkError, ConfigError, ProviderError
from adk_actors.models.gemini import close_sessions
from adk_actors.models.gemini.provider import MAX_RESPONSE_BYTES

HISTORY = [user("hi")]


def _cfg(base_url: str, **extra: Any) -> dict[str, Any]:
    return {"api_key": API_KEY, "base_url": base_url, **extra}


def _calls_rule(args: Any) -> dict[str, Any]:
    return {"rules": [{"when": {}, "respond": {"function_calls": [{"name": "f", "args": args}]}}]}


def _nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# Hostile values the emulator can carry in a function call's args or a text answer.
_hostile_text = st.one_of(
    st.text(min_size=0, max_size=20).map(lambda t: t + "\x00"),
    st.just("x" * (2 * 1024 * 1024)),
)
_hostile_args = st.one_of(
    _hostile_text.map(lambda t: {"a": t}),
    st.integers(min_value=65, max_value=400).map(lambda d: {"a": _nest(d)}),
    st.integers(min_value=1, max_value=3).map(lambda n: {f"k{i}": "y" * (400 * 1024) for i in range(n * 3)}),
    st.dictionaries(st.text(max_size=5).map(lambda k: k + "\x00"), st.integers(), min_size=1, max_size=3),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(args=_hostile_args, streaming=st.booleans())
def test_hostile_function_call_args_are_typed_errors(args: dict[str, Any], streaming: bool) -> None:
    with open_emulator(script=_calls_rule(args), latency_ms=0) as emu:
        with pytest.raises(ProviderError) as info:
            if streaming:
                models.stream_content(_cfg(emu.base_url), HISTORY, [], lambda frame: None)
            else:
                models.generate_response(_cfg(emu.base_url), HISTORY)
    assert info.value.reason == "invalid_model_output"
    assert info.value.details["cause"] in ("invalid_json", "limit_exceeded")
    assert "\x00" not in json.dumps(info.value.details)  # structural only: the rejected value is never echoed


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_hostile_text | st.just("x" * (12 * 1024 * 1024)))
def test_hostile_text_answers_are_typed_errors(text: str) -> None:
    script = {"rules": [{"when": {}, "respond": {"text": text}}]}
    with open_emulator(script=script, latency_ms=0) as emu:
        with pytest.raises(ProviderError) as info:
            models.generate(_cfg(emu.base_url), HISTORY)
    assert info.value.reason == "invalid_model_output"


def test_a_12_mib_text_answer_is_refused_before_anything_holds_it() -> None:
    script = {"rules": [{"when": {}, "respond": {"text": "x" * (12 * 1024 * 1024)}}]}
    with open_emulator(script=script, latency_ms=0) as emu:
        with pytest.raises(ProviderError) as info:
            models.generate_response(_cfg(emu.base_url), HISTORY)
    assert info.value.reason == "invalid_model_output"
    assert info.value.details["cause"] == "limit_exceeded"
    assert info.value.details["limit"] == "max_text_part_bytes"


def _answer(parts: list[Any]) -> bytes:
    return json.dumps(
        {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}, ensure_ascii=True
    ).encode()


_WIRE_HOSTILE = {
    "lone_surrogate_text": (_answer([{"text": "\ud800"}]), "invalid_model_output"),
    "lone_surrogate_arg": (_answer([{"functionCall": {"name": "f", "args": {"a": "\udfff"}}}]), "invalid_model_output"),
    "non_object_args": (_answer([{"functionCall": {"name": "f", "args": [1, 2]}}]), "malformed_response"),
    "string_args": (_answer([{"functionCall": {"name": "f", "args": "rm -rf"}}]), "malformed_response"),
    "bad_function_name": (_answer([{"functionCall": {"name": "f\x00; drop", "args": {}}}]), "invalid_model_output"),
    "unknown_part_kind": (_answer([{"videoMetadata": {"startOffset": "1s"}}]), "unsupported_response_part"),
    "nested_past_parser": (b"[" * 200_000 + b"]" * 200_000, "malformed_response"),
    "usage_with_nul": (
        json.dumps(
            {
                "candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
                "usageMetadata": {"x\u0000": 1},
            }
        ).encode(),
        "invalid_model_output",
    ),
}


@pytest.mark.parametrize("case", sorted(_WIRE_HOSTILE))
def test_hostile_wire_answers_are_typed_errors(case: str) -> None:
    body, reason = _WIRE_HOSTILE[case]
    with hostile("canned", body=body) as peer:
        with pytest.raises(ProviderError) as info:
            models.generate_response(_cfg(peer.base_url), HISTORY)
    assert info.value.reason == reason


def test_every_accepted_answer_is_valid_content() -> None:
    """The counterpart: what does come back holds only what the content model accepts."""
    script = {"rules": [{"when": {}, "respond": {"function_calls": [{"name": "f", "args": {"a": "é\u2028"}}]}}]}
    with open_emulator(script=script, latency_ms=0) as emu:
        response = models.generate_response(_cfg(emu.base_url), HISTORY)
    assert content.validate(response.content).to_dict() == response.content
    assert response.function_calls[0]["args"] == {"a": "é\u2028"}


# ---- time and size bounds -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "call"),
    [
        ("silent", "generate"),
        ("silent", "stream"),
        ("drip_headers", "generate"),
        ("drip_body", "generate"),
        ("endless_sse", "stream"),
    ],
)
def test_request_timeout_bounds_the_whole_call(mode: str, call: str) -> None:
    with hostile(mode, interval=0.05) as peer:  # type: ignore[arg-type]
        cfg = _cfg(peer.base_url, request_timeout=800)
        started = time.monotonic()
        with pytest.raises(ProviderError) as info:
            if call == "generate":
                models.generate(cfg, HISTORY)
            else:
                models.stream(cfg, HISTORY, [], lambda delta: None)
        elapsed = time.monotonic() - started
    assert info.value.reason == "timeout"
    assert 0.7 <= elapsed < 5.0


def test_request_timeout_has_a_finite_default_and_a_bounded_range() -> None:
    from adk_actors.models.gemini.config import DEFAULT_REQUEST_TIMEOUT_S, parse_config

    assert parse_config({}).request_timeout_s == DEFAULT_REQUEST_TIMEOUT_S == 60.0
    assert parse_config({"request_timeout": "infinity"}).request_timeout_s is None
    for bad in (10**5000, -1, float("nan"), 366 * 86400 * 1000, True, "60"):
        with pytest.raises(ConfigError) as info:
            parse_config({"request_timeout": bad})
        assert info.value.reason == "invalid_value" and info.value.details["key"] == "request_timeout"


@pytest.mark.parametrize("mode", ["endless_body", "big_body"])
def test_unary_bodies_are_capped_before_parsing(mode: str) -> None:
    with hostile(mode, size=MAX_RESPONSE_BYTES + 1024) as peer:  # type: ignore[arg-type]
        with pytest.raises(ProviderError) as info:
            models.generate(_cfg(peer.base_url, request_timeout=30000), HISTORY)
    assert info.value.reason == "response_too_large"
    assert info.value.details == {"max_bytes": MAX_RESPONSE_BYTES}


def test_a_body_under_the_cap_is_still_read() -> None:
    with hostile("big_body", size=2 * 1024 * 1024) as peer:
        with pytest.raises(ProviderError) as info:  # 2 MiB of text: read completely, then refused by content
            models.generate(_cfg(peer.base_url), HISTORY)
    assert info.value.reason == "invalid_model_output"


def test_faulty_calls_keep_at_most_one_pooled_connection_per_thread() -> None:
    """200 faulty calls (HTTP 503, dropped connections, invalid output, timeouts) from 4 threads: the only fds
    left are the threads' pooled keep-alive connections (at most one per thread and server), and closing the
    pools gives every one back."""
    script = {
        "rules": [
            {"when": {"user_text_equals": "503"}, "respond": {"fault": {"status": 503}}},
            {"when": {"user_text_equals": "drop"}, "respond": {"fault": {"kind": "drop_connection"}}},
            {"when": {"user_text_equals": "nul"}, "respond": {"text": "a\x00"}},
            {"when": {"user_text_equals": "slow"}, "respond": {"text": "late", "delay_ms": 2000}},
        ]
    }
    kinds = ["503", "drop", "nul", "slow"]
    with open_emulator(script=script, latency_ms=0) as emu:
        cfg = _cfg(emu.base_url, request_timeout=100)
        close_sessions()
        baseline = _client_sockets()
        reasons: list[str] = []
        lock = threading.Lock()

        def one(i: int) -> None:
            try:
                models.generate(cfg, [user(kinds[i % len(kinds)])])
            except AdkError as err:
                with lock:
                    reasons.append(err.reason)

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(one, range(200)))
            grown = _client_sockets() - baseline
            close_sessions()
            after = _client_sockets() - baseline
    assert len(reasons) == 200
    assert set(reasons) == {"unavailable", "connection_error", "invalid_model_output", "timeout"}
    assert len(grown) <= 4  # one pooled connection per thread (emulator-side sockets are not counted)
    assert not after

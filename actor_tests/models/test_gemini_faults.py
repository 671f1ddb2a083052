"""Every emulator fault maps to its typed error; retries honour retryDelay; nothing hangs."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from adk_actors import models
from adk_actors.errors import ProviderError, ProviderHttpError, RateLimited, StreamError
from adk_actors.models import CancelToken

from .conftest import API_KEY, api_bodies, user


def _fault(emu: Any, fault: dict[str, Any], times: int | None = None, **respond: Any) -> None:
    rule: dict[str, Any] = {"when": {}, "respond": {"text": "recovered answer", "fault": fault, **respond}}
    if times is not None:
        rule["times"] = times
    emu.set_script({"rules": [rule]})


def _assert_no_key(err: BaseException) -> None:
    texts = [repr(err), str(err)]
    if isinstance(err, ProviderError):
        texts.append(json.dumps(err.to_dict()))
    assert all(API_KEY not in t for t in texts)


@pytest.mark.parametrize(
    ("status", "cls", "reason", "google_status"),
    [
        (400, ProviderHttpError, "invalid_argument", "INVALID_ARGUMENT"),
        (403, ProviderHttpError, "permission_denied", "PERMISSION_DENIED"),
        (404, ProviderHttpError, "not_found", "NOT_FOUND"),
        (429, RateLimited, "rate_limited", "RESOURCE_EXHAUSTED"),
        (500, ProviderHttpError, "internal", "INTERNAL"),
        (503, ProviderHttpError, "unavailable", "UNAVAILABLE"),
    ],
)
@pytest.mark.parametrize("streaming", [False, True])
def test_http_status_maps_to_typed_error(emu, cfg, status, cls, reason, google_status, streaming):
    _fault(emu, {"status": status, "retry_delay": "2.5s"})
    with pytest.raises(cls) as info:
        if streaming:
            models.stream(cfg, [user("x")], [], lambda _d: None)
        else:
            models.generate(cfg, [user("x")])
    err = info.value
    assert type(err) is cls and err.reason == reason and err.status == status
    assert err.details["google_status"] == google_status and err.details["message"]
    if status == 429:
        assert err.details["retry_delay_s"] == 2.5
    _assert_no_key(err)


def test_unknown_model_is_a_404(emu, cfg):
    with pytest.raises(ProviderHttpError) as info:
        models.generate(cfg | {"model": "gemini-0-nonexistent", "retry": {"max_attempts": 3}}, [user("x")])
    assert info.value.reason == "not_found" and len(emu.requests) == 1


def test_array_wrapped_error_body_is_unwrapped(emu, cfg):
    _fault(emu, {"status": 503, "array_wrapped": True})
    with pytest.raises(ProviderHttpError) as info:
        models.generate(cfg, [user("x")])
    assert info.value.details["google_status"] == "UNAVAILABLE"


def _gap(emu: Any) -> float:
    first, second = emu.requests[-2:]
    return second["timestamp"] - first["timestamp"]


@pytest.mark.parametrize("streaming", [False, True])
def test_429_retry_waits_for_retry_delay_then_succeeds(emu, cfg, streaming):
    _fault(emu, {"status": 429, "retry_delay": "0.4s"}, times=1)
    c = cfg | {"retry": {"max_attempts": 3, "max_delay_ms": 2000}}
    if streaming:
        deltas: list[str] = []
        assert models.stream(c, [user("x")], [], deltas.append).text == "You said: x"
    else:
        assert models.generate(c, [user("x")]) == "You said: x"
    assert len(emu.requests) == 2
    assert _gap(emu) >= 0.4


def test_429_with_a_delay_above_the_cap_is_surfaced_not_waited(emu, cfg):
    _fault(emu, {"status": 429, "retry_delay": "30s"})
    with pytest.raises(RateLimited) as info:
        models.generate(cfg | {"retry": {"max_attempts": 5, "max_delay_ms": 1000}}, [user("x")])
    assert info.value.details["retry_delay_s"] == 30.0 and len(emu.requests) == 1


def test_daily_quota_is_not_retried(emu, cfg):
    _fault(emu, {"status": 429, "retry_delay": "0.1s", "per_day": True})
    with pytest.raises(RateLimited):
        models.generate(cfg | {"retry": {"max_attempts": 3}}, [user("x")])
    assert len(emu.requests) == 1


def test_retries_stop_at_max_attempts(emu, cfg):
    _fault(emu, {"status": 503})
    with pytest.raises(ProviderHttpError):
        models.generate(cfg | {"retry": {"max_attempts": 2, "max_delay_ms": 50}}, [user("x")])
    assert len(emu.requests) == 2


@pytest.mark.parametrize("status", [400, 403, 404])
def test_client_errors_are_never_retried(emu, cfg, status):
    _fault(emu, {"status": status})
    with pytest.raises(ProviderHttpError):
        models.generate(cfg | {"retry": {"max_attempts": 4, "max_delay_ms": 10}}, [user("x")])
    assert len(emu.requests) == 1


def test_without_a_retry_policy_nothing_is_retried(emu, cfg):
    _fault(emu, {"status": 429, "retry_delay": "0.01s"}, times=1)
    with pytest.raises(RateLimited):
        models.generate(cfg, [user("x")])
    assert len(emu.requests) == 1


def test_truncated_sse_is_a_stream_error(emu, cfg):
    _fault(emu, {"kind": "truncate_sse", "after_chunks": 2}, chunks=5)
    deltas: list[str] = []
    with pytest.raises(StreamError) as info:
        models.stream(cfg | {"retry": {"max_attempts": 3}}, [user("x")], [], deltas.append)
    assert info.value.reason == "truncated_stream" and len(deltas) == 2
    assert len(emu.requests) == 1


def test_empty_stream_is_a_stream_error(emu, cfg):
    _fault(emu, {"kind": "truncate_sse", "after_chunks": 0})
    with pytest.raises(StreamError) as info:
        models.stream(cfg, [user("x")], [], lambda _d: None)
    assert info.value.reason == "empty_stream"


def test_connection_dropped_mid_stream_is_a_stream_error(emu, cfg):
    _fault(emu, {"kind": "drop_connection", "after_chunks": 1}, chunks=4)
    frames: list[Any] = []
    with pytest.raises(StreamError) as info:
        models.stream_content(cfg, [user("x")], [], frames.append)
    assert info.value.reason == "truncated_stream" and len(frames) == 1


def test_connection_dropped_on_generate_is_a_connection_error(emu, cfg):
    _fault(emu, {"kind": "drop_connection"})
    with pytest.raises(ProviderError) as info:
        models.generate(cfg, [user("x")])
    assert info.value.reason == "connection_error"


def test_midstream_error_is_typed_and_never_retried_after_a_delivered_chunk(emu, cfg):
    _fault(emu, {"kind": "midstream_error", "after_chunks": 1, "status": 503}, chunks=4)
    deltas: list[str] = []
    with pytest.raises(ProviderHttpError) as info:
        models.stream(cfg | {"retry": {"max_attempts": 3, "max_delay_ms": 10}}, [user("x")], [], deltas.append)
    err = info.value
    assert err.status == 503 and err.details["midstream"] is True and err.reason == "unavailable"
    assert len(deltas) == 1 and len(emu.requests) == 1


@pytest.mark.parametrize(
    ("events", "content_type", "reason"),
    [
        (["data: {not json}\r\n\r\n"], "text/event-stream", "malformed_sse"),
        (["<html>proxy error</html>\r\n\r\n"], "text/event-stream", "malformed_sse"),
        (['data: {"candidates": []}\r\n\r\n'], "application/json", "malformed_sse"),
        (
            ['data: {"candidates": [{"content": {"parts": [{"text": "a"}]}}]}\r\n\r\n', 'data: {"cand'],
            "text/event-stream",
            "truncated_stream",
        ),
        (
            ['data: {"candidates": [{"content": {"parts": [{"text": "a"}]}}]}\r\n\r\n'],
            "text/event-stream",
            "truncated_stream",
        ),
    ],
)
def test_malformed_or_unfinished_sse_is_a_stream_error(cfg, tmp_path, events, content_type, reason):
    from .test_gemini_emulator import _replay_server

    with _replay_server(tmp_path, cfg, [user("x")], events, content_type=content_type) as server:
        with pytest.raises(StreamError) as info:
            models.stream(cfg | {"base_url": server.base_url}, [user("x")], [], lambda _d: None)
    assert info.value.reason == reason


def test_request_timeout_bounds_a_slow_generate(emu, cfg):
    emu.set_script({"rules": [{"respond": {"text": "late", "delay_ms": 3000}}]})
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        models.generate(cfg | {"request_timeout": 200}, [user("x")])
    assert info.value.reason == "timeout" and time.monotonic() - started < 2.0


def test_request_timeout_bounds_each_stream_wait(emu, cfg):
    emu.set_script({"rules": [{"respond": {"text": "late", "delay_ms": 3000}}]})
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        models.stream(cfg | {"request_timeout": 200}, [user("x")], [], lambda _d: None)
    assert info.value.reason == "timeout" and time.monotonic() - started < 2.0


def test_request_timeout_infinity_and_generous_values_succeed(emu, cfg):
    assert models.generate(cfg | {"request_timeout": "infinity"}, [user("x")]) == "You said: x"
    assert models.generate(cfg | {"request_timeout": 10_000}, [user("x")]) == "You said: x"


class _SignallingToken(CancelToken):
    """A real token that also tells the test when the call's socket is live."""

    def __init__(self) -> None:
        super().__init__()
        self.live = threading.Event()

    def register(self, sock: Any) -> None:
        super().register(sock)
        self.live.set()


@pytest.mark.parametrize("streaming", [False, True])
def test_cancel_while_waiting_for_headers_returns_promptly(emu, cfg, streaming):
    emu.set_script({"rules": [{"respond": {"text": "late", "delay_ms": 5000}}]})
    token = _SignallingToken()
    outcome: list[BaseException | object] = []

    def call() -> None:
        try:
            if streaming:
                outcome.append(models.stream(cfg, [user("slow")], [], lambda _d: None, cancel=token))
            else:
                outcome.append(models.generate(cfg, [user("slow")], cancel=token))
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    assert token.live.wait(5)
    started = time.monotonic()
    token.cancel()
    worker.join(5)
    elapsed = time.monotonic() - started
    assert not worker.is_alive()
    (err,) = outcome
    assert isinstance(err, ProviderError) and err.reason == "cancelled"
    assert elapsed < 1.0


def test_cancel_mid_stream_stops_after_delivered_frames(emu, cfg):
    emu.set_script({"rules": [{"respond": {"text": "a b c d e f", "chunks": 3}}]})
    token = CancelToken()
    deltas: list[str] = []

    def on_delta(delta: str) -> None:
        deltas.append(delta)
        token.cancel()

    with pytest.raises(ProviderError) as info:
        models.stream(cfg, [user("x")], [], on_delta, cancel=token)
    assert info.value.reason == "cancelled" and len(deltas) == 1


def test_a_cancelled_token_stops_the_call_before_http(emu, cfg):
    token = CancelToken()
    token.cancel()
    with pytest.raises(ProviderError) as info:
        models.generate(cfg, [user("x")], cancel=token)
    assert info.value.reason == "cancelled" and emu.requests == []


class _WaitSignallingToken(CancelToken):
    """A real token that tells the test when the call starts waiting between retry attempts."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, timeout: float | None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def test_cancel_interrupts_a_retry_wait(emu, cfg):
    _fault(emu, {"status": 429, "retry_delay": "5s"})
    token = _WaitSignallingToken()
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            models.generate(cfg | {"retry": {"max_attempts": 2, "max_delay_ms": 10_000}}, [user("x")], cancel=token)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    assert token.waiting.wait(5)
    started = time.monotonic()
    token.cancel()
    worker.join(5)
    assert not worker.is_alive() and time.monotonic() - started < 1.0
    assert isinstance(outcome[0], ProviderError) and outcome[0].reason == "cancelled"
    assert len(api_bodies(emu)) == 1

"""Every fault kind: HTTP errors (429/500/503/504), limited repeats, delays, truncated/dropped/errored streams."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import requests

from adk_actors.emulator import Emulator

from .helpers import GEN, STREAM, dechunk, post, raw_http, sse_events, user


def _emu(fault: dict[str, Any], times: int | None = None, **respond: Any) -> Emulator:
    rule: dict[str, Any] = {"when": {"user_text_equals": "boom"}, "respond": {"fault": fault, **respond}}
    if times is not None:
        rule["times"] = times
    return Emulator(script={"rules": [rule, {"when": {}, "respond": {"text": "recovered fine"}}]})


def test_429_full_body_no_retry_after_and_times() -> None:
    with _emu({"status": 429, "retry_delay": "1.5s"}, times=1) as emu:
        resp = post(emu.base_url, GEN, {"contents": [user("boom")]})
        assert resp.status_code == 429
        assert "Retry-After" not in resp.headers
        err = resp.json()["error"]
        assert err["code"] == 429 and err["status"] == "RESOURCE_EXHAUSTED"
        assert err["message"].endswith("Please retry in 1.5s.")
        types = [d["@type"] for d in err["details"]]
        assert types == [
            "type.googleapis.com/google.rpc.QuotaFailure",
            "type.googleapis.com/google.rpc.Help",
            "type.googleapis.com/google.rpc.RetryInfo",
        ]
        violation = err["details"][0]["violations"][0]
        assert violation["quotaId"] == "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
        assert violation["quotaDimensions"] == {"location": "global", "model": "gemini-3.1-flash-lite"}
        assert err["details"][2]["retryDelay"] == "1.5s"
        again = post(emu.base_url, GEN, {"contents": [user("boom")]})
        assert again.status_code == 200
        assert again.json()["candidates"][0]["content"]["parts"][0]["text"] == "recovered fine"
        assert [r["status"] for r in emu.requests] == [429, 200]


def test_429_per_day_with_retry_after_header_and_array_wrap() -> None:
    fault = {"status": 429, "retry_delay": "26s", "per_day": True, "retry_after_header": True, "array_wrapped": True}
    with _emu(fault) as emu:
        resp = post(emu.base_url, GEN, {"contents": [user("boom")]})
    assert resp.status_code == 429
    assert resp.headers["Retry-After"] == "26"
    body = resp.json()
    assert isinstance(body, list) and len(body) == 1
    err = body[0]["error"]
    assert "PerDay" in err["details"][0]["violations"][0]["quotaId"]
    assert err["message"].endswith("Please retry in 26s.")
    assert err["details"][2]["retryDelay"] == "26s"


@pytest.mark.parametrize(
    ("status", "name", "message"),
    [
        (500, "INTERNAL", "An internal error has occurred. Please retry or report in "
                          "https://developers.generativeai.google/guide/troubleshooting"),
        (503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
        (504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."),
    ],
)  # fmt: skip
def test_server_errors(status: int, name: str, message: str) -> None:
    with _emu({"status": status}, times=2) as emu:
        for _ in range(2):
            resp = post(emu.base_url, GEN, {"contents": [user("boom")]})
            assert resp.status_code == status
            assert resp.json() == {"error": {"code": status, "message": message, "status": name}}
        assert post(emu.base_url, GEN, {"contents": [user("boom")]}).status_code == 200
        stream = post(emu.base_url, STREAM, {"contents": [user("boom")]}, params={"alt": "sse"})
        assert stream.status_code == 200


def test_fault_on_stream_before_first_byte() -> None:
    with _emu({"status": 503}) as emu:
        resp = post(emu.base_url, STREAM, {"contents": [user("boom")]}, params={"alt": "sse"})
    assert resp.status_code == 503
    assert resp.headers["Content-Type"] == "application/json; charset=UTF-8"


def test_delay_ms_slow_first_byte() -> None:
    script = {"rules": [{"when": {}, "respond": {"text": "slow", "delay_ms": 300}}]}
    with Emulator(script=script) as emu:
        started = time.monotonic()
        post(emu.base_url, GEN, {"contents": [user("x")]})
        assert time.monotonic() - started >= 0.3
        with pytest.raises(requests.exceptions.ReadTimeout):
            post(emu.base_url, GEN, {"contents": [user("x")]}, timeout=0.05)


def _raw_stream(emu: Emulator, alt_sse: bool = True) -> tuple[bytes, bytes]:
    body = json.dumps({"contents": [user("boom")]})
    query = "?alt=sse" if alt_sse else ""
    request = (
        f"POST {STREAM}{query} HTTP/1.1\r\nHost: x\r\nx-goog-api-key: k\r\nContent-Length: {len(body)}\r\n\r\n{body}"
    ).encode()
    raw = raw_http(emu.port, request)
    head, _, payload = raw.partition(b"\r\n\r\n")
    return head, payload


def test_truncate_sse() -> None:
    with _emu({"kind": "truncate_sse", "after_chunks": 2}, text="a fairly long answer to be cut", chunks=5) as emu:
        head, payload = _raw_stream(emu)
    assert head.startswith(b"HTTP/1.1 200")
    assert payload.endswith(b"0\r\n\r\n")  # the body ends cleanly ...
    events = sse_events(dechunk(payload))
    assert len(events) == 2  # ... but without the finishing chunk
    assert all("finishReason" not in e["candidates"][0] for e in events)


def test_drop_connection_mid_stream() -> None:
    with _emu({"kind": "drop_connection", "after_chunks": 1}) as emu:
        head, payload = _raw_stream(emu)
        assert head.startswith(b"HTTP/1.1 200")
        assert not payload.endswith(b"0\r\n\r\n")
        assert len(sse_events(dechunk(payload))) == 1
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            post(emu.base_url, STREAM, {"contents": [user("boom")]}, params={"alt": "sse"})


def test_drop_connection_unary() -> None:
    with _emu({"kind": "drop_connection"}) as emu, pytest.raises(requests.exceptions.ConnectionError):
        post(emu.base_url, GEN, {"contents": [user("boom")]})


def test_midstream_error_event() -> None:
    with _emu({"kind": "midstream_error", "after_chunks": 1, "status": 503}) as emu:
        resp = post(emu.base_url, STREAM, {"contents": [user("boom")]}, params={"alt": "sse"})
        assert resp.status_code == 200
        events = sse_events(resp.content)
        assert len(events) == 2
        assert "candidates" in events[0]
        assert events[1] == {
            "error": {
                "code": 503,
                "message": "The model is overloaded. Please try again later.",
                "status": "UNAVAILABLE",
            }
        }
        array = post(emu.base_url, STREAM, {"contents": [user("boom")]})
        items = array.json()
        assert "candidates" in items[0] and items[-1]["error"]["code"] == 503
        unary = post(emu.base_url, GEN, {"contents": [user("boom")]})
        assert unary.status_code == 503


def test_an_internal_error_answers_500_without_the_exception_text(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "key=AIzaSyINTERNAL-SECRET"

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(f"engine bug while handling {secret}")

    with Emulator() as emu:
        monkeypatch.setattr(emu.engine, "generate", broken)
        resp = post(emu.base_url, GEN, {"contents": [user("x")]})
        assert resp.status_code == 500
        assert resp.json() == {
            "error": {"code": 500, "message": "Emulator internal error (RuntimeError).", "status": "INTERNAL"}
        }
        assert "SECRET" not in resp.text and "engine bug" not in resp.text
        # the connection and the server survive the bug
        monkeypatch.undo()
        assert post(emu.base_url, GEN, {"contents": [user("x")]}).status_code == 200

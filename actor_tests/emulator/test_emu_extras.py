"""Code execution parts, final-chunk variants, the control endpoints, and property tests of the pure helpers."""

from __future__ import annotations

import base64
import math
from typing import Any

import requests
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.emulator import Emulator
from adk_actors.emulator.engine import _split
from adk_actors.emulator.script import flatten, render, render_value
from adk_actors.emulator.wire import b64decode_any, text_tokens

from .helpers import GEN, STREAM, post, sse_events, user


def test_code_execution_parts_only_with_the_tool() -> None:
    script = {"rules": [{"when": {}, "respond": {
        "code_execution": {"code": "print(6 * 7)", "output": "42\n"}, "text": "The answer is 42."}}]}  # fmt: skip
    with Emulator(script=script) as emu:
        body = post(emu.base_url, GEN, {"contents": [user("compute")], "tools": [{"codeExecution": {}}]}).json()
        types.GenerateContentResponse.model_validate(body)
        parts = body["candidates"][0]["content"]["parts"]
        assert parts[0] == {"executableCode": {"language": "PYTHON", "code": "print(6 * 7)"}}
        assert parts[1] == {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "42\n"}}
        assert parts[2]["text"] == "The answer is 42." and "thoughtSignature" in parts[2]
        usage = body["usageMetadata"]
        assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
        without = post(emu.base_url, GEN, {"contents": [user("compute")]}).json()
        assert [list(p) for p in without["candidates"][0]["content"]["parts"]] == [["text", "thoughtSignature"]]


def test_final_chunk_variants() -> None:
    script = {"rules": [
        {"when": {"user_text_equals": "empty"}, "respond": {"text": "hello world", "final_chunk": "empty_text"}},
        {"when": {"user_text_equals": "finish"}, "respond": {"text": "hello world", "final_chunk": "finish_only"}},
    ]}  # fmt: skip
    with Emulator(script=script) as emu:
        events = sse_events(post(emu.base_url, STREAM, {"contents": [user("empty")]}, params={"alt": "sse"}).content)
        last = events[-1]["candidates"][0]
        (final_part,) = last["content"]["parts"]
        assert final_part["text"] == "" and final_part["thoughtSignature"]
        assert last["finishReason"] == "STOP"
        assert all("thoughtSignature" not in e["candidates"][0]["content"]["parts"][0] for e in events[:-1])
        unary = post(emu.base_url, GEN, {"contents": [user("empty")]}).json()["candidates"][0]["content"]["parts"]
        assert unary[0] == {"text": "hello world"} and unary[1]["text"] == "" and "thoughtSignature" in unary[1]
        events = sse_events(post(emu.base_url, STREAM, {"contents": [user("finish")]}, params={"alt": "sse"}).content)
        assert events[-1]["candidates"][0] == {"finishReason": "STOP", "index": 0}
        assert "thoughtSignature" in events[-2]["candidates"][0]["content"]["parts"][0]
        for event in events:
            types.GenerateContentResponse.model_validate(event)


def test_control_endpoints(emu: Emulator) -> None:
    base = emu.base_url + "/_emulator"
    assert requests.get(base + "/health", timeout=10).json() == {"status": "ok"}
    script = {"rules": [{"id": "only", "when": {}, "respond": {"text": "controlled"}}]}
    assert requests.put(base + "/script", json=script, timeout=10).json() == {}
    text = post(emu.base_url, GEN, {"contents": [user("x")]}).json()["candidates"][0]["content"]["parts"][0]["text"]
    assert text == "controlled"
    assert requests.get(base + "/hits", timeout=10).json() == {"hits": {"only": 1}}
    log = requests.get(base + "/requests", timeout=10).json()["requests"]
    assert [e["path"] for e in log] == [GEN]  # control calls are not logged
    assert requests.delete(base + "/requests", timeout=10).json() == {}
    assert emu.requests == []
    bad = requests.put(base + "/script", json={"rules": [{"respond": {"nope": 1}}]}, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("Invalid script:")
    assert requests.get(base + "/unknown", timeout=10).status_code == 404


# ------------------------------------------------------------------------------------------------------ properties


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=300), st.integers(min_value=1, max_value=12))
def test_split_property(text: str, n: int) -> None:
    pieces = _split(text, n, stream=True)
    assert "".join(pieces) == text
    assert all(pieces)
    assert len(pieces) == min(max(3, n), len(text))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_base64_both_alphabets_with_and_without_padding(data: bytes) -> None:
    std = base64.b64encode(data).decode()
    url = base64.urlsafe_b64encode(data).decode()
    for encoded in (std, url, std.rstrip("="), url.rstrip("=")):
        assert b64decode_any(encoded) == data


@given(st.text(max_size=500))
def test_fake_tokenizer(text: str) -> None:
    assert text_tokens(text) == math.ceil(len(text) / 4)


@given(st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.integers() | st.text(max_size=20), max_size=5))
def test_template_lookup_property(response: dict[str, Any]) -> None:
    variables = {"response": {"result": response}, "args": {"city": "Oslo"}}
    for key, value in response.items():
        assert render(f"{{response.{key}}}", variables) == str(value)
        assert render_value(f"{{response.{key}}}", variables) == value
    assert render("{{args.city}} {args.city}", variables) == "{args.city} Oslo"
    assert render("{missing.name}", variables) == "{missing.name}"


def test_flatten() -> None:
    assert flatten({"result": {"forecast": "sunny", "temp": 22}}) == "forecast: sunny, temp: 22"
    assert flatten({"output": ["a", "b"]}) == "a, b"
    assert flatten({"result": None}) == ""


def test_expect_100_continue(emu: Emulator) -> None:
    from .helpers import raw_http

    body = b'{"contents": [{"parts": [{"text": "curl style"}]}]}'
    head = (f"POST {GEN} HTTP/1.1\r\nHost: x\r\nx-goog-api-key: k\r\nExpect: 100-continue\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()  # fmt: skip
    raw = raw_http(emu.port, head + body)
    assert raw.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert b"You said: curl style" in raw


def test_port_in_use_raises_and_leaves_nothing(emu: Emulator) -> None:
    import pytest

    other = Emulator(port=emu.port)
    with pytest.raises(OSError):
        other.start()
    other.stop()  # idempotent even after a failed start


def test_internal_error_is_500(emu: Emulator) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("kaput")

    emu.engine.generate = boom  # type: ignore[method-assign]
    resp = post(emu.base_url, GEN, {"contents": [user("x")]})
    assert resp.status_code == 500
    assert resp.json()["error"]["message"] == "Emulator internal error (RuntimeError)."  # never the text
    assert "kaput" not in resp.text


def _socket_fds() -> set[str]:
    import os

    fds = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                fds.add(name)
        except OSError:
            pass
    return fds


def test_stop_closes_listener_and_open_keep_alive_connections() -> None:
    before = _socket_fds()
    with requests.Session() as session:
        emu = Emulator().start()
        try:
            assert post(emu.base_url, GEN, {"contents": [user("keep me alive")]}, session=session).status_code == 200
        finally:
            emu.stop()
        emu.stop()  # idempotent
    assert _socket_fds() <= before

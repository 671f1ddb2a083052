"""streamGenerateContent: SSE framing as the real service, JSON-array mode, calls and grounding in streams."""

from __future__ import annotations

import itertools
import json
from typing import Any

from adk_actors.emulator import Emulator

from .helpers import STREAM, dechunk, post, raw_http, sse_events, user


def _stream(emu: Emulator, body: dict[str, Any]) -> list[dict[str, Any]]:
    resp = post(emu.base_url, STREAM, body, params={"alt": "sse"})
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "text/event-stream"
    return sse_events(resp.content)


def test_sse_wire_framing(emu: Emulator) -> None:
    body = json.dumps({"contents": [user("tell me something long enough")]})
    request = (
        f"POST {STREAM}?alt=sse HTTP/1.1\r\nHost: 127.0.0.1\r\nx-goog-api-key: k\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
    ).encode()
    raw = raw_http(emu.port, request)
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Transfer-Encoding: chunked" in head and b"Content-Type: text/event-stream" in head
    assert payload.endswith(b"0\r\n\r\n")
    data = dechunk(payload)
    assert b"[DONE]" not in data and b"\nevent:" not in data and b"\nid:" not in data
    events = sse_events(data)
    assert len(events) >= 3
    texts = [e["candidates"][0]["content"]["parts"][0]["text"] for e in events]
    assert "".join(texts) == "You said: tell me something long enough"
    assert any(t[-1].isalpha() and n[0].isalpha() for t, n in itertools.pairwise(texts))  # split mid-word
    assert len({e["responseId"] for e in events}) == 1
    assert all(e["modelVersion"] == "gemini-3.1-flash-lite" for e in events)
    assert [("finishReason" in e["candidates"][0]) for e in events] == [False] * (len(events) - 1) + [True]
    last_usage = events[-1]["usageMetadata"]
    assert last_usage["candidatesTokenCount"] > 0
    assert all("candidatesTokenCount" not in e["usageMetadata"] for e in events[:-1])
    assert "thoughtSignature" in events[-1]["candidates"][0]["content"]["parts"][-1]


def test_stream_keep_alive_reuses_connection(emu: Emulator) -> None:
    import requests

    with requests.Session() as session:
        for _ in range(3):
            resp = post(emu.base_url, STREAM, {"contents": [user("again")]}, params={"alt": "sse"}, session=session)
            assert resp.status_code == 200
            assert sse_events(resp.content)


def test_stream_function_calls_never_split_and_thoughts_first() -> None:
    script = {
        "rules": [
            {
                "when": {},
                "respond": {
                    "thought": "planning",
                    "function_calls": [{"name": "a", "args": {"x": 1}}, {"name": "b", "args": {"y": 2}}],
                },
            }
        ]
    }
    with Emulator(script=script) as emu:
        cfg = {"thinkingConfig": {"includeThoughts": True}}
        events = _stream(emu, {"contents": [user("go")], "generationConfig": cfg})
    parts = [e["candidates"][0]["content"]["parts"] for e in events]
    assert parts[0] == [{"text": "planning", "thought": True}]
    assert parts[1][0]["functionCall"] == {"id": parts[1][0]["functionCall"]["id"], "name": "a", "args": {"x": 1}}
    assert "thoughtSignature" in parts[1][0]
    assert parts[2][0]["functionCall"]["name"] == "b" and "thoughtSignature" not in parts[2][0]
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"


def test_stream_grounding_on_last_chunk(emu: Emulator) -> None:
    events = _stream(emu, {"contents": [user("latest news?")], "tools": [{"googleSearch": {}}]})
    assert "groundingMetadata" in events[-1]["candidates"][0]
    assert all("groundingMetadata" not in e["candidates"][0] for e in events[:-1])


def test_stream_chunks_setting() -> None:
    script = {"rules": [{"when": {}, "respond": {"text": "abcdefghijklmnopqrstuvwxyz", "chunks": 7}}]}
    with Emulator(script=script) as emu:
        events = _stream(emu, {"contents": [user("x")]})
    assert len(events) == 7


def test_stream_without_alt_is_json_array(emu: Emulator) -> None:
    resp = post(emu.base_url, STREAM, {"contents": [user("array please")]})
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "application/json; charset=UTF-8"
    items = resp.json()
    assert isinstance(items, list) and len(items) >= 3
    assert "".join(i["candidates"][0]["content"]["parts"][0]["text"] for i in items) == "You said: array please"


def test_stream_error_before_start_is_plain_json(emu: Emulator) -> None:
    resp = post(emu.base_url, STREAM, {"contents": [{"role": "tool", "parts": [{"text": "x"}]}]}, params={"alt": "sse"})
    assert resp.status_code == 400
    assert resp.headers["Content-Type"] == "application/json; charset=UTF-8"
    assert resp.json()["error"]["message"] == "Please use a valid role: user, model."


GROUNDING = {
    "webSearchQueries": ["q1", "q2", "q3", "q4", "q5"],
    "searchEntryPoint": {"renderedContent": "<div>chips</div>"},
    "groundingChunks": [{"web": {"uri": f"https://example.com/{i}", "title": f"t{i}"}} for i in range(4)],
    "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 3, "text": "abc"}, "groundingChunkIndices": [i],
                           "confidenceScores": [0.9]} for i in range(3)],
}  # fmt: skip


def _combined(events: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for event in events:
        for key, value in event["candidates"][0].get("groundingMetadata", {}).items():
            out[key] = out.get(key, []) + value if isinstance(value, list) else value
    return out


def test_stream_grounding_spread_over_chunks() -> None:
    script = {"rules": [{"when": {}, "respond": {"text": "grounded answer, long enough to split", "chunks": 4,
                                                 "grounding": GROUNDING, "grounding_chunks": 3}}]}  # fmt: skip
    body = {"contents": [user("news?")], "tools": [{"googleSearch": {}}]}
    with Emulator(script=script) as emu:
        events = _stream(emu, body)
        unary = post(emu.base_url, "/v1beta/models/gemini-3.1-flash-lite:generateContent", body).json()
        array = post(emu.base_url, STREAM, body).json()
    grounded = [i for i, e in enumerate(events) if "groundingMetadata" in e["candidates"][0]]
    assert grounded == [len(events) - 3, len(events) - 2, len(events) - 1]  # the last three chunks, in order
    assert _combined(events) == GROUNDING == _combined(array)
    assert unary["candidates"][0]["groundingMetadata"] == GROUNDING  # unary: all on the one candidate
    pieces = [events[i]["candidates"][0]["groundingMetadata"] for i in grounded]
    assert [p["webSearchQueries"] for p in pieces] == [["q1", "q2"], ["q3"], ["q4", "q5"]]
    assert "searchEntryPoint" in pieces[0] and all("searchEntryPoint" not in p for p in pieces[1:])


def test_stream_grounding_spread_on_a_tool_call_leads_with_grounding_only_chunks() -> None:
    script = {"rules": [{"when": {}, "respond": {"function_calls": [{"name": "f", "args": {}}],
                                                 "grounding": GROUNDING, "grounding_chunks": 3}}]}  # fmt: skip
    tools = [{"googleSearch": {}}, {"functionDeclarations": [{"name": "f"}]}]
    with Emulator(script=script) as emu:
        events = _stream(emu, {"contents": [user("x")], "tools": tools})
    assert len(events) == 3
    assert ["content" in e["candidates"][0] for e in events] == [False, False, True]
    assert events[-1]["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "f"
    assert all("groundingMetadata" in e["candidates"][0] for e in events)
    assert _combined(events) == GROUNDING

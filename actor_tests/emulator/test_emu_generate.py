"""generateContent behaviour: default script, function calling round trip, thoughts, grounding, JSON, usage."""

from __future__ import annotations

import base64
import math
import time
from typing import Any

import pytest

from adk_actors.emulator import Emulator, ScriptError

from .helpers import GEN, WEATHER_TOOL, post, user


def _parts(resp_json: dict[str, Any]) -> list[dict[str, Any]]:
    return resp_json["candidates"][0]["content"]["parts"]


def test_echo_and_envelope(emu: Emulator) -> None:
    resp = post(emu.base_url, GEN, {"contents": [user("hello there")]})
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "application/json; charset=UTF-8"
    assert resp.text.startswith("{\n  ")  # pretty-printed like the real service
    body = resp.json()
    cand = body["candidates"][0]
    assert cand["content"]["role"] == "model"
    assert cand["finishReason"] == "STOP"
    assert cand["index"] == 0
    assert [p["text"] for p in cand["content"]["parts"]] == ["You said: hello there"]
    assert "thoughtSignature" in cand["content"]["parts"][-1]  # non-call answers sign their last part
    assert body["modelVersion"] == "gemini-3.1-flash-lite"
    assert len(body["responseId"]) >= 16
    usage = body["usageMetadata"]
    assert usage["promptTokenCount"] == math.ceil(len("hello there") / 4)
    assert usage["candidatesTokenCount"] == math.ceil(len("You said: hello there") / 4)
    assert usage["totalTokenCount"] == (
        usage["promptTokenCount"] + usage["candidatesTokenCount"] + usage.get("thoughtsTokenCount", 0)
    )
    assert usage["promptTokensDetails"] == [{"modality": "TEXT", "tokenCount": usage["promptTokenCount"]}]


def test_weather_round_trip_with_url_safe_signature(emu: Emulator) -> None:
    contents: list[dict[str, Any]] = [user("What is the weather in Tokyo?")]
    first = post(emu.base_url, GEN, {"contents": contents, "tools": [WEATHER_TOOL]}).json()
    parts = _parts(first)
    assert len(parts) == 1
    call = parts[0]["functionCall"]
    assert call["name"] == "get_weather"
    assert call["args"] == {"city": "Tokyo"}
    assert len(call["id"]) == 8
    sig = base64.b64decode(parts[0]["thoughtSignature"])
    assert b"\xfb\xff" in sig and len(sig) >= 32
    # Echo the model content with the signature re-encoded in the URL-safe alphabet, without padding (as the SDK does).
    echoed = {
        "role": "model",
        "parts": [{"functionCall": call, "thoughtSignature": base64.urlsafe_b64encode(sig).decode().rstrip("=")}],
    }
    assert echoed["parts"][0]["thoughtSignature"] != parts[0]["thoughtSignature"]
    contents += [
        echoed,
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": call["id"],
                        "name": "get_weather",
                        "response": {"result": {"forecast": "sunny", "temp_c": 22}},
                    }
                }
            ],
        },
    ]
    second = post(emu.base_url, GEN, {"contents": contents, "tools": [WEATHER_TOOL]})
    assert second.status_code == 200, second.text
    assert _parts(second.json())[0]["text"] == "The weather in Tokyo is forecast: sunny, temp_c: 22."
    assert emu.rule_hits["weather_call"] == 1
    assert emu.rule_hits["weather_answer"] == 1


TOOLS = {"functionDeclarations": [
    {"name": "get_time", "description": "The current time."},
    {"name": "lookup_stock.price", "description": "A stock price.",
     "parameters": {"type": "OBJECT", "properties": {"symbol": {"type": "STRING"}}}},
]}  # fmt: skip


@pytest.mark.parametrize(("prompt", "tool"), [
    ("Please use get_time.", "get_time"),
    ("call the get_time tool", "get_time"),
    ("Could you CALL lookup_stock.price for me?", "lookup_stock.price"),
    ("run get_time", "get_time"),
])  # fmt: skip
def test_default_script_calls_a_tool_the_prompt_names(emu: Emulator, prompt: str, tool: str) -> None:
    first = post(emu.base_url, GEN, {"contents": [user(prompt)], "tools": [TOOLS, WEATHER_TOOL]})
    assert first.status_code == 200, first.text
    (part,) = _parts(first.json())
    call = part["functionCall"]
    assert (call["name"], call["args"]) == (tool, {}) and part["thoughtSignature"]
    contents = [user(prompt), {"role": "model", "parts": [part]}, {"role": "user", "parts": [{"functionResponse": {
        "id": call["id"], "name": tool, "response": {"result": "12:00"}}}]}]  # fmt: skip
    second = post(emu.base_url, GEN, {"contents": contents, "tools": [TOOLS, WEATHER_TOOL]})
    assert _parts(second.json())[0]["text"] == f"The {tool} tool returned: 12:00."
    assert emu.rule_hits["named_tool_call"] == 1


@pytest.mark.parametrize("prompt", ["use get_date", "use the force", "tell me about get_time"])
def test_default_script_named_tool_rule_needs_a_declared_tool_and_a_verb(emu: Emulator, prompt: str) -> None:
    body = post(emu.base_url, GEN, {"contents": [user(prompt)], "tools": [TOOLS]}).json()
    assert _parts(body)[-1]["text"] == f"You said: {prompt}"
    assert emu.rule_hits["named_tool_call"] == 0


def test_default_script_weather_rules_keep_precedence(emu: Emulator) -> None:
    body = post(emu.base_url, GEN, {"contents": [user("use get_weather for the weather in Oslo")],
                                    "tools": [TOOLS, WEATHER_TOOL]}).json()  # fmt: skip
    assert _parts(body)[0]["functionCall"]["args"] == {"city": "Oslo"}
    assert emu.rule_hits["weather_call"] == 1 and emu.rule_hits["named_tool_call"] == 0


def test_weather_without_city_asks(emu: Emulator) -> None:
    body = post(emu.base_url, GEN, {"contents": [user("how is the weather?")], "tools": [WEATHER_TOOL]}).json()
    assert _parts(body)[0]["text"] == "Which city would you like the weather for?"


def test_thoughts_only_when_requested(emu: Emulator) -> None:
    cfg = {"thinkingConfig": {"includeThoughts": True}}
    body = post(emu.base_url, GEN, {"contents": [user("hi")], "generationConfig": cfg}).json()
    parts = _parts(body)
    assert parts[0]["thought"] is True and parts[0]["text"]
    assert parts[1]["text"] == "You said: hi"
    assert body["usageMetadata"]["thoughtsTokenCount"] == math.ceil(len(parts[0]["text"]) / 4)
    plain = post(emu.base_url, GEN, {"contents": [user("hi")]}).json()
    assert all(not p.get("thought") for p in _parts(plain))


def test_grounding_with_google_search(emu: Emulator) -> None:
    body = post(emu.base_url, GEN, {"contents": [user("Who won Euro 2024?")], "tools": [{"googleSearch": {}}]}).json()
    cand = body["candidates"][0]
    meta = cand["groundingMetadata"]
    assert meta["webSearchQueries"] == ["Who won Euro 2024?"]
    assert meta["groundingChunks"][0]["web"]["uri"].startswith("https://vertexaisearch.cloud.google.com/")
    assert "renderedContent" in meta["searchEntryPoint"]
    text = cand["content"]["parts"][0]["text"].encode("utf-8")
    for support in meta["groundingSupports"]:
        seg = support["segment"]
        assert text[seg["startIndex"] : seg["endIndex"]].decode() == seg["text"]


def test_json_mode(emu: Emulator) -> None:
    import json

    cfg = {"responseMimeType": "application/json", "responseSchema": {"type": "OBJECT"}}
    body = post(emu.base_url, GEN, {"contents": [user("hi")], "generationConfig": cfg}).json()
    assert json.loads(_parts(body)[0]["text"]) == {"answer": "You said: hi"}


def test_custom_script_templates_times_and_counters() -> None:
    script = {
        "rules": [
            {"id": "once", "when": {"user_text_equals": "ping"}, "respond": {"text": "first"}, "times": 1},
            {"id": "regex", "when": {"user_text_regex": r"add (?P<a>\d+) and (\d+)", "has_function_response": False},
             "respond": {"function_calls": [{"name": "add", "args": {"a": "{match.a}", "b": "{match.2}"}},
                                            {"name": "log", "args": {}}]}},
            {"id": "answer", "when": {"has_function_response": True, "function_response_name": "add"},
             "respond": {"text": "{args.a}+{args.b}={response.sum} ({name}) {{literal}} {unknown.var}"}},
            {"id": "json", "when": {"user_text_contains": ["json", "object"]},
             "respond": {"json": {"echo": "{user_text}", "n": "{model}"}, "text": "not json mode"}},
            {"id": "rest", "when": {}, "respond": {"text": "second", "finish_reason": "MAX_TOKENS"}},
        ]
    }  # fmt: skip
    with Emulator(script=script) as emu:
        assert _parts(post(emu.base_url, GEN, {"contents": [user("ping")]}).json())[0]["text"] == "first"
        again = post(emu.base_url, GEN, {"contents": [user("ping")]}).json()
        assert _parts(again)[0]["text"] == "second"
        assert again["candidates"][0]["finishReason"] == "MAX_TOKENS"
        calls = post(emu.base_url, GEN, {"contents": [user("please add 2 and 3")]}).json()
        parts = _parts(calls)
        assert [p["functionCall"]["name"] for p in parts] == ["add", "log"]
        assert parts[0]["functionCall"]["args"] == {"a": "2", "b": "3"}
        assert "thoughtSignature" in parts[0] and "thoughtSignature" not in parts[1]  # only the first call is signed
        contents = [
            user("please add 2 and 3"),
            calls["candidates"][0]["content"],
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": parts[0]["functionCall"]["id"], "name": "add", "response": {"sum": 5}}},
                    {"functionResponse": {"id": parts[1]["functionCall"]["id"], "name": "log", "response": {}}},
                ],
            },
        ]
        final = post(emu.base_url, GEN, {"contents": contents}).json()
        assert _parts(final)[0]["text"] == "2+3=5 (add) {literal} {unknown.var}"
        plain_json = post(emu.base_url, GEN, {"contents": [user("an object please")]}).json()
        assert _parts(plain_json)[0]["text"] == "not json mode"
        cfg = {"responseMimeType": "application/json"}
        jm = post(emu.base_url, GEN, {"contents": [user("json please")], "generationConfig": cfg}).json()
        assert _parts(jm)[0]["text"] == '{"echo": "json please", "n": "gemini-3.1-flash-lite"}'
        assert emu.rule_hits == {"once": 1, "regex": 1, "answer": 1, "json": 2, "rest": 1}
        assert [r["rule"] for r in emu.requests] == ["once", "rest", "regex", "answer", "json", "json"]
        emu.set_script({"rules": [{"when": {}, "respond": {"text": "swapped"}}]})
        assert _parts(post(emu.base_url, GEN, {"contents": [user("ping")]}).json())[0]["text"] == "swapped"
        assert emu.rule_hits == {"0": 1}


def test_block_reason_and_gemini25_ids() -> None:
    script = {"rules": [
        {"when": {"user_text_contains": "bad"}, "respond": {"block_reason": "SAFETY"}},
        {"when": {}, "respond": {"function_calls": [{"name": "f"}], "function_call_ids": False}},
    ]}  # fmt: skip
    with Emulator(script=script) as emu:
        blocked = post(emu.base_url, GEN, {"contents": [user("bad stuff")]}).json()
        assert "candidates" not in blocked
        assert blocked["promptFeedback"] == {"blockReason": "SAFETY"}
        call = _parts(post(emu.base_url, GEN, {"contents": [user("x")]}).json())[0]["functionCall"]
        assert call == {"name": "f", "args": {}}


def test_invalid_scripts_rejected() -> None:
    for bad in (
        {"rules": [{"when": {"user_text_contain": "x"}, "respond": {"text": "x"}}]},
        {"rules": [{"when": {}, "respond": {"txt": "x"}}]},
        {"rules": [{"when": {}, "respond": {"fault": {"kind": "explode"}}}]},
        {"rules": [{"when": {"user_text_regex": "("}, "respond": {"text": "x"}}]},
        {"rules": [{"when": {}, "respond": {"text": "x", "grounding": True, "grounding_chunks": 0}}]},
        {"rules": [{"when": {}, "respond": {"text": "x", "grounding": True, "grounding_chunks": "2"}}]},
        {"rulez": []},
    ):
        with pytest.raises(ScriptError):
            Emulator(script=bad)


def test_script_from_file_and_latency(tmp_path: Any) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"latency_ms": 150, "rules": [{"when": {}, "respond": {"text": "from file"}}]}')
    with Emulator(script=str(path)) as emu:
        started = time.monotonic()
        body = post(emu.base_url, GEN, {"contents": [user("x")]}).json()
        assert time.monotonic() - started >= 0.15
        assert _parts(body)[0]["text"] == "from file"


def test_request_log_and_api_version(emu: Emulator) -> None:
    post(emu.base_url, "/v1/models/gemini-3.1-flash-lite:generateContent", {"contents": [user("v1")]}, key="secret")
    post(emu.base_url, GEN, {"contents": [user("beta")]}, key="secret")
    log = emu.requests
    assert [e["api_version"] for e in log] == ["v1", "v1beta"]
    assert all(e["headers"]["x-goog-api-key"] == "REDACTED" for e in log)
    assert "secret" not in repr(log)
    assert log[1]["body"] == {"contents": [user("beta")]}
    assert log[1]["method"] == "POST" and log[1]["path"] == GEN and log[1]["status"] == 200
    assert isinstance(log[0]["timestamp"], float)
    emu.clear_requests()
    assert emu.requests == []


def test_models_get_and_list(emu: Emulator) -> None:
    import requests

    resp = requests.get(emu.base_url + "/v1beta/models/gemini-3.1-flash-lite", headers={"x-goog-api-key": "k"},
                        timeout=10)  # fmt: skip
    assert resp.json()["name"] == "models/gemini-3.1-flash-lite"
    listed = requests.get(emu.base_url + "/v1beta/models", headers={"x-goog-api-key": "k"}, timeout=10).json()
    names = [m["name"] for m in listed["models"]]
    assert "models/gemini-3.1-flash-lite" in names and "models/gemini-3.1-flash-live-preview" in names

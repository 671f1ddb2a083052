"""The Gemini provider against the real emulator over HTTP: features and what goes on the wire."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import requests

from adk_actors import models
from adk_actors.errors import ConfigError, ContentError, ProviderError
from adk_actors.models import ModelResponse, ProviderResult, StreamFrame

from .conftest import API_KEY, api_bodies, open_emulator, user

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters_json_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WEATHER_RULES = {
    "rules": [
        {
            "when": {"tool_declared": "get_weather", "has_function_response": False},
            "respond": {
                "function_calls": [{"name": "get_weather", "args": {"city": "{user_text}"}}],
                "thought": "use tool",
            },
        },
        {"when": {"has_function_response": True}, "respond": {"text": "Forecast: {response.forecast}"}},
    ]
}


def _raw_sse(emu: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    """What the emulator streams for ``body``, fetched with a bare ``requests`` client (independent of ours)."""
    resp = requests.post(
        f"{emu.base_url}/v1beta/models/gemini-3.1-flash-lite:streamGenerateContent?alt=sse",
        json=body,
        headers={"x-goog-api-key": API_KEY},
        timeout=10,
    )
    with resp:
        return [json.loads(line[len(b"data: ") :]) for line in resp.content.split(b"\r\n") if line]


def test_generate_plain_text_returns_str_and_sends_key_header_to_v1beta(emu, cfg):
    emu.set_script({"rules": [{"when": {"user_text_equals": "hello"}, "respond": {"text": "Hi there"}}]})
    assert models.generate(cfg, [user("hello")]) == "Hi there"
    (req,) = emu.requests
    assert req["method"] == "POST" and req["path"] == "/v1beta/models/gemini-3.1-flash-lite:generateContent"
    assert req["headers"]["x-goog-api-key"] != "" and "key" not in req["query"]
    assert req["body"] == {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}


def test_generate_response_carries_usage_model_version_and_id(emu, cfg):
    r = models.generate_response(cfg, [user("count me")])
    raw = requests.post(
        f"{emu.base_url}/v1beta/models/gemini-3.1-flash-lite:generateContent",
        json=api_bodies(emu)[0],
        headers={"x-goog-api-key": API_KEY},
        timeout=10,
    ).json()
    usage = raw["usageMetadata"]
    assert r.usage["prompt_token_count"] == usage["promptTokenCount"]
    assert r.usage["total_token_count"] == usage["totalTokenCount"]
    assert r.model_version == raw["modelVersion"] and isinstance(r.response_id, str)
    assert r.finish_reason == "stop" and r.text == "You said: count me"


def test_env_key_and_env_base_url(emu, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    monkeypatch.setenv("GEMINI_BASE_URL", emu.base_url)
    assert models.generate({}, [user("env")]) == "You said: env"


def test_missing_api_key_fails_before_http(emu):
    with pytest.raises(ProviderError) as info:
        models.generate({"base_url": emu.base_url}, [user("x")])
    assert info.value.reason == "missing_api_key"
    assert emu.requests == []


def test_wrong_api_key_is_a_typed_error_that_never_shows_the_key():
    with open_emulator(script={"rules": []}, api_keys=["the-right-key"]) as server:
        bad = "AIza-wrong-key-that-must-not-leak"
        with pytest.raises(ProviderError) as info:
            models.generate({"api_key": bad, "base_url": server.base_url}, [user("x")])
        err = info.value
        assert err.reason == "invalid_api_key" and err.details["status"] == 400
        assert err.details["google_status"] == "INVALID_ARGUMENT"
        for text in (repr(err), str(err), json.dumps(err.to_dict()), repr(err.details)):
            assert bad not in text
        assert models.generate({"api_key": "the-right-key", "base_url": server.base_url}, [user("x")])


def test_system_instruction_from_config_and_history(emu, cfg):
    emu.set_script({"rules": [{"when": {"system_text_contains": "pirate"}, "respond": {"text": "Arr"}}]})
    cfg |= {"global_instruction": "Be safe.", "instructions": "Talk like a pirate."}
    assert models.generate(cfg, [{"role": "system", "content": "Be brief."}, user("hi")]) == "Arr"
    assert api_bodies(emu)[0]["systemInstruction"] == {
        "role": "user",
        "parts": [{"text": "Be safe."}, {"text": "Talk like a pirate."}, {"text": "Be brief."}],
    }


def test_function_and_search_tools_are_both_present_and_not_conflated(emu, cfg):
    cfg |= {
        "builtin_tools": ["google_search"],
        "tool_config": {"function_calling_config": {"mode": "any", "allowed_function_names": ["get_weather"]}},
    }
    models.generate(cfg, [user("Paris")], [WEATHER_TOOL, {"name": "get_time", "description": "t"}])
    body = api_bodies(emu)[0]
    assert sorted(body["tools"], key=json.dumps) == sorted(
        [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Current weather for a city",
                        "parametersJsonSchema": WEATHER_TOOL["parameters_json_schema"],
                    },
                    {"name": "get_time", "description": "t"},
                ]
            },
            {"googleSearch": {}},
        ],
        key=json.dumps,
    )
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}


def test_function_calling_round_trip_echoes_ids_and_signatures_byte_exactly(emu, cfg):
    emu.set_script(WEATHER_RULES)
    cfg |= {"thinking_config": {"include_thoughts": True}}
    first = models.generate_response(cfg, [user("Paris")], [WEATHER_TOOL])
    (call,) = first.function_calls
    assert call["name"] == "get_weather" and call["args"] == {"city": "Paris"} and call["id"]
    assert first.content["parts"][0] == {"type": "text", "text": "use tool", "thought": True}
    assert first.text == "" and isinstance(models.plain_output(first), dict)
    history = [
        user("Paris"),
        {"role": "model", "content": first.content},
        {
            "role": "user",
            "content": {
                "schema_version": 1,
                "parts": [
                    {
                        "type": "function_response",
                        "name": "get_weather",
                        "id": call["id"],
                        "response": {"forecast": "sunny"},
                    }
                ],
            },
        },
    ]
    # The emulator enforces Gemini 3's signature rule: a missing or altered signature would be a 400.
    second = models.generate_response(cfg, history, [WEATHER_TOOL])
    assert second.text == "Forecast: sunny"
    sent = api_bodies(emu)[1]["contents"]
    echoed_call = sent[1]["parts"][1]
    assert echoed_call["functionCall"]["id"] == call["id"]
    assert base64.b64decode(echoed_call["thoughtSignature"]) == base64.b64decode(call["thought_signature"])
    assert sent[1]["parts"][0] == {"text": "use tool", "thought": True}
    assert sent[2] == {
        "role": "user",
        "parts": [{"functionResponse": {"id": call["id"], "name": "get_weather", "response": {"forecast": "sunny"}}}],
    }


def test_tampered_signature_is_rejected_by_the_emulator_as_typed_400(emu, cfg):
    emu.set_script(WEATHER_RULES)
    first = models.generate_response(cfg, [user("Paris")], [WEATHER_TOOL])
    parts = [dict(p) for p in first.content["parts"]]
    for p in parts:
        if p["type"] == "function_call":
            p["thought_signature"] = base64.b64encode(b"forged").decode()
    history = [
        user("Paris"),
        {"role": "model", "content": {"schema_version": 1, "parts": parts}},
        {
            "role": "user",
            "content": {
                "schema_version": 1,
                "parts": [
                    {
                        "type": "function_response",
                        "name": "get_weather",
                        "id": first.function_calls[0]["id"],
                        "response": {"forecast": "x"},
                    }
                ],
            },
        },
    ]
    with pytest.raises(ProviderError) as info:
        models.generate_response(cfg, history, [WEATHER_TOOL])
    assert info.value.details["status"] == 400 and info.value.reason == "invalid_argument"


def test_generation_config_fields_reach_the_wire(emu, cfg):
    cfg |= {
        "generation_config": {
            "temperature": 0.3,
            "top_p": 0.8,
            "top_k": 20,
            "max_output_tokens": 256,
            "stop_sequences": ["STOP!"],
            "candidate_count": 1,
            "seed": 42,
            "thinking_config": {"thinking_level": "low", "include_thoughts": True},
            "safety_settings": [
                {"category": "hate_speech", "threshold": "block_low_and_above"},
                {"category": "dangerous_content", "threshold": "off"},
            ],
        }
    }
    models.generate(cfg, [user("hi")])
    body = api_bodies(emu)[0]
    assert body["generationConfig"] == {
        "temperature": 0.3,
        "topP": 0.8,
        "topK": 20,
        "maxOutputTokens": 256,
        "stopSequences": ["STOP!"],
        "candidateCount": 1,
        "seed": 42,
        "thinkingConfig": {"thinkingLevel": "LOW", "includeThoughts": True},
    }
    assert body["safetySettings"] == [
        {"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_LOW_AND_ABOVE"},
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "threshold": "OFF"},
    ]


def test_legacy_thinking_budget_reaches_the_wire(emu, cfg):
    models.generate(cfg | {"thinking_config": {"thinking_budget": 512}}, [user("hi")])
    assert api_bodies(emu)[0]["generationConfig"] == {"thinkingConfig": {"thinkingBudget": 512}}


@pytest.mark.parametrize(
    "bad",
    [
        {"thinking_config": {"thinking_level": "high", "thinking_budget": 1024}},
        {"generation_config": {"thinking_config": {"thinking_level": "low", "thinking_budget": 0}}},
        {"safety_settings": [{"category": "civic_integrity", "threshold": "off"}]},
        {
            "safety_settings": [
                {"category": "harassment", "threshold": "off"},
                {"category": "harassment", "threshold": "off"},
            ]
        },
        {"unknown_top_level": 1},
        {"generation_config": {"temprature": 1}},
    ],
)
def test_invalid_config_never_reaches_http(emu, cfg, bad):
    with pytest.raises(ConfigError):
        models.generate(cfg | bad, [user("hi")])
    with pytest.raises(ConfigError):
        models.stream(cfg | bad, [user("hi")], [], lambda _d: None)
    assert emu.requests == []


def _doc(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "parts": list(parts)}


def _b64_of_size(n: int) -> str:
    return base64.b64encode(b"\0" * n).decode()


_MB = 1_000_000
REJECTED_HISTORY = [
    (
        "file-uri",
        _doc({"type": "file_data", "mime_type": "text/plain", "uri": "file:///etc/passwd"}),
        "invalid_uri",
        {"rule": "scheme"},
    ),
    (
        "http-credentials-fragment",
        _doc({"type": "file_data", "mime_type": "text/html", "uri": "http://user:pw@host/x#frag"}),
        "invalid_uri",
        {"rule": "scheme"},
    ),
    (
        "https-credentials",
        _doc({"type": "file_data", "mime_type": "text/html", "uri": "https://user:pw@host/x"}),
        "invalid_uri",
        {"rule": "credentials"},
    ),
    (
        "https-fragment",
        _doc({"type": "file_data", "mime_type": "text/html", "uri": "https://host/x#frag"}),
        "invalid_uri",
        {"rule": "fragment"},
    ),
    (
        "mime-with-parameters",
        _doc({"type": "file_data", "mime_type": "Text/HTML; charset=x", "uri": "https://example.com/x"}),
        "invalid_mime_type",
        {},
    ),
    (
        "inline-mime-with-parameters",
        _doc({"type": "inline_data", "mime_type": "Text/HTML; charset=x", "data": "aGk="}),
        "invalid_mime_type",
        {},
    ),
    ("nul-in-text", "a\x00b", "invalid_json", {}),
    ("nul-in-text-part", _doc({"type": "text", "text": "ok"}, {"type": "text", "text": "a\x00b"}), "invalid_json", {}),
    ("nul-in-call-args", _doc({"type": "function_call", "name": "f", "args": {"k": "a\x00b"}}), "invalid_json", {}),
    (
        "inline-15-mb",
        _doc({"type": "inline_data", "mime_type": "image/png", "data": _b64_of_size(15 * _MB)}),
        "limit_exceeded",
        {"limit": "max_inline_part_bytes"},
    ),
    (
        "inline-total-over-15-mib",
        _doc(*[{"type": "inline_data", "mime_type": "image/png", "data": _b64_of_size(8 * 1024 * 1024)}] * 2),
        "limit_exceeded",
        {"limit": "max_inline_total_bytes"},
    ),
    ("unknown-part-key", _doc({"type": "text", "text": "x", "extra": 1}), "unknown_key", {}),
]


@pytest.mark.parametrize(
    ("content", "reason", "details"), [c[1:] for c in REJECTED_HISTORY], ids=[c[0] for c in REJECTED_HISTORY]
)
@pytest.mark.parametrize("role", ["user", "model"])
def test_history_is_validated_with_the_content_model_before_any_http(emu, cfg, content, reason, details, role):
    history = [user("hello"), {"role": role, "content": content}]
    for call in (
        lambda: models.generate(cfg, history),
        lambda: models.stream_content(cfg, history, [], lambda _f: None),
    ):
        with pytest.raises(ContentError) as info:
            call()
        assert info.value.reason == reason
        assert info.value.details["path"] == "history[1].content"
        assert details.items() <= info.value.details.items()
        assert "passwd" not in str(info.value.details) and "pw@" not in str(info.value.details)
    assert emu.requests == []  # nothing was sent


def test_bad_history_never_reaches_http(emu, cfg):
    with pytest.raises(ContentError):
        models.generate(cfg, [{"role": "user", "content": {"schema_version": 1, "parts": [{"type": "nope"}]}}])
    assert emu.requests == []


def test_thought_summaries_are_structured_and_never_in_visible_text(emu, cfg):
    emu.set_script({"rules": [{"respond": {"text": "The answer.", "thought": "Let me think."}}]})
    out = models.generate(
        cfg | {"thinking_config": {"thinking_level": "high", "include_thoughts": True}}, [user("why?")]
    )
    assert isinstance(out, dict) and out["schema_version"] == 1
    thoughts = [p for p in out["parts"] if p.get("thought")]
    visible = [p for p in out["parts"] if p["type"] == "text" and not p.get("thought")]
    assert [p["text"] for p in thoughts] == ["Let me think."]
    assert "".join(p["text"] for p in visible) == "The answer."
    deltas: list[str] = []
    final = models.stream(cfg | {"thinking_config": {"include_thoughts": True}}, [user("why?")], [], deltas.append)
    assert "".join(deltas) == "The answer." == final.text
    assert final.has_thoughts


def test_structured_json_output(emu, cfg):
    emu.set_script({"rules": [{"when": {"json_mode": True}, "respond": {"json": {"city": "Paris", "temp": 21}}}]})
    cfg |= {
        "response_mime_type": "application/json",
        "response_schema": {"type": "object", "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}}},
    }
    out = models.generate(cfg, [user("weather as json")])
    assert json.loads(out) == {"city": "Paris", "temp": 21}
    gen = api_bodies(emu)[0]["generationConfig"]
    assert gen == {
        "responseMimeType": "application/json",
        "responseSchema": {
            "type": "OBJECT",
            "properties": {"city": {"type": "STRING"}, "temp": {"type": "INTEGER"}},
            "propertyOrdering": ["city", "temp"],
        },
    }


def test_json_schema_output_uses_response_json_schema(emu, cfg):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": False}
    emu.set_script({"rules": [{"respond": {"json": {"n": 3}}}]})
    out = models.generate(cfg | {"generation_config": {"response_json_schema": schema}}, [user("n?")])
    assert json.loads(out) == {"n": 3}
    assert api_bodies(emu)[0]["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }


def test_grounding_envelope_on_generate(emu, cfg):
    emu.set_script(
        {"rules": [{"when": {"google_search": True}, "respond": {"text": "OTP 28 is out.", "grounding": True}}]}
    )
    out = models.generate(cfg | {"builtin_tools": ["google_search"]}, [user("latest OTP?")])
    assert isinstance(out, ProviderResult) and out.output == "OTP 28 is out."
    env = out.provider_metadata
    assert {k: env[k] for k in ("schema_version", "provider", "type")} == {
        "schema_version": 1,
        "provider": "gemini",
        "type": "google_search_grounding",
    }
    raw = requests.post(
        f"{emu.base_url}/v1beta/models/gemini-3.1-flash-lite:generateContent",
        json=api_bodies(emu)[0],
        headers={"x-goog-api-key": API_KEY},
        timeout=10,
    ).json()
    assert env["metadata"] == raw["candidates"][0]["groundingMetadata"]
    assert env["metadata"]["webSearchQueries"]


def test_grounding_is_attached_to_tool_call_responses_too(emu, cfg):
    emu.set_script(
        {
            "rules": [
                {"respond": {"function_calls": [{"name": "get_weather", "args": {"city": "x"}}], "grounding": True}}
            ]
        }
    )
    r = models.generate_response(cfg | {"builtin_tools": ["google_search"]}, [user("x")], [WEATHER_TOOL])
    assert r.function_calls and r.provider_metadata is not None
    out = models.plain_output(r)
    assert isinstance(out, ProviderResult) and isinstance(out.output, dict)


def test_ungrounded_answer_keeps_plain_return_even_with_search_enabled(emu, cfg):
    assert models.generate(cfg | {"builtin_tools": ["google_search"]}, [user("plain")]) == "You said: plain"


def test_stream_text_deltas_arrive_per_frame(emu, cfg):
    emu.set_script({"rules": [{"respond": {"text": "one two three four five six", "chunks": 4}}]})
    deltas: list[str] = []
    final = models.stream(cfg, [user("count")], [], deltas.append)
    raw = _raw_sse(emu, api_bodies(emu)[0])
    raw_texts = [
        "".join(p.get("text", "") for p in f["candidates"][0].get("content", {}).get("parts", [])) for f in raw
    ]
    assert deltas == [t for t in raw_texts if t]
    assert "".join(deltas) == "one two three four five six" == final.text
    assert isinstance(final, ModelResponse) and final.finish_reason == "stop"
    assert emu.requests[0]["path"].endswith(":streamGenerateContent") and emu.requests[0]["query"]["alt"] == ["sse"]


def test_content_stream_calls_back_once_per_decoded_frame_without_a_buffered_final(emu, cfg):
    emu.set_script({"rules": [{"respond": {"text": "alpha beta gamma delta", "thought": "hmm", "chunks": 3}}]})
    cfg |= {"thinking_config": {"include_thoughts": True}}
    frames: list[StreamFrame] = []
    final = models.stream_content(cfg, [user("go")], [], frames.append)
    raw = _raw_sse(emu, api_bodies(emu)[0])
    assert len(frames) == len(raw) and [f.index for f in frames] == list(range(len(raw)))
    assert "".join(f.text for f in frames) == final.text == "alpha beta gamma delta"
    assert frames[-1].finish_reason == "stop" and all(f.finish_reason is None for f in frames[:-1])
    thought_frames = [p for f in frames for p in f.content["parts"] if p.get("thought")]
    assert thought_frames and all("hmm" not in f.text for f in frames)
    assert final.usage["total_token_count"] == raw[-1]["usageMetadata"]["totalTokenCount"]


def test_streamed_grounding_accumulates_and_the_final_frame_carries_it(emu, cfg):
    emu.set_script({"rules": [{"respond": {"text": "grounded answer text", "grounding": True}}]})
    frames: list[StreamFrame] = []
    final = models.stream_content(cfg | {"builtin_tools": ["google_search"]}, [user("q")], [], frames.append)
    raw = _raw_sse(emu, api_bodies(emu)[0])
    expected: dict[str, Any] = {}
    for f in raw:
        for key, value in f["candidates"][0].get("groundingMetadata", {}).items():
            expected[key] = expected.get(key, []) + value if isinstance(value, list) else value
    assert expected, "the emulator streamed grounding metadata"
    assert final.provider_metadata["metadata"] == expected == frames[-1].provider_metadata["metadata"]


def test_text_stream_rejects_media_instead_of_dropping_it(emu, cfg, tmp_path):
    # The emulator's replay mode serves a recorded exchange byte for byte: here a frame carrying an image.
    frame = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}],
                },
                "finishReason": "STOP",
            }
        ]
    }
    with _replay_server(tmp_path, cfg, [user("draw")], [f"data: {json.dumps(frame)}\r\n\r\n"]) as server:
        c = cfg | {"base_url": server.base_url}
        with pytest.raises(ProviderError) as info:
            models.stream(c, [user("draw")], [], lambda _d: None)
        assert (info.value.reason, info.value.details) == ("unsupported_text_stream_part", {"type": "inline_data"})
        frames: list[StreamFrame] = []
        final = models.stream_content(c, [user("draw")], [], frames.append)
        assert final.content["parts"] == [{"type": "inline_data", "mime_type": "image/png", "data": "iVBORw0KGgo="}]
        assert isinstance(models.plain_output(final), dict)


def _replay_server(tmp_path, cfg, history, sse_events, *, status=200, content_type="text/event-stream"):
    from adk_actors.models.gemini import build_request, parse_config

    body = build_request(parse_config(cfg), history)
    record = {
        "method": "POST",
        "path": "/v1beta/models/gemini-3.1-flash-lite:streamGenerateContent",
        "query": {"alt": ["sse"]},
        "request_body": body,
        "status": status,
        "response_headers": {"content-type": content_type},
        "sse_events": sse_events,
    }
    path = tmp_path / "replay.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return open_emulator(replay=path)


def test_multimodal_input_goes_out_as_inline_and_file_data(emu, cfg):
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n\xff\xfe").decode()
    content = {
        "schema_version": 1,
        "parts": [
            {"type": "text", "text": "Describe"},
            {"type": "inline_data", "mime_type": "image/png", "data": png},
            {"type": "file_data", "mime_type": "application/pdf", "uri": "https://example.com/a.pdf"},
        ],
    }
    assert models.generate(cfg, [{"role": "user", "content": content}]) == "You said: Describe"
    parts = api_bodies(emu)[0]["contents"][0]["parts"]
    assert parts == [
        {"text": "Describe"},
        {"inlineData": {"mimeType": "image/png", "data": png}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.com/a.pdf"}},
    ]


def test_model_and_base_url_from_config(emu, cfg):
    models.generate(cfg | {"model": "models/gemini-2.5-flash", "base_url": emu.base_url + "/"}, [user("m")])
    assert emu.requests[0]["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"


def test_capabilities_report_only_what_is_implemented():
    assert models.capabilities("gemini") == {
        "streaming": True,
        "function_calling": True,
        "structured_output": True,
        "multimodal": True,
        "thinking": True,
        "safety_settings": True,
        "google_search_grounding": True,
        "builtin_tools": ["google_search"],
        "content_schema_version": 1,
        "live": False,
    }


@pytest.mark.parametrize("streaming", [False, True])
def test_blocked_prompt_is_a_typed_error(emu, cfg, streaming):
    emu.set_script({"rules": [{"respond": {"block_reason": "SAFETY"}}]})
    with pytest.raises(ProviderError) as info:
        if streaming:
            models.stream(cfg, [user("bad")], [], lambda _d: None)
        else:
            models.generate(cfg, [user("bad")])
    assert info.value.reason == "prompt_blocked" and info.value.details == {"block_reason": "safety"}


def test_finish_reason_is_reported_lowercase(emu, cfg):
    emu.set_script({"rules": [{"respond": {"text": "cut", "finish_reason": "MAX_TOKENS"}}]})
    assert models.generate_response(cfg, [user("long")]).finish_reason == "max_tokens"


def test_a_200_that_is_not_json_is_a_malformed_response(cfg, tmp_path):
    from adk_actors.models.gemini import build_request, parse_config

    record = {
        "method": "POST",
        "path": "/v1beta/models/gemini-3.1-flash-lite:generateContent",
        "query": {},
        "request_body": build_request(parse_config(cfg), [user("x")]),
        "status": 200,
        "response_headers": {"content-type": "application/json"},
        "response_body": "{not json",
    }
    path = tmp_path / "replay.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with open_emulator(replay=path) as server:
        with pytest.raises(ProviderError) as info:
            models.generate(cfg | {"base_url": server.base_url}, [user("x")])
    assert info.value.reason == "malformed_response"


def test_request_body_is_compact_utf8_json_that_keeps_schema_key_order():
    from adk_actors.models.gemini.provider import _Prepared

    tool = {
        "name": "f",
        "description": "d",
        "parameters_json_schema": {
            "type": "object",
            "properties": {"zeta": {"type": "string"}, "alpha": {"type": "number"}},
        },
    }
    prepared = _Prepared(
        {"api_key": API_KEY, "generation_config": {"temperature": 0.5, "top_k": 3}, "instructions": "é"},
        [user("héllo")],
        [tool],
    )
    body = json.loads(prepared.body)
    assert prepared.body == json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert b"h\xc3\xa9llo" in prepared.body  # UTF-8, not \\u escapes
    assert prepared.body.index(b'"zeta"') < prepared.body.index(b'"alpha"')  # the user's property order


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "a\x00b"], ids=["nan", "inf", "nul"])
def test_non_canonical_values_in_the_request_fail_before_http(emu, cfg, bad):
    tool = {
        "name": "f",
        "description": "d",
        "parameters_json_schema": {"type": "object", "properties": {"x": {"type": "number", "default": bad}}},
    }
    for call in (
        lambda: models.generate(cfg, [user("x")], [tool]),
        lambda: models.stream(cfg, [user("x")], [tool], lambda _d: None),
    ):
        with pytest.raises(ContentError) as info:
            call()
        assert info.value.reason == "invalid_json"
        assert "a\x00b" not in str(info.value) + str(info.value.details)
    assert emu.requests == []


SPREAD_GROUNDING = {
    "webSearchQueries": ["q1", "q2", "q3", "q4", "q5"],
    "searchEntryPoint": {"renderedContent": "<div>chips</div>"},
    "groundingChunks": [{"web": {"uri": f"https://example.com/{i}", "title": f"t{i}"}} for i in range(4)],
    "groundingSupports": [
        {
            "segment": {"startIndex": 0, "endIndex": 3, "text": "abc"},
            "groundingChunkIndices": [i],
            "confidenceScores": [0.9],
        }
        for i in range(3)
    ],
}


def _concat(raw_frames: list[dict[str, Any]]) -> dict[str, Any] | None:
    out: dict[str, Any] | None = None
    for f in raw_frames:
        for key, value in f["candidates"][0].get("groundingMetadata", {}).items():
            out = out or {}
            out[key] = out.get(key, []) + value if isinstance(value, list) else value
    return out


def test_grounding_spread_over_sse_frames_is_concatenated_in_order_on_the_final_event(emu, cfg):
    emu.set_script(
        {
            "rules": [
                {
                    "respond": {
                        "text": "a grounded answer long enough",
                        "chunks": 5,
                        "grounding": SPREAD_GROUNDING,
                        "grounding_chunks": 3,
                    }
                }
            ]
        }
    )
    frames: list[StreamFrame] = []
    final = models.stream_content(cfg | {"builtin_tools": ["google_search"]}, [user("q")], [], frames.append)
    raw = _raw_sse(emu, api_bodies(emu)[0])
    assert sum("groundingMetadata" in f["candidates"][0] for f in raw) == 3  # really spread over frames
    assert len(frames) == len(raw)
    for i, frame in enumerate(frames):  # each frame carries what has accumulated so far
        acc = _concat(raw[: i + 1])
        assert (frame.provider_metadata or {}).get("metadata") == acc
    assert _concat(raw) == SPREAD_GROUNDING
    assert final.provider_metadata == frames[-1].provider_metadata
    assert final.provider_metadata["metadata"] == SPREAD_GROUNDING and frames[-1].finish_reason == "stop"
    # the text stream returns the same combined metadata
    text_final = models.stream(cfg | {"builtin_tools": ["google_search"]}, [user("q")], [], lambda _d: None)
    assert text_final.provider_metadata["metadata"] == SPREAD_GROUNDING


def test_grounding_spread_over_sse_frames_is_attached_to_the_tool_call_response(emu, cfg):
    emu.set_script(
        {
            "rules": [
                {
                    "respond": {
                        "function_calls": [{"name": "get_weather", "args": {"city": "x"}}],
                        "thought": "search then call",
                        "grounding": SPREAD_GROUNDING,
                        "grounding_chunks": 3,
                    }
                }
            ]
        }
    )
    config = cfg | {"builtin_tools": ["google_search"], "thinking_config": {"include_thoughts": True}}
    frames: list[StreamFrame] = []
    final = models.stream_content(config, [user("x")], [WEATHER_TOOL], frames.append)
    raw = _raw_sse(emu, api_bodies(emu)[0])
    assert sum("groundingMetadata" in f["candidates"][0] for f in raw) == 3
    call_frame = frames[-1]
    assert call_frame.function_calls and call_frame.function_calls[0]["name"] == "get_weather"
    assert call_frame.provider_metadata["metadata"] == _concat(raw) == SPREAD_GROUNDING
    assert final.function_calls and final.provider_metadata["metadata"] == SPREAD_GROUNDING
    out = models.plain_output(final)
    assert isinstance(out, ProviderResult) and isinstance(out.output, dict)
    assert [p["type"] for p in out.output["parts"]] == ["text", "function_call"]


# ------------------------------------------------------------------------------------- the 256 KiB metadata cap

_CAP = 256 * 1024


def _sized_metadata(size: int, queries: int = 4) -> dict[str, Any]:
    """Grounding metadata whose compact JSON is exactly ``size`` bytes (spread-able over ``queries`` frames)."""
    meta: dict[str, Any] = {"webSearchQueries": ["q" * 1000] * (queries - 1) + [""]}
    base = len(json.dumps(meta, separators=(",", ":")).encode())
    meta["webSearchQueries"][-1] = "z" * (size - base)
    assert len(json.dumps(meta, separators=(",", ":")).encode()) == size
    return meta


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
def test_grounding_metadata_of_exactly_256_kib_is_accepted_through_the_emulator(emu, cfg, stream):
    meta = _sized_metadata(_CAP)
    emu.set_script({"rules": [{"respond": {"text": "big", "grounding": meta, "grounding_chunks": 4}}]})
    config = cfg | {"builtin_tools": ["google_search"]}
    if stream:
        result = models.stream_content(config, [user("q")], [], lambda _f: None)
    else:
        result = models.generate_response(config, [user("q")])
    assert result.provider_metadata["metadata"] == meta


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
def test_grounding_metadata_one_byte_over_256_kib_is_rejected_through_the_emulator(emu, cfg, stream):
    meta = _sized_metadata(_CAP + 1)
    emu.set_script({"rules": [{"respond": {"text": "big", "grounding": meta, "grounding_chunks": 4}}]})
    config = cfg | {"builtin_tools": ["google_search"]}
    with pytest.raises(ProviderError) as info:
        if stream:  # every frame's share is small: only the accumulated metadata crosses the cap
            models.stream_content(config, [user("q")], [], lambda _f: None)
        else:
            models.generate(config, [user("q")])
    assert info.value.reason == "provider_metadata_too_large"
    assert info.value.details == {"bytes": _CAP + 1, "limit": _CAP}

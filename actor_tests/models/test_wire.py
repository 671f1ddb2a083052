"""Content dicts ↔ Gemini wire parts, and request bodies (pure, no HTTP)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.errors import ConfigError, ContentError, ProviderError
from adk_actors.models.gemini.config import parse_config
from adk_actors.models.gemini.wire import (
    b64_bytes,
    build_request,
    normalise_b64,
    part_from_wire,
    part_to_wire,
    tools_to_wire,
)

SIG = base64.b64encode(b"\xff\xd8\xfe" * 5).decode()  # contains '/' and '+' in standard base64


@given(st.binary(max_size=64))
def test_base64_alphabets_and_padding_decode_to_the_same_bytes(data):
    std = base64.b64encode(data).decode()
    url = base64.urlsafe_b64encode(data).decode().rstrip("=")
    assert b64_bytes(std) == b64_bytes(url) == data
    assert normalise_b64(url) == std


def test_not_base64_is_rejected():
    with pytest.raises(ValueError):
        b64_bytes("not*base64")


def test_parts_map_to_camel_case_wire():
    assert part_to_wire({"type": "text", "text": "hi", "thought": True, "thought_signature": SIG}) == {
        "text": "hi",
        "thought": True,
        "thoughtSignature": SIG,
    }
    assert part_to_wire({"type": "inline_data", "mime_type": "image/png", "data": "iVBO"}) == {
        "inlineData": {"mimeType": "image/png", "data": "iVBO"}
    }
    assert part_to_wire({"type": "file_data", "mime_type": "application/pdf", "uri": "gs://b/o"}) == {
        "fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/o"}
    }
    assert part_to_wire(
        {"type": "function_call", "name": "f", "args": {"a": 1}, "id": "c1", "thought_signature": SIG}
    ) == {"functionCall": {"id": "c1", "name": "f", "args": {"a": 1}}, "thoughtSignature": SIG}
    assert part_to_wire({"type": "function_response", "name": "f", "response": {"r": 2}, "id": "c1"}) == {
        "functionResponse": {"id": "c1", "name": "f", "response": {"r": 2}}
    }


@pytest.mark.parametrize(
    "part",
    [
        {"type": "video"},
        {"type": "text"},
        {"type": "text", "text": 3},
        {"type": "function_call", "name": "", "args": {}},
        {"type": "function_call", "name": "f", "args": []},
        {"type": "inline_data", "mime_type": "image/png", "data": "@@"},
        "text",
    ],
)
def test_malformed_parts_fail_with_a_path(part):
    with pytest.raises(ContentError) as info:
        part_to_wire(part, "history[0].content.parts[0]")
    assert info.value.details["path"].startswith("history[0].content.parts[0]")


def test_wire_parts_read_both_spellings_and_signatures_normalise_to_standard_base64():
    sig_bytes = b"\xff\xd8\xfe" * 5
    url_sig = base64.urlsafe_b64encode(sig_bytes).decode().rstrip("=")
    camel = part_from_wire({"functionCall": {"id": "x", "name": "f", "args": {"q": 1}}, "thoughtSignature": url_sig})
    snake = part_from_wire({"function_call": {"id": "x", "name": "f", "args": {"q": 1}}, "thought_signature": SIG})
    assert (
        camel == snake == {"type": "function_call", "name": "f", "args": {"q": 1}, "id": "x", "thought_signature": SIG}
    )
    assert base64.b64decode(camel["thought_signature"]) == sig_bytes
    assert part_from_wire({"inline_data": {"mime_type": "image/png", "data": "_9g"}}) == {
        "type": "inline_data",
        "mime_type": "image/png",
        "data": "/9g=",
    }
    assert part_from_wire({"text": "t", "thought": True}) == {"type": "text", "text": "t", "thought": True}


def test_round_trip_part_through_wire_is_identity():
    parts = [
        {"type": "text", "text": "", "thought_signature": SIG},
        {"type": "function_call", "name": "f", "args": {}, "id": "1", "thought_signature": SIG},
        {"type": "file_data", "mime_type": "image/png", "uri": "https://x/y"},
    ]
    assert [part_from_wire(part_to_wire(p)) for p in parts] == parts


@pytest.mark.parametrize(
    ("wire", "reason"),
    [
        ({"functionResponse": {"name": "f", "response": {}}}, "unexpected_function_response"),
        ({"executableCode": {"language": "PYTHON", "code": "1"}}, "unsupported_response_part"),
        ({"text": 5}, "malformed_response"),
        ({"text": "x", "thoughtSignature": "!!"}, "malformed_response"),
    ],
)
def test_unusable_response_parts_fail_typed(wire, reason):
    with pytest.raises(ProviderError) as info:
        part_from_wire(wire)
    assert info.value.reason == reason


def test_tools_are_never_conflated():
    wire = tools_to_wire(
        [
            {"name": "get_weather", "description": "d", "parameters": {"type": "OBJECT"}},
            {"name": "t2", "parameters_json_schema": {"type": "object"}},
        ],
        ["google_search"],
    )
    assert wire == [
        {
            "functionDeclarations": [
                {"name": "get_weather", "description": "d", "parameters": {"type": "OBJECT"}},
                {"name": "t2", "parametersJsonSchema": {"type": "object"}},
            ]
        },
        {"googleSearch": {}},
    ]
    assert tools_to_wire([], ["google_search"]) == [{"googleSearch": {}}]
    assert tools_to_wire([], []) == []


@pytest.mark.parametrize(
    ("tools", "reason"),
    [
        ([{"name": "f", "extra": 1}], "unknown_key"),
        ([{"name": "1bad"}], "invalid_value"),
        ([{"name": "f"}, {"name": "f"}], "duplicate_tool"),
        ([{"name": "f", "parameters": {}, "parametersJsonSchema": {}}], "conflicting_keys"),
    ],
)
def test_bad_declarations_fail_before_http(tools, reason):
    with pytest.raises(ConfigError) as info:
        tools_to_wire(tools, [])
    assert info.value.reason == reason


def test_request_body_has_system_instruction_contents_and_config():
    cfg = parse_config(
        {
            "global_instruction": "Be safe.",
            "instructions": "Be brief.",
            "generation_config": {"temperature": 0.1},
            "safety_settings": [{"category": "harassment", "threshold": "off"}],
        }
    )
    body = build_request(
        cfg,
        [
            {"role": "system", "content": "Extra."},
            {"role": "user", "content": "hi"},
            {"role": "model", "content": {"schema_version": 1, "parts": [{"type": "text", "text": "yo"}]}},
        ],
    )
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "yo"}]}],
        "systemInstruction": {
            "role": "user",
            "parts": [{"text": "Be safe."}, {"text": "Be brief."}, {"text": "Extra."}],
        },
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "OFF"}],
        "generationConfig": {"temperature": 0.1},
    }


@pytest.mark.parametrize(
    ("history", "reason"),
    [
        ([], "empty_history"),
        ([{"role": "system", "content": "only system"}], "empty_history"),
        ([{"role": "tool", "content": "x"}], "invalid_role"),
        ([{"role": "user"}], "invalid_content"),
        ("hi", "invalid_content"),
        ([{"role": "user", "content": {"schema_version": 2, "parts": []}}], "invalid_content"),
    ],
)
def test_bad_history_fails_before_http(history, reason):
    with pytest.raises(ContentError) as info:
        build_request(parse_config({}), history)
    assert info.value.reason == reason

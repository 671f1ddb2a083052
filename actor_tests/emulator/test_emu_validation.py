"""Malformed requests answered with the exact status and error body of the real service (gemini.md §4.1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from adk_actors.emulator import Emulator

from .helpers import COUNT, GEN, KEY, STREAM, WEATHER_TOOL, post, raw_http, user

BR = "type.googleapis.com/google.rpc.BadRequest"
PKG = "type.googleapis.com/google.ai.generativelanguage.v1beta."
LIVE = "/v1beta/models/gemini-3.1-flash-live-preview:generateContent"


def bad_request(message: str, field: str | None = None) -> dict[str, Any]:
    violation = {"description": message} if field is None else {"field": field, "description": message}
    return {
        "code": 400,
        "message": message,
        "status": "INVALID_ARGUMENT",
        "details": [{"@type": BR, "fieldViolations": [violation]}],
    }


def plain(code: int, status: str, message: str) -> dict[str, Any]:
    return {"code": code, "message": message, "status": status}


def unknown(name: str, at: str | None = None) -> dict[str, Any]:
    if at is None:
        return bad_request(f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.')
    return bad_request(f"Invalid JSON payload received. Unknown name \"{name}\" at '{at}': Cannot find field.", at)


def invalid_value(path: str, typ: str, rendered: str) -> dict[str, Any]:
    return bad_request(f"Invalid value at '{path}' ({typ}), {rendered}", path)


def star(*lines: str, request: str = "GenerateContentRequest") -> dict[str, Any]:
    return plain(400, "INVALID_ARGUMENT", "".join(f"* {request}.{line}\n" for line in lines))


def invalid(message: str) -> dict[str, Any]:
    return plain(400, "INVALID_ARGUMENT", message)


def with_config(**cfg: Any) -> dict[str, Any]:
    return {"contents": [user("hi")], "generationConfig": cfg}


def decl(**fields: Any) -> dict[str, Any]:
    return {"contents": [user("hi")], "tools": [{"functionDeclarations": [fields]}]}


UNSIGNED_HISTORY = [
    user("weather in Paris?"),
    {"role": "model", "parts": [{"functionCall": {"id": "a1", "name": "get_weather", "args": {"city": "Paris"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"id": "a1", "name": "get_weather", "response": {"t": 1}}}]},
]
FORGED_HISTORY = [
    user("weather in Paris?"),
    {
        "role": "model",
        "parts": [{"functionCall": {"name": "get_weather", "args": {}}, "thoughtSignature": "AAECAwQFBgc="}],
    },
    {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"t": 1}}}]},
]
SECOND_STEP_UNSIGNED = [
    user("weather?"),
    {
        "role": "model",
        "parts": [{"functionCall": {"name": "a", "args": {}}, "thoughtSignature": "skip_thought_signature_validator"}],
    },
    {"role": "user", "parts": [{"functionResponse": {"name": "a", "response": {}}}]},
    {"role": "model", "parts": [{"text": "thinking"}, {"functionCall": {"name": "b", "args": {}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "b", "response": {}}}]},
]

# (id, path, body | raw bytes, api key, status, expected error object)
CASES: list[tuple[str, str, Any, str | None, int, dict[str, Any]]] = [
    ("bad-json", GEN, b"{bad json", KEY, 400,
     {"code": 400, "message": "Invalid JSON payload received. Unexpected token.\n{bad json\n^",
      "status": "INVALID_ARGUMENT",
      "details": [{"@type": BR, "fieldViolations": [
          {"description": "Invalid JSON payload received. Unexpected token."}]}]}),
    ("no-contents", GEN, {}, KEY, 400, star("contents: contents is not specified")),
    ("empty-contents", GEN, {"contents": []}, KEY, 400, star("contents: contents is not specified")),
    ("empty-parts", GEN, {"contents": [{"role": "user", "parts": []}]}, KEY, 400,
     star("contents[0].parts: contents.parts must not be empty.")),
    ("part-without-data", GEN, {"contents": [{"role": "user", "parts": [{}]}]}, KEY, 400,
     star("contents[0].parts[0].data: required oneof field 'data' must have one initialized field")),
    ("part-only-thought-flag", GEN, {"contents": [user("a"), {"role": "model", "parts": [{"thought": True}]}]}, KEY,
     400, star("contents[1].parts[0].data: required oneof field 'data' must have one initialized field")),
    ("two-data-members", GEN,
     {"contents": [{"parts": [{"text": "a", "inlineData": {"mimeType": "image/png", "data": "AA=="}}]}]}, KEY, 400,
     bad_request("Invalid JSON payload received. Oneof field 'data' is already set. Cannot set 'inlineData'",
                 "contents[0].parts[0]")),
    ("role-system", GEN, {"contents": [{"role": "system", "parts": [{"text": "x"}]}]}, KEY, 400,
     invalid("Please use a valid role: user, model.")),
    ("role-function", GEN, {"contents": [user("x"), {"role": "function", "parts": [{"text": "x"}]}]}, KEY, 400,
     invalid("Please use a valid role: user, model.")),
    ("unknown-top-level", GEN, {"contents": [user("x")], "foo": 1}, KEY, 400, unknown("foo")),
    ("thinking-budget-misplaced", GEN, with_config(thinkingBudget=1024), KEY, 400,
     unknown("thinkingBudget", "generation_config")),
    ("unknown-snake-nested", GEN, with_config(max_tokens=5), KEY, 400, unknown("max_tokens", "generation_config")),
    ("const-in-parameters", GEN,
     decl(name="f", parameters={"type": "OBJECT", "properties": {"a": {"type": "STRING"}, "b": {"const": "x"}}}),
     KEY, 400, unknown("const", "tools[0].function_declarations[0].parameters.properties[1].value")),
    ("unknown-in-part", GEN, {"contents": [{"parts": [{"text": "x", "colour": "red"}]}]}, KEY, 400,
     unknown("colour", "contents[0].parts[0]")),
    ("two-unknowns", GEN, {"contents": [{"parts": [{"text": "x"}], "author": "me"}], "bar": 2}, KEY, 400,
     {"code": 400, "status": "INVALID_ARGUMENT",
      "message": "Invalid JSON payload received. Unknown name \"author\" at 'contents[0]': Cannot find field.\n"
                 "Invalid JSON payload received. Unknown name \"bar\": Cannot find field.",
      "details": [{"@type": BR, "fieldViolations": [
          {"field": "contents[0]", "description":
           "Invalid JSON payload received. Unknown name \"author\" at 'contents[0]': Cannot find field."},
          {"description": "Invalid JSON payload received. Unknown name \"bar\": Cannot find field."}]}]}),
    ("text-not-string", GEN, {"contents": [{"parts": [{"text": 5}]}]}, KEY, 400,
     invalid_value("contents[0].parts[0].text", "TYPE_STRING", "5")),
    ("topk-fractional", GEN, with_config(topK=40.5), KEY, 400,
     invalid_value("generation_config.top_k", "TYPE_INT32", "40.5")),
    ("temperature-string", GEN, with_config(temperature="hot"), KEY, 400,
     invalid_value("generation_config.temperature", "TYPE_FLOAT", '"hot"')),
    ("bool-not-bool", GEN, with_config(thinkingConfig={"includeThoughts": "yes"}), KEY, 400,
     invalid_value("generation_config.thinking_config.include_thoughts", "TYPE_BOOL", '"yes"')),
    ("bad-harm-category", GEN,
     {"contents": [user("x")], "safetySettings": [{"category": "HARASSMENT", "threshold": "BLOCK_NONE"}]}, KEY, 400,
     invalid_value("safety_settings[0].category", PKG + "HarmCategory", '"HARASSMENT"')),
    ("lowercase-mode", GEN, {"contents": [user("x")], "toolConfig": {"functionCallingConfig": {"mode": "auto"}}},
     KEY, 400, invalid_value("tool_config.function_calling_config.mode", PKG + "Mode", '"auto"')),
    ("bad-schema-type", GEN, decl(name="f", parameters={"type": "objekt"}), KEY, 400,
     invalid_value("tools[0].function_declarations[0].parameters.type", PKG + "Type", '"objekt"')),
    ("bad-base64", GEN, {"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "!!!"}}]}]}, KEY,
     400, invalid_value("contents[0].parts[0].inline_data.data", "TYPE_BYTES", 'Base64 decoding failed for "!!!"')),
    ("contents-scalar", GEN, {"contents": "hi"}, KEY, 400, invalid_value("contents", PKG + "Content", '"hi"')),
    ("parameters-and-json-schema", GEN,
     decl(name="f", parameters={"type": "OBJECT"}, parametersJsonSchema={"type": "object"}), KEY, 400,
     star("tools[0].function_declarations[0].parameters_json_schema: "
          "parameters_json_schema must not be set when parameters is set.")),
    ("thinking-level-and-budget", GEN, with_config(thinkingConfig={"thinkingLevel": "LOW", "thinkingBudget": 128}),
     KEY, 400, star("generation_config.thinking_config: thinking_level and thinking_budget cannot be set at the "
                    "same time.")),
    ("response-schema-both", GEN,
     with_config(responseMimeType="application/json", responseSchema={"type": "OBJECT"},
                 responseJsonSchema={"type": "object"}), KEY, 400,
     star("generation_config.response_json_schema: response_json_schema must not be set when response_schema is "
          "set.")),
    ("bad-mime-type", GEN, with_config(responseMimeType="text/html"), KEY, 400,
     star("generation_config.response_mime_type: allowed mimetypes are `text/plain`, `application/json`, "
          "`application/xml`, `application/yaml` and `text/x.enum`.")),
    ("bad-function-name", GEN, decl(name="get weather"), KEY, 400,
     star("tools[0].function_declarations[0].name: Invalid function name. Must start with a letter or an "
          "underscore. Must be a-z, A-Z, 0-9, or contain underscores, dots, colons and dashes, with a maximum "
          "length of 128.")),
    ("function-response-without-name", GEN,
     {"contents": [user("x"), {"role": "user", "parts": [{"functionResponse": {"response": {}}}]}]}, KEY, 400,
     star("contents[1].parts[0].function_response.name: Name cannot be empty.")),
    ("cache-with-system-instruction", GEN,
     {"contents": [user("x")], "cachedContent": "cachedContents/abc", "systemInstruction": {"parts": [{"text": "s"}]}},
     KEY, 400, invalid("CachedContent can not be used with GenerateContent request setting system_instruction, tools "
                       "or tool_config.\n\nProposed fix: move those values to CachedContent from GenerateContent "
                       "request.")),
    ("cache-with-tools", GEN,
     {"contents": [user("x")], "cached_content": "cachedContents/abc", "tools": [WEATHER_TOOL]},
     KEY, 400, invalid("CachedContent can not be used with GenerateContent request setting system_instruction, tools "
                       "or tool_config.\n\nProposed fix: move those values to CachedContent from GenerateContent "
                       "request.")),
    ("cache-missing", GEN, {"contents": [user("x")], "cachedContent": "cachedContents/nope"}, KEY, 403,
     plain(403, "PERMISSION_DENIED", "CachedContent not found (or permission denied)")),
    ("missing-thought-signature", GEN, {"contents": UNSIGNED_HISTORY, "tools": [WEATHER_TOOL]}, KEY, 400,
     invalid("Function call `get_weather` in the `1.` content block is missing a `thought_signature`.")),
    ("second-step-unsigned", GEN, {"contents": SECOND_STEP_UNSIGNED}, KEY, 400,
     invalid("Function call `b` in the `3.` content block is missing a `thought_signature`.")),
    ("forged-thought-signature", GEN, {"contents": FORGED_HISTORY}, KEY, 400, invalid("Corrupted thought signature.")),
    ("missing-key", GEN, {"contents": [user("x")]}, None, 403,
     plain(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established "
           "identity). Please use API Key or other form of API consumer identity to call this API.")),
    ("wrong-key", GEN, {"contents": [user("x")]}, "wrong-key", 400,
     {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
      "details": [
          {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
           "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}},
          {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US",
           "message": "API key not valid. Please pass a valid API key."}]}),
    ("unknown-model", "/v1beta/models/gemini-9-ultra:generateContent", {"contents": [user("x")]}, KEY, 404,
     plain(404, "NOT_FOUND", "models/gemini-9-ultra is not found for API version v1beta, or is not supported for "
           "generateContent. Call ListModels to see the list of available models and their supported methods.")),
    ("unknown-model-stream", "/v1beta/models/gemini-9-ultra:streamGenerateContent", {"contents": [user("x")]}, KEY,
     404, plain(404, "NOT_FOUND", "models/gemini-9-ultra is not found for API version v1beta, or is not supported "
                "for streamGenerateContent. Call ListModels to see the list of available models and their supported "
                "methods.")),
    ("live-model-over-rest", LIVE, {"contents": [user("x")]}, KEY, 404,
     plain(404, "NOT_FOUND", "models/gemini-3.1-flash-live-preview is not found for API version v1beta, or is not "
           "supported for generateContent. Call ListModels to see the list of available models and their supported "
           "methods.")),
    ("stream-validation-before-200", STREAM, {"contents": []}, KEY, 400, star("contents: contents is not specified")),
    ("count-tokens-both", COUNT, {"contents": [user("x")], "generateContentRequest": {"contents": [user("x")]}}, KEY,
     400, invalid("* CountTokensRequest: contents and generate_content_request are mutually exclusive.\n")),
    ("count-tokens-unknown-field", COUNT, {"contents": [user("x")], "systemInstruction": {"parts": [{"text": "s"}]}},
     KEY, 400, unknown("systemInstruction")),
    ("cache-create-no-model", "/v1beta/cachedContents", {"contents": [user("x")]}, KEY, 400,
     star("cached_content.model: model is not specified", request="CreateCachedContentRequest")),
    ("cache-create-too-small", "/v1beta/cachedContents",
     {"model": "models/gemini-3.1-flash-lite", "contents": [user("tiny")]}, KEY, 400,
     invalid("Cached content is too small. total_token_count=1, min_total_token_count=1024")),
    ("cache-create-ttl-and-expire", "/v1beta/cachedContents",
     {"model": "models/gemini-3.1-flash-lite", "ttl": "60s", "expireTime": "2030-01-01T00:00:00Z"}, KEY, 400,
     bad_request("Invalid JSON payload received. Oneof field 'expiration' is already set. Cannot set 'expireTime'",
                 "")),
    ("cache-create-bad-ttl", "/v1beta/cachedContents", {"model": "models/gemini-3.1-flash-lite", "ttl": "an hour"},
     KEY, 400, invalid_value("ttl", "type.googleapis.com/google.protobuf.Duration", '"an hour"')),
]  # fmt: skip


@pytest.fixture
def strict_emu() -> Iterator[Emulator]:
    with Emulator(api_keys=[KEY]) as e:
        yield e


def test_case_count() -> None:
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("path", "body", "key", "status", "error"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_request(
    strict_emu: Emulator, path: str, body: Any, key: str | None, status: int, error: dict[str, Any]
) -> None:
    raw = body if isinstance(body, bytes) else None
    resp = post(strict_emu.base_url, path, None if raw else body, key=key, raw=raw)
    assert resp.status_code == status
    assert resp.headers["Content-Type"] == "application/json; charset=UTF-8"
    assert "Retry-After" not in resp.headers
    assert resp.json() == {"error": error}


def test_previous_turn_without_signature_is_accepted(strict_emu: Emulator) -> None:
    history = [*UNSIGNED_HISTORY, {"role": "model", "parts": [{"text": "It is 1."}]}, user("thanks")]
    resp = post(strict_emu.base_url, GEN, {"contents": history, "tools": [WEATHER_TOOL]})
    assert resp.status_code == 200, resp.text


def test_lax_signatures_accept_unsigned_calls() -> None:
    with Emulator(strict_signatures=False) as emu:
        resp = post(emu.base_url, GEN, {"contents": UNSIGNED_HISTORY, "tools": [WEATHER_TOOL]})
        assert resp.status_code == 200, resp.text


def test_key_in_query_and_snake_case_and_url_safe_base64(strict_emu: Emulator) -> None:
    body = {
        "contents": [{"role": "user", "parts": [
            {"text": "look"}, {"inline_data": {"mime_type": "image/png", "data": "_9g"}},
            {"file_data": {"file_uri": "https://example.com/f", "mime_type": "image/png"}}]}],
        "system_instruction": {"role": "user", "parts": [{"text": "be brief"}]},
        "generation_config": {"top_k": 40.0, "max_output_tokens": "64", "thinking_config": {"include_thoughts": True,
                              "thinking_level": "LOW"}, "response_modalities": ["TEXT"]},
        "tools": [{"function_declarations": [{"name": "f", "parameters_json_schema": {"type": "object", "const": 1}}]},
                  {"google_search": {}}],
        "tool_config": {"function_calling_config": {"mode": "AUTO", "allowed_function_names": ["f"]}},
        "safety_settings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}],
    }  # fmt: skip
    resp = post(strict_emu.base_url, GEN, body, key=None, params={"key": KEY})
    assert resp.status_code == 200, resp.text
    logged = strict_emu.requests[-1]
    assert logged["query"]["key"] == ["REDACTED"]


def test_oversize_body_is_413() -> None:
    with Emulator(max_body=1024) as emu:
        head = (f"POST {GEN} HTTP/1.1\r\nHost: x\r\nx-goog-api-key: k\r\nContent-Type: application/json\r\n"
                "Content-Length: 5000\r\n\r\n").encode()  # fmt: skip
        raw = raw_http(emu.port, head)
    status_line, _, rest = raw.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 413 Request Entity Too Large"
    assert b'"Request payload size exceeds the limit: 1024 bytes."' in rest


def test_wrong_http_method_and_unknown_path(strict_emu: Emulator) -> None:
    resp = requests.get(strict_emu.base_url + GEN, headers={"x-goog-api-key": KEY}, timeout=10)
    assert resp.status_code == 404
    assert resp.json()["error"]["status"] == "NOT_FOUND"
    resp = requests.get(strict_emu.base_url + "/nope", timeout=10)
    assert resp.status_code == 404


SIGNED = "skip_thought_signature_validator"
TWO_CALLS = {"role": "model", "parts": [
    {"functionCall": {"id": "c1", "name": "a", "args": {}}, "thoughtSignature": SIGNED},
    {"functionCall": {"id": "c2", "name": "b", "args": {}}}]}  # fmt: skip
STRICT_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("schema-without-mime", with_config(responseSchema={"type": "OBJECT"}),
     star("generation_config.response_mime_type: response_mime_type must be application/json or text/x.enum when a "
          "response schema is set.")),
    ("allowed-names-in-auto",
     {"contents": [user("x")], "tools": [WEATHER_TOOL],
      "toolConfig": {"functionCallingConfig": {"mode": "AUTO", "allowedFunctionNames": ["get_weather"]}}},
     star("tool_config.function_calling_config.allowed_function_names: allowed_function_names may only be set when "
          "mode is ANY or VALIDATED.")),
    ("response-count-mismatch",
     {"contents": [user("x"), TWO_CALLS,
                   {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "a", "response": {}}}]}]},
     invalid("Please ensure that the number of function response parts is equal to the number of function call "
             "parts of the function call turn.")),
    ("response-id-mismatch",
     {"contents": [user("x"), TWO_CALLS, {"role": "user", "parts": [
         {"functionResponse": {"id": "c1", "name": "a", "response": {}}},
         {"functionResponse": {"id": "zz", "name": "b", "response": {}}}]}]},
     star("contents[2].parts[1].function_response.id: function response id 'zz' does not match a function call of "
          "the previous turn.")),
]  # fmt: skip


@pytest.mark.parametrize(("body", "error"), [c[1:] for c in STRICT_CASES], ids=[c[0] for c in STRICT_CASES])
def test_opt_in_strict_rules(body: dict[str, Any], error: dict[str, Any]) -> None:
    with Emulator(strict=True) as strict, Emulator() as lenient:
        resp = post(strict.base_url, GEN, body)
        assert (resp.status_code, resp.json()) == (400, {"error": error})
        assert post(lenient.base_url, GEN, body).status_code == 200

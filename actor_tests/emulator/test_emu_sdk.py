"""The official google-genai SDK as an independent client of the emulator, and its pydantic types as a validator."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from google import genai
from google.genai import errors, types
from pydantic import ValidationError

from adk_actors.emulator import Emulator

from .conftest import Served, UnknownEnumValue, sdk_type_for, validate_with_sdk
from .helpers import GEN, STREAM, WEATHER_TOOL, post, sse_events, user

MODEL = "gemini-3.1-flash-lite"
NO_AFC = types.AutomaticFunctionCallingConfig(disable=True)
WEATHER_DECL = types.FunctionDeclaration(
    name="get_weather",
    description="Current weather for a city.",
    parameters=types.Schema(type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)}),
)


@pytest.fixture
def client(emu: Emulator) -> Iterator[genai.Client]:
    c = genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=emu.base_url, api_version="v1beta"))
    yield c
    c.close()


def test_sdk_generate(client: genai.Client, emu: Emulator) -> None:
    resp = client.models.generate_content(model=MODEL, contents="hello sdk")
    assert resp.text == "You said: hello sdk"
    assert resp.usage_metadata is not None and resp.usage_metadata.total_token_count
    assert resp.response_id and resp.model_version == MODEL
    assert emu.requests[-1]["api_version"] == "v1beta"
    assert emu.requests[-1]["headers"]["x-goog-api-key"] == "REDACTED"


def test_sdk_generate_with_snake_case_config(client: genai.Client) -> None:
    cfg = types.GenerateContentConfig(
        system_instruction="Be brief.",
        temperature=0.2,
        top_k=40,
        max_output_tokens=256,
        stop_sequences=["END"],
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_level=types.ThinkingLevel.LOW),
        safety_settings=[types.SafetySetting(category=types.HarmCategory.HARM_CATEGORY_HARASSMENT,
                                             threshold=types.HarmBlockThreshold.BLOCK_ONLY_HIGH)],
        automatic_function_calling=NO_AFC,
    )  # fmt: skip
    parts = [types.Part(text="look at"), types.Part.from_bytes(data=b"\xff\xd8\xff\xfb", mime_type="image/jpeg")]
    resp = client.models.generate_content(model=MODEL, contents=types.Content(role="user", parts=parts), config=cfg)
    assert resp.candidates and resp.candidates[0].content and resp.candidates[0].content.parts
    thought, answer = resp.candidates[0].content.parts
    assert thought.thought is True
    assert answer.text == "You said: look at"
    assert isinstance(answer.thought_signature, bytes)


def test_sdk_stream(client: genai.Client) -> None:
    chunks = list(client.models.generate_content_stream(model=MODEL, contents="stream this please"))
    assert len(chunks) >= 3
    assert "".join(c.text or "" for c in chunks) == "You said: stream this please"
    assert len({c.response_id for c in chunks}) == 1
    assert chunks[-1].candidates and chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP


def test_sdk_function_calling_round_trip(client: genai.Client, emu: Emulator) -> None:
    cfg = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[WEATHER_DECL])],
                                      automatic_function_calling=NO_AFC)  # fmt: skip
    question = types.Part(text="What is the weather in Tokyo?")
    history: list[types.Content] = [types.Content(role="user", parts=[question])]
    first = client.models.generate_content(model=MODEL, contents=history, config=cfg)
    assert first.function_calls and first.function_calls[0].name == "get_weather"
    call = first.function_calls[0]
    assert call.args == {"city": "Tokyo"} and call.id
    assert first.candidates and first.candidates[0].content
    history.append(first.candidates[0].content)
    history.append(types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
        id=call.id, name=call.name, response={"result": "sunny and 22 °C"}))]))  # fmt: skip
    second = client.models.generate_content(model=MODEL, contents=history, config=cfg)
    assert second.text == "The weather in Tokyo is sunny and 22 °C."
    sent_sig = emu.requests[-1]["body"]["contents"][1]["parts"][0]["thoughtSignature"]
    assert "-" in sent_sig or "_" in sent_sig  # the SDK echoed it in the URL-safe alphabet and it was accepted


def test_sdk_count_tokens(client: genai.Client) -> None:
    resp = client.models.count_tokens(model=MODEL, contents="12345678")
    assert resp.total_tokens == 2


def test_sdk_caches(client: genai.Client) -> None:
    big = "cache me " * 600
    cache = client.caches.create(model=MODEL, config=types.CreateCachedContentConfig(
        contents=[types.Content(role="user", parts=[types.Part(text=big)])], system_instruction="You are terse.",
        tools=[types.Tool(function_declarations=[WEATHER_DECL])], ttl="3600s", display_name="sdk"))  # fmt: skip
    assert cache.name and cache.name.startswith("cachedContents/")
    assert cache.usage_metadata and cache.usage_metadata.total_token_count
    got = client.caches.get(name=cache.name)
    assert got.display_name == "sdk" and got.model == f"models/{MODEL}"
    updated = client.caches.update(name=cache.name, config=types.UpdateCachedContentConfig(ttl="600s"))
    assert updated.expire_time and got.expire_time and updated.expire_time < got.expire_time
    assert [c.name for c in client.caches.list(config={"page_size": 5})] == [cache.name]
    resp = client.models.generate_content(
        model=MODEL, contents="hi", config=types.GenerateContentConfig(cached_content=cache.name)
    )
    assert resp.usage_metadata
    assert resp.usage_metadata.cached_content_token_count == cache.usage_metadata.total_token_count
    client.caches.delete(name=cache.name)
    assert list(client.caches.list()) == []
    with pytest.raises(errors.ClientError) as info:
        client.caches.get(name=cache.name)
    assert info.value.code == 403


def test_sdk_errors(emu: Emulator, client: genai.Client) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"fault": {"status": 429, "retry_delay": "2s"}, "times": 1}},
                              {"when": {}, "respond": {"fault": {"status": 503}, "times": 1}}]})  # fmt: skip
    with pytest.raises(errors.ClientError) as quota:
        client.models.generate_content(model=MODEL, contents="x")
    assert quota.value.code == 429 and quota.value.status == "RESOURCE_EXHAUSTED"
    with pytest.raises(errors.ServerError) as overloaded:
        client.models.generate_content(model=MODEL, contents="x")
    assert overloaded.value.code == 503
    with pytest.raises(errors.ClientError) as missing:
        client.models.generate_content(model="gemini-0-nano", contents="x")
    assert missing.value.code == 404


def test_sdk_midstream_error_raises(emu: Emulator, client: genai.Client) -> None:
    emu.set_script({"rules": [{"when": {}, "respond": {"fault": {"kind": "midstream_error", "after_chunks": 1}}}]})
    received = []
    with pytest.raises(errors.APIError) as info:
        for chunk in client.models.generate_content_stream(model=MODEL, contents="x"):
            received.append(chunk)
    assert len(received) == 1 and info.value.code == 503


# ----------------------------------------------------------------------------------- every response shape validates

SHAPES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("text", {"text": "plain"}, {}),
    ("calls", {"function_calls": [{"name": "a", "args": {"x": [1, {"y": None}]}}, {"name": "b"}]}, {}),
    ("thoughts", {"thought": "hmm", "text": "ok"}, {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}),
    ("grounding", {"text": "Spain won. It was in Berlin!", "grounding": True}, {"tools": [{"googleSearch": {}}]}),
    ("json", {"json": {"a": 1, "b": ["x"]}}, {"generationConfig": {"responseMimeType": "application/json"}}),
    ("blocked", {"block_reason": "SAFETY"}, {}),
    ("max-tokens", {"thought": "long", "finish_reason": "MAX_TOKENS", "text": ""}, {}),
    ("code-execution", {"code_execution": {"code": "print(6*7)", "output": "42\n"}, "text": "It is 42."},
     {"tools": [{"codeExecution": {}}]}),
    ("code-execution-failed", {"code_execution": {"code": "1/0", "output": "ZeroDivisionError",
                                                  "outcome": "OUTCOME_FAILED"}}, {"tools": [{"codeExecution": {}}]}),
    ("final-empty-text", {"text": "answer", "final_chunk": "empty_text"}, {}),
    ("final-finish-only", {"text": "answer", "final_chunk": "finish_only"}, {}),
    ("final-finish-only-calls", {"function_calls": [{"name": "a"}], "final_chunk": "finish_only"}, {}),
    ("grounding-spread", {"text": "Spain won. It was in Berlin!", "grounding": True, "grounding_chunks": 3},
     {"tools": [{"googleSearch": {}}]}),
    ("grounding-spread-call", {"function_calls": [{"name": "a"}], "grounding": True, "grounding_chunks": 2},
     {"tools": [{"googleSearch": {}}]}),
]  # fmt: skip


@pytest.mark.parametrize(("respond", "extra"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_sdk_types_accept_every_response(respond: dict[str, Any], extra: dict[str, Any]) -> None:
    with Emulator(script={"rules": [{"when": {}, "respond": respond}]}) as emu:
        body = {"contents": [user("Who won?")], "tools": [WEATHER_TOOL], **extra}
        if "tools" in extra:
            body["tools"] = extra["tools"] + [WEATHER_TOOL]
        unary = post(emu.base_url, GEN, body)
        assert unary.status_code == 200, unary.text
        types.GenerateContentResponse.model_validate(unary.json())
        stream = post(emu.base_url, STREAM, body, params={"alt": "sse"})
        events = sse_events(stream.content)
        assert events
        for event in events:
            types.GenerateContentResponse.model_validate(event)
        for item in post(emu.base_url, STREAM, body).json():
            types.GenerateContentResponse.model_validate(item)


def test_sdk_types_accept_other_resources(emu: Emulator, served_bodies: list[Served]) -> None:
    cache = post(emu.base_url, "/v1beta/cachedContents",
                 {"model": f"models/{MODEL}", "contents": [user("x " * 3000)]}).json()  # fmt: skip
    types.CachedContent.model_validate(cache)
    count = post(emu.base_url, "/v1beta/models/gemini-3.1-flash-lite:countTokens", {"contents": [user("x")]})
    assert "promptTokensDetails" in count.json()  # the real body, validated as served (see conftest)
    cached_count = post(emu.base_url, "/v1beta/models/gemini-3.1-flash-lite:countTokens", {
        "generateContentRequest": {"model": f"models/{MODEL}", "contents": [user("x")],
                                   "cachedContent": cache["name"]}})  # fmt: skip
    assert cached_count.json()["cachedContentTokenCount"] == cache["usageMetadata"]["totalTokenCount"]
    assert post(emu.base_url, STREAM, {"contents": [user("x")], "cachedContent": cache["name"]},
                params={"alt": "sse"}).status_code == 200  # fmt: skip
    assert post(emu.base_url, GEN, {"contents": [user("x")], "cachedContent": cache["name"]}).status_code == 200
    requests.get(f"{emu.base_url}/v1beta/cachedContents", headers={"x-goog-api-key": "k"}, timeout=10)
    requests.patch(f"{emu.base_url}/v1beta/{cache['name']}", json={"ttl": "60s"}, headers={"x-goog-api-key": "k"},
                   timeout=10)  # fmt: skip
    requests.delete(f"{emu.base_url}/v1beta/{cache['name']}", headers={"x-goog-api-key": "k"}, timeout=10)
    validated = [validate_with_sdk(item) for item in served_bodies]
    assert {"CachedContent", "ListCachedContentsResponse", "DeleteCachedContentResponse", "CountTokensResponse",
            "GenerateContentResponse"} <= set(validated)  # fmt: skip
    usage = [json.loads(i.body)["usageMetadata"] for i in served_bodies if sdk_type_for(i) == "GenerateContentResponse"]
    assert usage and all(
        u["cacheTokensDetails"][0]["tokenCount"] == cache["usageMetadata"]["totalTokenCount"] for u in usage
    )  # cached-content usage was served (and so validated)


def test_the_served_body_check_rejects_what_the_sdk_rejects() -> None:
    path = f"/v1beta/models/{MODEL}:generateContent"
    good = b'{"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "index": 0}]}'
    assert validate_with_sdk(Served("POST", path, 200, good)) == "GenerateContentResponse"
    for bad in (
        b'{"candidates": [], "bogusField": 1}',
        b'{"candidates": [{"content": {"parts": [{"text": "x", "thoughtSignature": "not base64!"}]}}]}',
        b'{"candidates": [{"content": {"parts": [{"executableCode": {"language": "COBOL!"}}]}}]}',
        b'{"candidates": [{"finishReason": "DONE_AND_DUSTED"}]}',
    ):
        with pytest.raises((ValidationError, UnknownEnumValue)):
            validate_with_sdk(Served("POST", path, 200, bad))
    count = b'{"totalTokens": 2, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": "many"}]}'
    with pytest.raises(ValidationError):
        validate_with_sdk(Served("POST", f"/v1beta/models/{MODEL}:countTokens", 200, count))
    assert validate_with_sdk(Served("POST", path, 400, b'{"error": {}}')) is None  # errors are not SDK types


def test_sdk_async_client(client: genai.Client) -> None:
    import asyncio

    async def run() -> tuple[str, str]:
        unary = await client.aio.models.generate_content(model=MODEL, contents="async hello")
        pieces = [c.text or "" async for c in await client.aio.models.generate_content_stream(
            model=MODEL, contents="async stream")]  # fmt: skip
        await client.aio.aclose()
        return unary.text or "", "".join(pieces)

    assert asyncio.run(run()) == ("You said: async hello", "You said: async stream")

"""Independent cross-check: the official google-genai SDK and our provider, same logical requests, same emulator.

Request bodies are compared field by field after normalising key case (the SDK mixes snake_case into camelCase) and
base64 alphabet (the SDK sends URL-safe); responses must parse to the same text, calls, ids, signatures and usage.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from adk_actors import models
from adk_actors.models.gemini.wire import b64_bytes

from .conftest import API_KEY, api_bodies, open_emulator, user

genai = pytest.importorskip("google.genai")
types = genai.types

_B64_KEYS = {"thoughtSignature", "data"}
TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters_json_schema": {
        "type": "object",
        "properties": {"city_name": {"type": "string"}},
        "required": ["city_name"],
    },
}


def _camel(key: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)


# Where user data starts: below these keys nothing is renamed (property names, call args, response payloads are the
# application's own keys and must arrive exactly as written; a client that camel-cases them is broken).
_OPAQUE = {"args", "parametersJsonSchema", "responseJsonSchema"}
_SCHEMAS = {"parameters", "responseSchema"}  # legacy Schema protos: protocol keys, but a user-named property map


def _schema(value: Any) -> Any:
    """A legacy ``Schema``: protocol keys camel-cased; ``properties`` keys (user names) left untouched."""
    if isinstance(value, list):
        return [_schema(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for k, v in value.items():
        key = _camel(k)
        if key == "properties" and isinstance(v, dict):
            out[key] = {name: _schema(sub) for name, sub in v.items()}
        elif key in ("items", "anyOf"):
            out[key] = _schema(v)
        else:
            out[key] = v
    return out


def normalise(value: Any, key: str = "", parent: str = "") -> Any:
    """Protocol keys → camelCase, base64 → bytes, tool order → sorted, an empty generationConfig dropped.

    User data is compared verbatim: function-call ``args``, function-response ``response``, JSON schemas
    (``parametersJsonSchema``/``responseJsonSchema``) and the property names of legacy ``parameters``/
    ``responseSchema``/declaration ``response`` schemas.
    """
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            ck = _camel(k)
            if ck in _OPAQUE or (ck == "response" and key == "functionResponse"):
                out[ck] = v
            elif ck in _SCHEMAS or (ck == "response" and parent == "functionDeclarations"):
                out[ck] = _schema(v)
            else:
                out[ck] = normalise(v, ck, key)
        if out.get("generationConfig") == {}:
            del out["generationConfig"]
        if isinstance(out.get("tools"), list):
            out["tools"] = sorted(out["tools"], key=lambda t: json.dumps(t, sort_keys=True, default=repr))
        return out
    if isinstance(value, list):
        return [normalise(v, "", key) for v in value]
    if key in _B64_KEYS and isinstance(value, str):
        return b64_bytes(value)
    return value


def test_normalise_renames_protocol_keys_only():
    body = {
        "contents": [
            {
                "role": "model",
                "parts": [
                    {
                        "function_call": {"name": "f", "args": {"city_name": "x", "nested_key": {"deep_key": 1}}},
                        "thought_signature": "_-8",
                    }
                ],
            },
            {"role": "user", "parts": [{"function_response": {"name": "f", "response": {"temp_c": 3}}}]},
        ],
        "tools": [
            {
                "function_declarations": [
                    {
                        "name": "f",
                        "parameters_json_schema": {"type": "object", "properties": {"city_name": {}}},
                        "response": {"type": "OBJECT", "properties": {"temp_c": {"type": "NUMBER", "max_items": "1"}}},
                    },
                    {
                        "name": "g",
                        "parameters": {
                            "type": "OBJECT",
                            "properties": {
                                "snake_name": {
                                    "type": "ARRAY",
                                    "items": {"type": "OBJECT", "properties": {"inner_name": {"type": "STRING"}}},
                                }
                            },
                            "property_ordering": ["snake_name"],
                        },
                    },
                ]
            }
        ],
        "generation_config": {"response_json_schema": {"properties": {"user_key": {}}}, "response_mime_type": "x"},
    }
    assert normalise(body) == {
        "contents": [
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "f", "args": {"city_name": "x", "nested_key": {"deep_key": 1}}},
                        "thoughtSignature": b"\xff\xef",
                    }
                ],
            },
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"temp_c": 3}}}]},
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "f",
                        "parametersJsonSchema": {"type": "object", "properties": {"city_name": {}}},
                        "response": {"type": "OBJECT", "properties": {"temp_c": {"type": "NUMBER", "maxItems": "1"}}},
                    },
                    {
                        "name": "g",
                        "parameters": {
                            "type": "OBJECT",
                            "properties": {
                                "snake_name": {
                                    "type": "ARRAY",
                                    "items": {"type": "OBJECT", "properties": {"inner_name": {"type": "STRING"}}},
                                }
                            },
                            "propertyOrdering": ["snake_name"],
                        },
                    },
                ]
            }
        ],
        "generationConfig": {"responseJsonSchema": {"properties": {"user_key": {}}}, "responseMimeType": "x"},
    }
    # a client that camel-cased user keys would now differ
    assert normalise({"functionCall": {"args": {"city_name": 1}}}) != normalise(
        {"functionCall": {"args": {"cityName": 1}}}
    )


@pytest.fixture
def client(emu) -> Iterator[Any]:
    sdk = genai.Client(api_key=API_KEY, http_options=types.HttpOptions(base_url=emu.base_url, api_version="v1beta"))
    try:
        yield sdk
    finally:
        sdk.close()


def _sdk_part(part: dict[str, Any]) -> Any:
    sig = base64.b64decode(part["thought_signature"]) if "thought_signature" in part else None
    kind = part["type"]
    if kind == "text":
        return types.Part(text=part["text"], thought=part.get("thought"), thought_signature=sig)
    if kind == "inline_data":
        return types.Part(inline_data=types.Blob(mime_type=part["mime_type"], data=base64.b64decode(part["data"])))
    if kind == "file_data":
        return types.Part(file_data=types.FileData(mime_type=part.get("mime_type"), file_uri=part["uri"]))
    if kind == "function_call":
        return types.Part(
            function_call=types.FunctionCall(id=part.get("id"), name=part["name"], args=part["args"]),
            thought_signature=sig,
        )
    return types.Part(
        function_response=types.FunctionResponse(id=part.get("id"), name=part["name"], response=part["response"])
    )


def _sdk_contents(history: list[dict[str, Any]]) -> list[Any]:
    out = []
    for entry in history:
        content = entry["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content["parts"]
        out.append(types.Content(role=entry["role"], parts=[_sdk_part(p) for p in parts]))
    return out


def _sdk_tools(tools: list[dict[str, Any]], search: bool) -> list[Any]:
    out = [types.Tool(google_search=types.GoogleSearch())] if search else []
    if tools:
        out.append(types.Tool(function_declarations=[types.FunctionDeclaration(**t) for t in tools]))
    return out


def _last_two(emu: Any) -> tuple[Any, Any]:
    ours, sdk = api_bodies(emu)[-2:]
    return normalise(ours), normalise(sdk)


def test_full_config_request_matches_the_sdk(emu, cfg, client):
    png = base64.b64encode(b"\x89PNG\xff\xfe\xfd").decode()
    history = [
        {
            "role": "user",
            "content": {
                "schema_version": 1,
                "parts": [
                    {"type": "text", "text": "Describe and look up"},
                    {"type": "inline_data", "mime_type": "image/png", "data": png},
                    {"type": "file_data", "mime_type": "application/pdf", "uri": "https://example.com/doc.pdf"},
                ],
            },
        }
    ]
    config = cfg | {
        "instructions": "Be concise.",
        "builtin_tools": ["google_search"],
        "tool_config": {"function_calling_config": {"mode": "auto"}},
        "generation_config": {
            "temperature": 0.4,
            "top_p": 0.9,
            "top_k": 32,
            "max_output_tokens": 300,
            "stop_sequences": ["END"],
            "seed": 11,
            "candidate_count": 1,
            "thinking_config": {"thinking_level": "medium", "include_thoughts": True},
            "safety_settings": [
                {"category": "harassment", "threshold": "block_only_high"},
                {"category": "sexually_explicit", "threshold": "block_medium_and_above"},
            ],
        },
    }
    ours = models.generate_response(config, history, [TOOL])
    sdk = client.models.generate_content(
        model="gemini-3.1-flash-lite",
        contents=_sdk_contents(history),
        config=types.GenerateContentConfig(
            system_instruction="Be concise.",
            temperature=0.4,
            top_p=0.9,
            top_k=32,
            max_output_tokens=300,
            stop_sequences=["END"],
            seed=11,
            candidate_count=1,
            thinking_config=types.ThinkingConfig(thinking_level="MEDIUM", include_thoughts=True),
            safety_settings=[
                types.SafetySetting(category="HARM_CATEGORY_HARASSMENT", threshold="BLOCK_ONLY_HIGH"),
                types.SafetySetting(category="HARM_CATEGORY_SEXUALLY_EXPLICIT", threshold="BLOCK_MEDIUM_AND_ABOVE"),
            ],
            tools=_sdk_tools([TOOL], search=True),
            tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(mode="AUTO")),
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        ),
    )
    a, b = _last_two(emu)
    assert a == b
    assert ours.text == sdk.text
    assert emu.requests[-1]["path"] == emu.requests[-2]["path"]


def test_function_call_round_trip_matches_the_sdk(emu, cfg, client):
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {
                        "function_calls": [
                            {"name": "get_weather", "args": {"city_name": "Oslo"}},
                            {"name": "get_weather", "args": {"city_name": "Rome"}},
                        ],
                        "thought": "two cities",
                    },
                },
                {"when": {"has_function_response": True}, "respond": {"text": "Done: {response_text}"}},
            ]
        }
    )
    config = cfg | {"thinking_config": {"include_thoughts": True}}
    sdk_config = types.GenerateContentConfig(
        thinking_config=types.ThinkingConfig(include_thoughts=True),
        tools=_sdk_tools([TOOL], search=False),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    first = models.generate_response(config, [user("Oslo and Rome?")], [TOOL])
    sdk_first = client.models.generate_content(
        model="gemini-3.1-flash-lite", contents="Oslo and Rome?", config=sdk_config
    )
    a, b = _last_two(emu)
    assert a == b
    # Both parse the same shape: two calls with ids, the signature on the first call only.
    sdk_calls = sdk_first.function_calls
    assert [c["name"] for c in first.function_calls] == [c.name for c in sdk_calls]
    assert all(c["id"] for c in first.function_calls) and all(c.id for c in sdk_calls)
    sdk_sig_parts = [p for p in sdk_first.candidates[0].content.parts if p.thought_signature]
    our_sig_parts = [p for p in first.content["parts"] if "thought_signature" in p]
    assert len(sdk_sig_parts) == len(our_sig_parts) == 1

    history = [
        user("Oslo and Rome?"),
        {"role": "model", "content": first.content},
        {
            "role": "user",
            "content": {
                "schema_version": 1,
                "parts": [
                    {"type": "function_response", "name": c["name"], "id": c["id"], "response": {"result": {"temp": i}}}
                    for i, c in enumerate(first.function_calls)
                ],
            },
        },
    ]
    second = models.generate_response(config, history, [TOOL])
    sdk_second = client.models.generate_content(
        model="gemini-3.1-flash-lite", contents=_sdk_contents(history), config=sdk_config
    )
    a, b = _last_two(emu)
    assert a == b
    assert second.text == sdk_second.text
    assert second.usage["total_token_count"] == sdk_second.usage_metadata.total_token_count
    assert second.usage["prompt_token_count"] == sdk_second.usage_metadata.prompt_token_count


def test_sdk_parses_our_echoed_signature_to_the_same_bytes(emu, cfg, client, tmp_path):
    """Both clients parse one and the same response (served byte for byte by a replaying emulator): the signature
    bytes must be identical, and what each then echoes must decode to those bytes and be accepted."""
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {"function_calls": [{"name": "get_weather", "args": {"city_name": "x"}}]},
                },
                {"when": {"has_function_response": True}, "respond": {"text": "ok"}},
            ]
        }
    )
    sdk_config = types.GenerateContentConfig(
        tools=_sdk_tools([TOOL], search=False),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    models.generate_response(cfg, [user("x")], [TOOL])
    client.models.generate_content(model="gemini-3.1-flash-lite", contents="x", config=sdk_config)
    our_req, sdk_req = emu.requests[-2:]
    raw = requests.post(
        f"{emu.base_url}{our_req['path']}", json=our_req["body"], headers={"x-goog-api-key": API_KEY}, timeout=10
    )
    raw_sig = base64.b64decode(raw.json()["candidates"][0]["content"]["parts"][0]["thoughtSignature"])
    tape = tmp_path / "tape.jsonl"
    tape.write_text(
        "".join(
            json.dumps(
                {
                    "method": r["method"],
                    "path": r["path"],
                    "query": {k: v for k, v in r["query"].items() if k != "key"},
                    "request_body": r["body"],
                    "status": 200,
                    "response_headers": {"content-type": "application/json"},
                    "response_body": raw.text,
                }
            )
            + "\n"
            for r in (our_req, sdk_req)
        )
    )
    with open_emulator(replay=tape) as replayer:
        ours = models.generate_response(cfg | {"base_url": replayer.base_url}, [user("x")], [TOOL])
        with genai.Client(
            api_key=API_KEY, http_options=types.HttpOptions(base_url=replayer.base_url, api_version="v1beta")
        ) as replay_client:
            sdk = replay_client.models.generate_content(model="gemini-3.1-flash-lite", contents="x", config=sdk_config)
    (call,) = ours.function_calls
    (sdk_part,) = [p for p in sdk.candidates[0].content.parts if p.function_call]
    assert call["args"] == sdk_part.function_call.args and call["id"] == sdk_part.function_call.id
    assert base64.b64decode(call["thought_signature"]) == sdk_part.thought_signature == raw_sig
    # Echo: each client sends the call back; the emulator (which minted the signature) accepts both, and both
    # encodings decode to the very same bytes.
    history = [
        user("x"),
        {"role": "model", "content": ours.content},
        {
            "role": "user",
            "content": {
                "schema_version": 1,
                "parts": [
                    {
                        "type": "function_response",
                        "name": "get_weather",
                        "id": call["id"],
                        "response": {"result": "sun"},
                    }
                ],
            },
        },
    ]
    assert models.generate(cfg, history, [TOOL]) == "ok"
    sdk_history = [
        types.Content(role="user", parts=[types.Part(text="x")]),
        sdk.candidates[0].content,
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call["id"], name="get_weather", response={"result": "sun"}
                    )
                )
            ],
        ),
    ]
    assert (
        client.models.generate_content(model="gemini-3.1-flash-lite", contents=sdk_history, config=sdk_config).text
        == "ok"
    )
    our_echo, sdk_echo = (r["body"]["contents"][1]["parts"][0]["thoughtSignature"] for r in emu.requests[-2:])
    assert b64_bytes(our_echo) == b64_bytes(sdk_echo) == raw_sig


@pytest.mark.parametrize("schema_key", ["response_schema", "response_json_schema"])
def test_structured_output_request_matches_the_sdk(emu, cfg, client, schema_key):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
        "required": ["city"],
    }
    emu.set_script({"rules": [{"respond": {"json": {"city": "Paris", "temp": 20}}}]})
    ours = models.generate(
        cfg | {"generation_config": {"response_mime_type": "application/json", schema_key: schema}},
        [user("json please")],
    )
    sdk = client.models.generate_content(
        model="gemini-3.1-flash-lite",
        contents="json please",
        config=types.GenerateContentConfig(response_mime_type="application/json", **{schema_key: schema}),
    )
    a, b = _last_two(emu)
    assert a == b
    assert json.loads(ours) == json.loads(sdk.text) == {"city": "Paris", "temp": 20}


def test_stream_request_and_text_match_the_sdk(emu, cfg, client):
    emu.set_script({"rules": [{"respond": {"text": "streaming is fun to test", "chunks": 4, "thought": "hidden"}}]})
    deltas: list[str] = []
    final = models.stream(
        cfg | {"instructions": "sys", "thinking_config": {"include_thoughts": True}}, [user("go")], [], deltas.append
    )
    sdk_text = []
    for chunk in client.models.generate_content_stream(
        model="gemini-3.1-flash-lite",
        contents="go",
        config=types.GenerateContentConfig(
            system_instruction="sys", thinking_config=types.ThinkingConfig(include_thoughts=True)
        ),
    ):
        sdk_text.extend(p.text for p in chunk.candidates[0].content.parts or () if p.text and not p.thought)
    a, b = _last_two(emu)
    assert a == b
    assert emu.requests[-1]["path"] == emu.requests[-2]["path"]
    assert emu.requests[-1]["query"] == emu.requests[-2]["query"] == {"alt": ["sse"]}
    assert "".join(deltas) == "".join(sdk_text) == final.text == "streaming is fun to test"


def test_grounding_metadata_matches_what_the_sdk_parses(emu, cfg, client):
    emu.set_script({"rules": [{"respond": {"text": "grounded", "grounding": True}}]})
    out = models.generate(cfg | {"builtin_tools": ["google_search"]}, [user("news?")])
    sdk = client.models.generate_content(
        model="gemini-3.1-flash-lite",
        contents="news?",
        config=types.GenerateContentConfig(tools=_sdk_tools([], search=True)),
    )
    a, b = _last_two(emu)
    assert a == b
    assert isinstance(out, models.ProviderResult)
    sdk_meta = sdk.candidates[0].grounding_metadata
    assert out.provider_metadata["metadata"]["webSearchQueries"] == sdk_meta.web_search_queries
    assert [c["web"]["uri"] for c in out.provider_metadata["metadata"]["groundingChunks"]] == [
        c.web.uri for c in sdk_meta.grounding_chunks
    ]


LEGACY_TOOL = {
    "name": "find_flight",
    "description": "Flights between two airports",
    "parameters": {
        "type": "OBJECT",
        "properties": {
            "from_airport": {"type": "STRING", "description": "IATA code"},
            "toAirport": {"type": "STRING"},
            "max_stops": {"type": "INTEGER", "minimum": 0, "maximum": 3},
            "cabin_classes": {
                "type": "ARRAY",
                "items": {"type": "STRING", "enum": ["economy", "business"]},
                "max_items": 2,
            },
            "passenger_info": {
                "type": "OBJECT",
                "properties": {"adult_count": {"type": "INTEGER"}},
                "required": ["adult_count"],
                "nullable": True,
            },
        },
        "required": ["from_airport", "toAirport"],
    },
}


def test_legacy_parameters_schema_request_matches_the_sdk(emu, cfg, client):
    emu.set_script(
        {
            "rules": [
                {
                    "when": {"has_function_response": False},
                    "respond": {
                        "function_calls": [
                            {
                                "name": "find_flight",
                                "args": {
                                    "from_airport": "OSL",
                                    "toAirport": "FCO",
                                    "passenger_info": {"adult_count": 2},
                                },
                            }
                        ]
                    },
                },
                {"when": {"has_function_response": True}, "respond": {"text": "Booked: {response_text}"}},
            ]
        }
    )
    sdk_decl = types.FunctionDeclaration(
        name="find_flight",
        description="Flights between two airports",
        parameters=types.Schema(
            type="OBJECT",
            properties={
                "from_airport": types.Schema(type="STRING", description="IATA code"),
                "toAirport": types.Schema(type="STRING"),
                "max_stops": types.Schema(type="INTEGER", minimum=0, maximum=3),
                "cabin_classes": types.Schema(
                    type="ARRAY", items=types.Schema(type="STRING", enum=["economy", "business"]), max_items=2
                ),
                "passenger_info": types.Schema(
                    type="OBJECT",
                    properties={"adult_count": types.Schema(type="INTEGER")},
                    required=["adult_count"],
                    nullable=True,
                ),
            },
            required=["from_airport", "toAirport"],
        ),
    )
    sdk_config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[sdk_decl])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    first = models.generate_response(cfg, [user("fly")], [LEGACY_TOOL])
    client.models.generate_content(model="gemini-3.1-flash-lite", contents="fly", config=sdk_config)
    a, b = _last_two(emu)
    assert a == b
    props = a["tools"][0]["functionDeclarations"][0]["parameters"]["properties"]
    assert set(props) == {"from_airport", "toAirport", "max_stops", "cabin_classes", "passenger_info"}  # verbatim
    assert set(props["passenger_info"]["properties"]) == {"adult_count"}
    # the round trip echoes args and sends a response with user keys in both spellings, verbatim
    (call,) = first.function_calls
    assert call["args"] == {"from_airport": "OSL", "toAirport": "FCO", "passenger_info": {"adult_count": 2}}
    history = [
        user("fly"),
        {"role": "model", "content": first.content},
        {
            "role": "user",
            "content": {
                "schema_version": 1,
                "parts": [
                    {
                        "type": "function_response",
                        "name": "find_flight",
                        "id": call["id"],
                        "response": {"booking_ref": "X1", "seatMap": {"row_number": 12}},
                    }
                ],
            },
        },
    ]
    second = models.generate_response(cfg, history, [LEGACY_TOOL])
    sdk_second = client.models.generate_content(
        model="gemini-3.1-flash-lite", contents=_sdk_contents(history), config=sdk_config
    )
    a, b = _last_two(emu)
    assert a == b
    assert a["contents"][2]["parts"][0]["functionResponse"]["response"] == {
        "booking_ref": "X1",
        "seatMap": {"row_number": 12},
    }
    assert second.text == sdk_second.text


@pytest.mark.parametrize("budget", [0, 1024, -1])
def test_thinking_budget_request_matches_the_sdk(emu, cfg, client, budget):
    ours = models.generate_response(
        cfg | {"thinking_config": {"thinking_budget": budget, "include_thoughts": budget != 0}}, [user("think")]
    )
    sdk = client.models.generate_content(
        model="gemini-3.1-flash-lite",
        contents="think",
        config=types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(thinking_budget=budget, include_thoughts=budget != 0)
        ),
    )
    a, b = _last_two(emu)
    assert a == b
    assert a["generationConfig"]["thinkingConfig"]["thinkingBudget"] == budget
    assert "thinkingLevel" not in a["generationConfig"]["thinkingConfig"]
    assert ours.text == sdk.text == "You said: think"

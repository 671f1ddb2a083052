"""The Live wire codec against the official SDK's types: client messages out, recorded server frames in."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.errors import LiveError
from adk_actors.live import codec
from adk_actors.live.codec import ITEM_KINDS, MAX_FRAME_BYTES, LiveItem, decode_close, decode_server_frame
from adk_actors.live.media import audio_pcm, video_frame
from adk_actors.secrets import REDACTED, register_secret

FRAMES = Path(__file__).parent / "frames"
PCM = struct.pack("<8h", 0, 1000, -1000, 32767, -32768, 12, -12, 0)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\xfb\xff\xfe"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def _sdk_client(message: dict[str, Any]) -> Any:
    """The SDK's own parse of a client message, once from the dict and once from its JSON text."""
    parsed = types.LiveClientMessage.model_validate(message)
    assert types.LiveClientMessage.model_validate_json(json.dumps(message)) == parsed
    assert len(message) == 1  # exactly one top-level member
    return parsed


def _items(data: bytes | str, **kwargs: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(item.kind, item.payload) for item in decode_server_frame(data, **kwargs)]


def _malformed(data: Any) -> dict[str, Any]:
    with pytest.raises(LiveError) as info:
        decode_server_frame(data)
    assert info.value.reason == "malformed_frame"
    return info.value.details


# ---- client messages -------------------------------------------------------------------------------------------


def test_text_message_is_realtime_text():
    message = codec.text_message("héllo")
    assert message == {"realtimeInput": {"text": "héllo"}}
    assert _sdk_client(message).realtime_input.text == "héllo"


@pytest.mark.parametrize("bad", ["", "a\x00b", "\ud800", "x" * (codec.MAX_TEXT_BYTES + 1), None, b"hi", 3])
def test_text_message_refuses_empty_nul_invalid_or_oversized_text(bad):
    with pytest.raises(LiveError) as info:
        codec.text_message(bad)
    assert info.value.reason == "invalid_text"


def test_audio_message_uses_realtime_audio_with_the_declared_rate_never_media_chunks():
    message = codec.audio_message(audio_pcm(PCM, rate=24000))
    assert message == {
        "realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=24000", "data": base64.b64encode(PCM).decode()}}
    }
    parsed = _sdk_client(message).realtime_input
    assert parsed.audio.data == PCM and parsed.audio.mime_type == "audio/pcm;rate=24000"
    assert parsed.media_chunks is None and "mediaChunks" not in json.dumps(message)


@pytest.mark.parametrize(("kind", "data", "mime"), [("jpeg", JPEG, "image/jpeg"), ("png", PNG, "image/png")])
def test_video_message_uses_realtime_video_in_the_standard_base64_alphabet(kind, data, mime):
    message = codec.video_message(video_frame(kind, data))
    encoded = message["realtimeInput"]["video"]["data"]
    assert message["realtimeInput"]["video"]["mimeType"] == mime
    assert "-" not in encoded and "_" not in encoded  # the server sends and we send the standard alphabet
    parsed = _sdk_client(message).realtime_input
    assert parsed.video.data == data and parsed.media_chunks is None


def test_audio_and_video_messages_take_only_checked_media_values():
    with pytest.raises(LiveError) as info:
        codec.audio_message(PCM)  # type: ignore[arg-type]
    assert info.value.reason == "invalid_audio"
    with pytest.raises(LiveError) as info:
        codec.video_message(JPEG)  # type: ignore[arg-type]
    assert info.value.reason == "invalid_video_frame"


def test_activity_and_stream_end_messages():
    start, end, stream_end = (
        codec.activity_start_message(),
        codec.activity_end_message(),
        codec.audio_stream_end_message(),
    )
    assert start == {"realtimeInput": {"activityStart": {}}}
    assert end == {"realtimeInput": {"activityEnd": {}}}
    assert stream_end == {"realtimeInput": {"audioStreamEnd": True}}
    assert _sdk_client(start).realtime_input.activity_start is not None
    assert _sdk_client(end).realtime_input.activity_end is not None
    assert _sdk_client(stream_end).realtime_input.audio_stream_end is True


def test_tool_response_message_carries_ids_names_and_responses():
    message = codec.tool_response_message(
        [
            {"id": "function-call-1", "name": "get_weather", "response": {"result": {"sky": "sunny"}}},
            {"id": "function-call-2", "name": "notify", "response": {"result": "ok"}, "scheduling": "when_idle"},
        ]
    )
    assert message == {
        "toolResponse": {
            "functionResponses": [
                {"id": "function-call-1", "name": "get_weather", "response": {"result": {"sky": "sunny"}}},
                {"id": "function-call-2", "name": "notify", "response": {"result": "ok"}, "scheduling": "WHEN_IDLE"},
            ]
        }
    }
    responses = _sdk_client(message).tool_response.function_responses
    assert [(r.id, r.name, r.response) for r in responses] == [
        ("function-call-1", "get_weather", {"result": {"sky": "sunny"}}),
        ("function-call-2", "notify", {"result": "ok"}),
    ]
    assert responses[1].scheduling == types.FunctionResponseScheduling.WHEN_IDLE


def test_tool_response_message_copies_the_response():
    response: dict[str, Any] = {"result": [1, 2]}
    message = codec.tool_response_message([{"id": "c", "name": "f", "response": response}])
    response["result"].append(3)
    assert message["toolResponse"]["functionResponses"][0]["response"] == {"result": [1, 2]}


@pytest.mark.parametrize(
    "responses",
    [
        [],
        {"id": "c", "name": "f", "response": {}},
        "c",
        [{"name": "f", "response": {}}],
        [{"id": "", "name": "f", "response": {}}],
        [{"id": "c\n", "name": "f", "response": {}}],
        [{"id": "c", "name": "1bad", "response": {}}],
        [{"id": "c", "name": "f", "response": "ok"}],
        [{"id": "c", "name": "f", "response": {"x": float("nan")}}],
        [{"id": "c", "name": "f", "response": {"x": object()}}],
        [{"id": "c", "name": "f", "response": {}, "extra": 1}],
        [{"id": "c", "name": "f", "response": {}, "scheduling": "later"}],
        [{"id": "c", "name": "f", "response": {}}] * 129,
        ["not a mapping"],
    ],
)
def test_tool_response_message_refuses_malformed_responses(responses):
    with pytest.raises(LiveError) as info:
        codec.tool_response_message(responses)
    assert info.value.reason == "invalid_tool_response"


# ---- server frames: recorded, real-shaped ----------------------------------------------------------------------

AUDIO_PAYLOAD = {"mime_type": "audio/pcm;rate=24000", "rate": 24000, "bytes": len(PCM)}
EXPECTED: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "setup_complete": [("setup_complete", {})],
    "setup_complete_session_id": [("setup_complete", {"session_id": "a1b2c3d4-live-session"})],
    "model_turn_audio": [("audio", AUDIO_PAYLOAD)],
    "model_turn_text": [("text", {"text": "Hel"}), ("text", {"text": "lo there"})],
    "model_turn_thought": [("text", {"text": "Sure."})],
    "output_transcription": [("output_transcription", {"text": "Hello the"})],
    "input_transcription_finished": [
        ("input_transcription", {"text": "what's the weather in Paris", "finished": True, "interim": False})
    ],
    "interim_input_transcription": [("input_transcription", {"text": "what's the wea", "interim": True})],
    "interrupted": [("interrupted", {})],
    "interrupted_turn_complete": [("interrupted", {}), ("turn_complete", {})],
    "generation_complete": [("generation_complete", {})],
    "turn_complete_usage": [
        ("turn_complete", {"reason": "NEED_MORE_INPUT", "waiting_for_input": True}),
        (
            "usage",
            {
                "prompt_tokens": 120,
                "response_tokens": 40,
                "total_tokens": 160,
                "prompt_tokens_details": {"audio": 100, "text": 20},
                "response_tokens_details": {"audio": 40},
            },
        ),
    ],
    "combined_turn": [
        ("audio", AUDIO_PAYLOAD),
        ("output_transcription", {"text": "Done."}),
        ("generation_complete", {}),
        ("turn_complete", {}),
        ("usage", {"prompt_tokens": 10, "response_tokens": 5, "total_tokens": 15, "thoughts_tokens": 3}),
    ],
    "grounding": [
        (
            "grounding",
            {
                "metadata": {
                    "webSearchQueries": ["weather Paris today"],
                    "groundingChunks": [
                        {
                            "web": {
                                "uri": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC",
                                "title": "meteo.fr",
                            }
                        }
                    ],
                    "searchEntryPoint": {"renderedContent": "<div>Paris weather</div>"},
                }
            },
        )
    ],
    "tool_call": [
        (
            "tool_call",
            {"calls": [{"id": "function-call-11507352923402913785", "name": "get_weather", "args": {"city": "Paris"}}]},
        )
    ],
    "tool_call_snake_case": [("tool_call", {"calls": [{"id": "function-call-2", "name": "get_time", "args": {}}]})],
    "tool_call_cancellation": [("tool_call_cancellation", {"ids": ["function-call-11507352923402913785"]})],
    "go_away": [("go_away", {"time_left_ms": 50_000})],
    "go_away_fraction": [("go_away", {"time_left_ms": 9_250})],
    "session_resumption_update": [
        ("resumption_update", {"resumable": True, "handle": "CjQKMmxpdmUtc2Vzc2lvbi1oYW5kbGUtMDAx"})
    ],
    "session_resumption_not_resumable": [("resumption_update", {"resumable": False, "handle": ""})],
    "voice_activity": [],
    "vad_signal": [],
    "usage_only": [
        ("usage", {"prompt_tokens": 7, "response_tokens": 0, "total_tokens": 7, "cached_content_tokens": 2})
    ],
}


def test_every_recorded_frame_has_an_expectation():
    assert sorted(p.stem for p in FRAMES.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_frame_is_real_shaped_and_decodes_the_same_from_binary_and_text(name):
    raw = (FRAMES / f"{name}.json").read_bytes()
    types.LiveServerMessage.model_validate(json.loads(raw))  # the official SDK accepts the frame as it is
    assert _items(raw) == EXPECTED[name]  # the real service sends binary frames
    assert _items(raw.decode()) == EXPECTED[name]
    for item in decode_server_frame(raw):
        assert item.kind in ITEM_KINDS
        json.dumps(item.payload, allow_nan=False)


def test_audio_items_carry_the_decoded_pcm_and_others_carry_no_data():
    raw = (FRAMES / "combined_turn.json").read_bytes()
    items = decode_server_frame(raw)
    assert items[0].data == PCM
    assert all(item.data is None for item in items[1:])
    content = types.LiveServerMessage.model_validate_json(raw).server_content
    assert content is not None and content.model_turn is not None and content.model_turn.parts
    blob = content.model_turn.parts[0].inline_data
    assert blob is not None and blob.data == items[0].data


def test_thoughts_are_skipped_unless_asked_for():
    raw = (FRAMES / "model_turn_thought.json").read_bytes()
    assert _items(raw, include_thoughts=True) == [
        ("thought", {"text": "**Planning** the reply"}),
        ("text", {"text": "Sure."}),
    ]


def test_snake_case_spelling_decodes_like_camel_case():
    camel = json.loads((FRAMES / "turn_complete_usage.json").read_text())
    snake = {
        "server_content": {
            "turn_complete": True,
            "turn_complete_reason": "NEED_MORE_INPUT",
            "waiting_for_input": True,
            "interaction_status": "IDLE",
        },
        "usage_metadata": {
            "prompt_token_count": 120,
            "response_token_count": 40,
            "total_token_count": 160,
            "prompt_tokens_details": [
                {"modality": "AUDIO", "token_count": 100},
                {"modality": "TEXT", "token_count": 20},
            ],
            "response_tokens_details": [{"modality": "AUDIO", "token_count": 40}],
        },
    }
    types.LiveServerMessage.model_validate(snake)
    assert _items(json.dumps(snake)) == _items(json.dumps(camel))
    audio = {"server_content": {"model_turn": {"parts": [{"inline_data": {"mime_type": "audio/pcm", "data": "AAA"}}]}}}
    types.LiveServerMessage.model_validate(audio)
    [item] = decode_server_frame(json.dumps(audio))  # url-safe/unpadded base64 and a rate-less mime type
    assert item.data == b"\x00\x00" and item.payload["rate"] == 24000


def test_unknown_fields_inside_a_known_member_are_ignored_for_forward_compatibility():
    frame = {"serverContent": {"turnComplete": True, "somethingNew": {"x": 1}}}
    assert _items(json.dumps(frame)) == [("turn_complete", {})]


@pytest.mark.parametrize(
    "frame",
    [
        b"not json",
        b"\xff\xfe{\x00}\x00",  # UTF-16 is not UTF-8 (json.loads would have guessed it)
        b'{"setupComplete": {}, "x": NaN}',
        b"[]",
        b'"setupComplete"',
        b"{}",
        b'{"setupComplete": null}',
        b'{"brandNewMessage": {}}',
        b'{"setupComplete": {}, "serverContent": {"turnComplete": true}}',
        b'{"toolCall": {"functionCalls": []}, "tool_call": {"functionCalls": []}}',
        b'{"serverContent": {"turnComplete": true, "turn_complete": true}}',
        b'{"serverContent": []}',
        b'{"serverContent": {"turnComplete": "yes"}}',
        b'{"serverContent": {"turnComplete": true, "turnCompleteReason": "need more input"}}',
        b'{"serverContent": {"interactionStatus": 3}}',
        b'{"serverContent": {"modelTurn": {"parts": {}}}}',
        b'{"serverContent": {"modelTurn": {"parts": [{"text": 5}]}}}',
        b'{"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA"}}]}}}',
        b'{"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm", "data": "!!"}}]}}}',
        b'{"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm", "data": "AAAA"}}]}}}',
        b'{"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=96000"}}]}}}',
        b'{"serverContent": {"outputTranscription": {"text": "hi", "languageCode": "not a language"}}}',
        b'{"serverContent": {"inputTranscription": {"text": "hi", "finished": 1}}}',
        b'{"toolCall": {"functionCalls": [{"name": "f"}]}}',
        b'{"toolCall": {"functionCalls": [{"id": "c", "name": "no spaces"}]}}',
        b'{"toolCall": {"functionCalls": [{"id": "c", "name": "f", "args": []}]}}',
        b'{"toolCall": {}}',
        b'{"toolCallCancellation": {"ids": []}}',
        b'{"toolCallCancellation": {"ids": [1]}}',
        b'{"goAway": {"timeLeft": 50}}',
        b'{"goAway": {"timeLeft": "50"}}',
        b'{"sessionResumptionUpdate": {"newHandle": "has space", "resumable": true}}',
        b'{"sessionResumptionUpdate": {"resumable": "true"}}',
        b'{"sessionResumptionUpdate": {"lastConsumedClientMessageIndex": -1}}',
        b'{"usageMetadata": {"promptTokenCount": -1}}',
        b'{"usageMetadata": {"promptTokenCount": 1.5}}',
        b'{"usageMetadata": {"promptTokensDetails": {"AUDIO": 1}}}',
        b'{"voiceActivity": {"voiceActivityType": "start"}}',
        b'{"voiceActivity": {"audioOffset": "soon"}}',
        b'{"voiceActivityDetectionSignal": {"vadSignalType": 1}}',
        b'{"setupComplete": {"sessionId": 7}}',
        "[" * 100_000,
        12,
        None,
    ],
)
def test_malformed_frames_fail_with_malformed_frame(frame):
    _malformed(frame)


def test_an_unknown_top_level_member_is_malformed_even_beside_a_known_one():
    details = _malformed(b'{"setupComplete": {}, "brandNewMessage": {}}')
    assert details == {"problem": "unknown top-level member", "member": "brandNewMessage"}


def test_a_frame_over_16_mib_is_refused_before_parsing():
    text = '{"serverContent": {"outputTranscription": {"text": "' + "a" * MAX_FRAME_BYTES + '"}}}'
    assert _malformed(text.encode())["problem"] == "frame too large"
    assert _malformed(text)["problem"] == "frame too large"
    wide = '{"x": "' + "é" * (MAX_FRAME_BYTES // 2) + '"}'  # under the limit in characters, over it in bytes
    assert _malformed(wide)["problem"] == "frame too large"


def test_live_items_are_frozen_values():
    item = LiveItem(kind="interrupted")
    assert item.payload == {} and item.data is None
    with pytest.raises(AttributeError):
        item.kind = "other"  # type: ignore[misc]


# ---- close frames ----------------------------------------------------------------------------------------------


def test_decode_close_reads_code_and_reason():
    reason = b"models/x is not found for API version v1beta, or is not supported for bidiGenerateContent."
    assert decode_close((1008).to_bytes(2, "big") + reason) == (1008, reason.decode())
    assert decode_close(bytearray(b"\x03\xe8")) == (1000, "")
    assert decode_close(b"") == (1005, "")


def test_decode_close_drops_a_character_cut_by_the_123_byte_limit():
    reason = ("é" * 62).encode()[:123]  # 123 bytes: the last character is cut in half
    code, text = decode_close(b"\x03\xef" + reason)
    assert code == 1007 and text == "é" * 61
    assert decode_close(b"\x03\xef\xffok") == (1007, "\ufffdok")


def test_decode_close_scrubs_registered_secrets():
    register_secret("live-close-secret-123")
    assert decode_close(b"\x03\xf3key live-close-secret-123 bad") == (1011, f"key {REDACTED} bad")


@pytest.mark.parametrize("payload", [b"\x03", b"\x03\xe8" + b"x" * 124, b"\x00\x64", b"\x03\xed", b"\x13\x88", "ab"])
def test_decode_close_refuses_malformed_payloads(payload):
    with pytest.raises(LiveError) as info:
        decode_close(payload)
    assert info.value.reason == "malformed_frame"


# ---- fuzzing ---------------------------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=24,
)
member_names = st.sampled_from(
    [
        "setupComplete",
        "serverContent",
        "server_content",
        "toolCall",
        "toolCallCancellation",
        "goAway",
        "sessionResumptionUpdate",
        "usageMetadata",
        "voiceActivity",
        "voiceActivityDetectionSignal",
    ]
)
content_names = st.sampled_from(
    [
        "modelTurn",
        "parts",
        "inlineData",
        "mimeType",
        "data",
        "text",
        "thought",
        "inputTranscription",
        "interimInputTranscription",
        "outputTranscription",
        "finished",
        "turnComplete",
        "turnCompleteReason",
        "functionCalls",
        "id",
        "name",
        "args",
        "ids",
        "timeLeft",
        "newHandle",
        "resumable",
        "promptTokenCount",
        "promptTokensDetails",
        "modality",
        "tokenCount",
        "groundingMetadata",
    ]
)
shaped_values = st.recursive(
    json_scalars | st.sampled_from(["audio/pcm;rate=24000", "AAAA", "AAA=", "50s", "IDLE", "f"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(content_names, inner, max_size=4),
    max_leaves=30,
)
frames = st.dictionaries(member_names, shaped_values, min_size=1, max_size=2) | st.dictionaries(
    st.text(max_size=10), json_values, max_size=3
)


def _decodes_or_is_malformed(data: Any, include_thoughts: bool = False) -> None:
    try:
        items = decode_server_frame(data, include_thoughts=include_thoughts)
    except LiveError as exc:
        assert exc.reason == "malformed_frame"
    else:
        assert all(item.kind in ITEM_KINDS for item in items)


@settings(max_examples=600, deadline=None)
@given(frame=frames, thoughts=st.booleans())
def test_decode_server_frame_on_random_json_returns_items_or_raises_live_error_only(frame, thoughts):
    _decodes_or_is_malformed(json.dumps(frame).encode(), thoughts)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64) | st.text(max_size=64))
def test_decode_server_frame_on_random_bytes_and_text_raises_live_error_only(data):
    _decodes_or_is_malformed(data)
    _decodes_or_is_malformed(b'{"serverContent": ' + (data if isinstance(data, bytes) else data.encode()) + b"}")


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=130))
def test_decode_close_on_random_bytes_returns_a_code_or_raises_live_error_only(data):
    try:
        code, reason = decode_close(data)
    except LiveError as exc:
        assert exc.reason == "malformed_frame"
    else:
        assert 1000 <= code <= 4999 and isinstance(reason, str)

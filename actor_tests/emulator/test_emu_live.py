"""The emulator's Live endpoint (BidiGenerateContent over WebSocket) driven by our own ``websocket-client``.

Every Live frame any emulator serves during a test is validated with ``google.genai.types.LiveServerMessage`` at
teardown (:func:`live_frames`). No sleeps: every wait is on a received frame (with the client's timeout) or a polled
condition with a deadline.
"""

from __future__ import annotations

import base64
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import websocket
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.emulator import Emulator, ScriptError
from adk_actors.emulator.live_audio import OUTPUT_RATE, PcmError, Vad, pcm_rate, speak
from adk_actors.emulator.live_wire import KEY_MISSING, split_script, truncate_reason
from adk_actors.errors import ConfigError

from .helpers import (
    LIVE_MODEL,
    WEATHER_TOOL,
    Closed,
    LiveClient,
    model_audio,
    model_text,
    poll,
    server_content,
    silence,
    tone,
    user,
)

TEXT = {"generationConfig": {"responseModalities": ["TEXT"]}}
AUDIO = {"generationConfig": {"responseModalities": ["AUDIO"]}}
MANUAL = {"realtimeInputConfig": {"automaticActivityDetection": {"disabled": True}}}
STORY = "Once upon a time a small robot learned to sing. " * 3  # 147 chars: 2.94 s of voice, 30 chunks


pytestmark = pytest.mark.usefixtures("live_frames")  # every served Live frame must be valid (conftest)


@pytest.fixture
def make_emu() -> Iterator[Callable[..., Emulator]]:
    """Start emulators (script, keyword arguments); all are stopped at teardown."""
    started: list[Emulator] = []

    def make(script: dict[str, Any] | None = None, **kwargs: Any) -> Emulator:
        emu = Emulator(script=script, **kwargs).start()
        started.append(emu)
        return emu

    yield make
    for emu in started:
        emu.stop()


@pytest.fixture
def connect() -> Iterator[Callable[..., LiveClient]]:
    """Open ``LiveClient`` connections; all are closed at teardown."""
    clients: list[LiveClient] = []

    def open_(url: str, **kwargs: Any) -> LiveClient:
        client = LiveClient(url, **kwargs)
        clients.append(client)
        return client

    yield open_
    for client in clients:
        client.close()


def _rules(*rules: dict[str, Any], **script: Any) -> dict[str, Any]:
    return {"rules": list(rules), **script}


# ----------------------------------------------------------------------------------------------------------- turns
def test_a_text_turn_in_text_modality_streams_text_then_generation_and_turn_complete(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu()
    client = connect(emu.live_url)
    client.setup(**TEXT)
    messages = client.text_turn("hello there")
    assert model_text(messages) == "You said: hello there"
    assert len(server_content(messages, "modelTurn")) == 5  # 21 chars at 20 ms a char, 100 ms a chunk
    kinds = [next(iter(m["serverContent"])) for m in messages]
    assert kinds[-2:] == ["generationComplete", "turnComplete"]
    usage = messages[-1]["usageMetadata"]
    assert usage["promptTokenCount"] == 3 and usage["responseTokenCount"] == 6  # ceil(11/4), ceil(21/4)
    assert usage["totalTokenCount"] == 9
    assert usage["promptTokensDetails"] == [{"modality": "TEXT", "tokenCount": 3}]
    assert usage["responseTokensDetails"] == [{"modality": "TEXT", "tokenCount": 6}]
    assert set(client.opcodes) == {2}  # binary frames of UTF-8 JSON, as the real service sends


def test_an_audio_modality_turn_sends_deterministic_24k_pcm_in_chunk_ms_pieces_with_transcription(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu()
    client = connect(emu.live_url)
    client.setup(**AUDIO, outputAudioTranscription={})
    client.send({"realtimeInput": {"text": "hi"}})
    first = client.turn()
    client.send({"realtimeInput": {"text": "hi"}})
    again = client.turn()
    chunks = model_audio(first)
    said = "You said: hi"
    assert [len(c) for c in chunks] == [4800, 4800, 1920]  # 240 ms: 100 + 100 + 40 ms at 24 kHz s16le
    assert b"".join(chunks) == speak(said, 240) == b"".join(model_audio(again))
    assert "".join(t["text"] for t in server_content(first, "outputTranscription")) == said
    order = [next(iter(m["serverContent"])) for m in first]
    assert order[:2] == ["modelTurn", "outputTranscription"]  # each transcription piece follows its chunk
    assert order[-2:] == ["generationComplete", "turnComplete"]
    assert first[-1]["usageMetadata"]["responseTokensDetails"] == [{"modality": "AUDIO", "tokenCount": 8}]


def test_the_voice_pitch_follows_the_text() -> None:
    assert speak("ab", 40) != speak("ba", 40)
    assert len(speak("ab", 40)) == 2 * OUTPUT_RATE * 40 // 1000
    assert speak("  ", 40) == bytes(2 * OUTPUT_RATE * 40 // 1000)  # whitespace is silence


def test_automatic_vad_ends_a_turn_after_silence_counted_in_samples(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    heard = {"input_transcription": "turn on the lights", "text": "OK: {user_text}"}
    emu = make_emu(_rules({"when": {"user_text_contains": "(audio"}, "respond": heard}))
    client = connect(emu.live_url)
    vad = {"automaticActivityDetection": {"silenceDurationMs": 300}}
    client.setup(**TEXT, realtimeInputConfig=vad, inputAudioTranscription={})
    # Sent far faster than real time: only the samples count, so 290 ms of silence is not yet the end...
    client.send_audio(tone(400) + silence(290))
    client.send({"realtimeInput": {"text": "marker"}})
    assert model_text(client.turn()) == "You said: marker"
    client.send_audio(silence(10))  # ...and 10 ms more is
    messages = client.turn()
    assert messages[0] == {"serverContent": {"inputTranscription": {"text": "turn on the lights", "finished": True}}}
    assert model_text(messages) == "OK: turn on the lights"
    usage = messages[-1]["usageMetadata"]
    assert {"modality": "AUDIO", "tokenCount": 13} in usage["promptTokensDetails"]  # 400 ms at 32 tokens/s


def test_audio_stream_end_ends_a_turn_after_speech_only(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu()
    client = connect(emu.live_url)
    client.setup(**TEXT, inputAudioTranscription={})
    client.send({"realtimeInput": {"audioStreamEnd": True}})  # no speech: no turn
    client.send_audio(silence(200))
    client.send({"realtimeInput": {"audioStreamEnd": True}})
    client.send({"realtimeInput": {"text": "marker"}})
    assert model_text(client.turn()) == "You said: marker"
    client.send_audio(tone(300) + silence(100))
    client.send({"realtimeInput": {"audioStreamEnd": True}})
    messages = client.turn()
    assert server_content(messages, "inputTranscription") == [{"text": "(audio 300 ms)", "finished": True}]
    assert model_text(messages) == "You said: (audio 300 ms)"


def test_manual_activity_start_and_end_delimit_an_audio_turn(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu()
    client = connect(emu.live_url)
    client.setup(**TEXT, **MANUAL, inputAudioTranscription={})
    client.send_audio(tone(100))  # outside an activity: ignored
    client.send({"realtimeInput": {"activityStart": {}}})
    client.send_audio(silence(250, 24_000) + tone(250, 24_000), rate=24_000)  # quiet or not, the activity is the turn
    client.send({"realtimeInput": {"activityEnd": {}}})
    messages = client.turn()
    assert server_content(messages, "inputTranscription") == [{"text": "(audio 500 ms)", "finished": True}]


def test_new_speech_barges_in_a_paced_answer_interrupted_then_turn_complete(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu(_rules({"when": {"user_text_contains": "story"}, "respond": {"text": STORY, "pace": 1.0}}))
    client = connect(emu.live_url)
    client.setup(**AUDIO, inputAudioTranscription={})
    client.send({"realtimeInput": {"text": "tell me a story"}})
    head = client.until(lambda m: "modelTurn" in m.get("serverContent", {}))
    client.send_audio(tone(100))
    tail = client.turn()
    assert tail[-2:][0] == {"serverContent": {"interrupted": True}}
    assert "turnComplete" in tail[-1]["serverContent"]
    assert not server_content(tail, "generationComplete")
    assert 1 <= len(model_audio(head + tail)) < 30
    client.send_audio(silence(600))  # the barge-in speech is the next turn
    assert server_content(client.turn(), "inputTranscription") == [{"text": "(audio 100 ms)", "finished": True}]


def test_activity_start_barges_in_and_no_interruption_handling_lets_the_answer_finish(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu(_rules({"when": {"user_text_contains": "story"}, "respond": {"text": STORY, "pace": 1.0}}))
    manual = connect(emu.live_url)
    manual.setup(**TEXT, **MANUAL)
    manual.send({"realtimeInput": {"text": "a story"}})
    manual.until(lambda m: "modelTurn" in m.get("serverContent", {}))
    manual.send({"realtimeInput": {"activityStart": {}}})
    assert manual.turn()[-2] == {"serverContent": {"interrupted": True}}
    steady = connect(emu.live_url)
    config = {"automaticActivityDetection": {"silenceDurationMs": 100}, "activityHandling": "NO_INTERRUPTION"}
    steady.setup(**TEXT, realtimeInputConfig=config)
    emu.set_script({"rules": [{"when": {"user_text_contains": "story"}, "respond": {"text": STORY[:40], "pace": 1.0}}]})
    steady.send({"realtimeInput": {"text": "a story"}})
    steady.until(lambda m: "modelTurn" in m.get("serverContent", {}))
    steady.send_audio(tone(100) + silence(100))
    answer = steady.turn()
    assert server_content(answer, "generationComplete") and not server_content(answer, "interrupted")


def test_a_tool_call_round_trip_waits_for_the_matching_tool_response(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu(
        _rules(
            {"when": {"user_text_contains": "weather", "has_function_response": False},
             "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]}},
            {"when": {"has_function_response": True},
             "respond": {"text": "The weather in {args.city} is {response_text}."}},
        )
    )  # fmt: skip
    client = connect(emu.live_url)
    client.setup(**TEXT, tools=[WEATHER_TOOL])
    client.send({"clientContent": {"turns": [user("weather please")], "turnComplete": True}})
    call_msg = client.message()
    (call,) = call_msg["toolCall"]["functionCalls"]
    assert re.fullmatch(r"function-call-\d+", call["id"]) and call["name"] == "get_weather"
    assert call["args"] == {"city": "Paris"}
    client.send({"toolResponse": {"functionResponses": [{"id": call["id"], "response": {"result": "sunny"}}]}})
    messages = client.turn()
    assert model_text(messages) == "The weather in Paris is sunny."
    client.send({"clientContent": {"turns": [user("weather again")], "turnComplete": True}})
    client.message()
    client.send({"tool_response": {"function_responses": [{"id": "function-call-1", "name": "get_weather"}]}})
    assert client.closed() == Closed(1007, "Request contains an invalid argument.")


def test_barge_in_while_a_tool_call_waits_cancels_the_call(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu(_rules({"respond": {"function_calls": [{"name": "get_weather", "args": {}}]}}))
    client = connect(emu.live_url)
    client.setup(**TEXT, **MANUAL, tools=[WEATHER_TOOL])
    client.send({"realtimeInput": {"text": "weather"}})
    (call,) = client.message()["toolCall"]["functionCalls"]
    client.send({"realtimeInput": {"activityStart": {}}})
    messages = client.turn()
    assert messages[0] == {"toolCallCancellation": {"ids": [call["id"]]}}
    assert messages[1] == {"serverContent": {"interrupted": True}}


def test_session_resumption_hands_out_handles_that_restore_the_history_on_a_new_connection(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu()
    first = connect(emu.live_url)
    first.setup(**TEXT, sessionResumption={})
    first.text_turn("my name is Ada and I like engines")  # 33 chars: 9 tokens; answer 43 chars: 11 tokens
    update = first.message()["sessionResumptionUpdate"]
    assert update["resumable"] is True and update["newHandle"]
    first.close()
    resumed = connect(emu.live_url)
    resumed.setup(**TEXT, sessionResumption={"handle": update["newHandle"]})
    fresh = connect(emu.live_url)
    fresh.setup(**TEXT)
    with_history = resumed.text_turn("hi")[-1]["usageMetadata"]["promptTokenCount"]
    without = fresh.text_turn("hi")[-1]["usageMetadata"]["promptTokenCount"]
    assert (with_history, without) == (1 + 9 + 11, 1)
    assert "sessionResumptionUpdate" in resumed.message()  # updates continue on the resumed session
    stale = connect(emu.live_url)
    stale.send({"setup": {"model": f"models/{LIVE_MODEL}", "sessionResumption": {"handle": "no-such-handle"}}})
    assert stale.closed().code == 1008


def test_a_go_away_rule_sends_time_left_then_closes_1000(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu(_rules({"respond": {"text": "bye", "go_away_ms": 50}}))
    client = connect(emu.live_url)
    client.setup(**TEXT)
    client.text_turn("x")
    assert client.message() == {"goAway": {"timeLeft": "0.05s"}}
    assert client.recv() == Closed(1000, "")


def test_the_go_away_and_drop_hooks_reach_every_open_connection(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu()
    clients = [connect(emu.live_url) for _ in range(3)]
    for client in clients:
        client.setup(**TEXT)
    assert emu.live_connections() == 3
    emu.live_go_away(100)
    for client in clients:
        assert client.message() == {"goAway": {"timeLeft": "0.1s"}}
        assert client.recv() == Closed(1000, "")
    assert poll(lambda: emu.live_connections() == 0)
    dropped = [connect(emu.live_url) for _ in range(2)]
    for client in dropped:
        client.setup(**TEXT)
    emu.live_drop_all()
    for client in dropped:
        with pytest.raises((websocket.WebSocketConnectionClosedException, ConnectionError)):
            client.recv()
    assert poll(lambda: emu.live_connections() == 0)
    assert {e["connection"] for e in emu.live_log if e["kind"] == "drop"} >= {4, 5}  # ids count from 1 per emulator


# ---------------------------------------------------------------------------------------------------------- faults
def test_a_drop_fault_aborts_the_tcp_connection_mid_answer(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu(_rules({"respond": {"text": "x" * 50, "fault": {"kind": "drop", "after_chunks": 2}}}))
    client = connect(emu.live_url)
    client.setup(**TEXT)
    client.send({"realtimeInput": {"text": "go"}})
    got = []
    with pytest.raises((websocket.WebSocketConnectionClosedException, ConnectionError)):
        while True:
            got.append(client.recv())
    assert [m for m in got if isinstance(m, Closed)] == []
    assert len(server_content([m for m in got if isinstance(m, dict)], "modelTurn")) == 2


def test_a_slow_fault_delays_the_first_chunk(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu(_rules({"respond": {"text": "late", "fault": {"kind": "slow", "delay_ms": 300}}}))
    client = connect(emu.live_url)
    client.setup(**TEXT)
    started = time.monotonic()
    client.send({"realtimeInput": {"text": "go"}})
    first = client.message()
    assert time.monotonic() - started >= 0.3
    assert model_text([first]) == "late"  # 4 characters: 80 ms, one chunk
    assert server_content(client.turn(), "generationComplete")


def test_a_malformed_fault_sends_one_non_json_binary_frame_and_the_answer_goes_on(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu(_rules({"respond": {"text": "abcdefghij", "fault": {"kind": "malformed", "after_chunks": 1}}}))
    client = connect(emu.live_url)
    client.setup(**TEXT)
    client.send({"realtimeInput": {"text": "go"}})
    assert model_text([client.message()]) == "abcde"  # 10 characters: 200 ms, two chunks
    opcode, raw = client.ws.recv_data()
    assert opcode == websocket.ABNF.OPCODE_BINARY
    with pytest.raises(ValueError):
        json.loads(raw)
    assert model_text(client.turn()) == "fghij"


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"kind": "close", "code": 1011, "reason": "Internal error encountered."},
         Closed(1011, "Internal error encountered.")),
        ({"kind": "close", "code": 4000, "after_chunks": 0}, Closed(4000, "Internal error encountered.")),
        ({"status": 503}, Closed(1011, "The model is overloaded. Please try again later.")),
    ],
    ids=["close-1011", "close-4000", "rest-503"],
)  # fmt: skip
def test_close_faults_and_rest_status_faults_close_the_socket(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient], fault: dict[str, Any], expected: Closed
) -> None:
    emu = make_emu(_rules({"respond": {"text": "some answer", "fault": fault}}))
    client = connect(emu.live_url)
    client.setup(**TEXT)
    client.send({"realtimeInput": {"text": "go"}})
    assert client.closed() == expected


# ---------------------------------------------------------------------------------------------------------- errors
REST_MODEL_REASON = (
    "models/gemini-3.1-flash-lite is not found for API version v1beta, or is not supported for bidiGenerateContent. "
    "Call ListModels to see the list of available models and their supported methods."
)
INVALID = "Request contains an invalid argument."
PRECONDITION = "Precondition check failed."


@pytest.mark.parametrize(
    ("key", "expected"),
    [("wrong-key", Closed(1008, "API key not valid. Please pass a valid API key.")),
     (None, Closed(1008, truncate_reason(KEY_MISSING)))],
    ids=["bad-key", "missing-key"],
)  # fmt: skip
def test_a_bad_or_missing_api_key_closes_1008(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient], key: str | None, expected: Closed
) -> None:
    emu = make_emu(api_keys=["good-key"])
    client = connect(emu.live_url, key=key)
    client.send({"setup": {"model": f"models/{LIVE_MODEL}"}})
    closed = client.closed()
    assert closed == expected and len(closed.reason.encode()) <= 123
    by_query = connect(emu.live_url, key="good-key", query_key=True)
    by_query.setup(**TEXT)
    assert model_text(by_query.text_turn("q")) == "You said: q"
    assert "good-key" not in json.dumps(emu.live_log)


SETUP = {"setup": {"model": f"models/{LIVE_MODEL}"}}
BAD = Closed(1007, INVALID)


def _setup(**fields: Any) -> dict[str, Any]:
    return {"setup": {"model": f"models/{LIVE_MODEL}", **fields}}


def _audio(mime: str, data: bytes) -> dict[str, Any]:
    return {"realtimeInput": {"audio": {"mimeType": mime, "data": base64.b64encode(data).decode()}}}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([{"clientContent": {"turns": [user("hi")], "turnComplete": True}}], Closed(1007, PRECONDITION)),
        ([SETUP, SETUP], BAD),
        ([{"setup": {"model": "models/gemini-3.1-flash-lite"}}], Closed(1008, REST_MODEL_REASON[:123])),
        ([_setup(bogus=1)], BAD),
        ([_setup(generationConfig={"thinkingBudget": 0})], BAD),
        ([_setup(generationConfig={"responseModalities": ["TEXT", "AUDIO"]})], BAD),
        ([SETUP, {"bogus": {}}], BAD),
        ([SETUP, {"clientContent": {}, "realtimeInput": {}}], BAD),
        ([SETUP, _audio("audio/pcm;rate=16000", b"\x00\x01\x02")], BAD),
        ([SETUP, _audio("audio/wav", b"\x00\x01")], BAD),
        ([SETUP, {"realtimeInput": {"activityStart": {}}}], BAD),
        ([SETUP, {"realtimeInput": {"activityEnd": {}}}], BAD),
        ([_setup(**MANUAL), {"realtimeInput": {"audioStreamEnd": True}}], BAD),
        ([SETUP, {"clientContent": {"turns": [{"role": "system", "parts": [{"text": "x"}]}], "turnComplete": True}}],
         BAD),
        ([SETUP, {"toolResponse": {"functionResponses": [{"id": "nope"}]}}], BAD),
    ],
    ids=["no-setup", "second-setup", "rest-model", "unknown-field", "misplaced-field", "two-modalities",
         "unknown-message", "two-members", "odd-audio", "audio-mime", "activity-start-with-vad",
         "activity-end-with-vad", "stream-end-without-vad", "bad-role", "unknown-tool-id"],
)  # fmt: skip
def test_protocol_errors_close_with_the_real_codes(
    make_emu: Callable[..., Emulator],
    connect: Callable[..., LiveClient],
    messages: list[dict[str, Any]],
    expected: Closed,
) -> None:
    emu = make_emu()
    client = connect(emu.live_url)
    for msg in messages:
        client.send(msg)
    closed = client.closed()
    assert closed == expected
    assert len(closed.reason.encode()) <= 123


def test_invalid_json_and_a_wrong_path_are_refused(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu()
    client = connect(emu.live_url)
    client.ws.send("{not json")
    assert client.closed() == Closed(1007, INVALID)
    wrong = emu.live_url.replace("BidiGenerateContent", "StreamGenerateContent")
    with pytest.raises(websocket.WebSocketBadStatusException) as info:
        connect(wrong)
    assert info.value.status_code == 404


def test_snake_case_keys_and_binary_client_frames_are_accepted(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu()
    client = connect(emu.live_url)
    setup = {"model": f"models/{LIVE_MODEL}", "generation_config": {"response_modalities": ["TEXT"]},
             "realtime_input_config": {"automatic_activity_detection": {"silence_duration_ms": 200}},
             "input_audio_transcription": {}, "system_instruction": {"parts": [{"text": "Be brief."}]}}  # fmt: skip
    client.send({"setup": setup}, binary=True)
    assert client.message() == {"setupComplete": {}}
    client.send({"client_content": {"turns": [user("snake")], "turn_complete": True}}, binary=True)
    assert model_text(client.turn()) == "You said: snake"
    pcm = base64.urlsafe_b64encode(tone(200) + silence(200)).decode().rstrip("=")  # the SDK's URL-safe alphabet
    client.send({"realtime_input": {"media_chunks": [{"mime_type": "audio/pcm", "data": pcm}]}})
    assert model_text(client.turn()) == "You said: (audio 200 ms)"


def test_the_text_frames_script_flag_sends_text_frames(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu(_rules(text_frames=True))
    client = connect(emu.live_url)
    client.setup(**TEXT)
    client.text_turn("t")
    assert set(client.opcodes) == {1}


def test_grounding_and_context_updates(make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]) -> None:
    emu = make_emu(
        _rules(
            {"when": {"system_text_contains": "pirate"}, "respond": {"text": "Arr."}},
            {"when": {"google_search": True},
             "respond": {"text": "Paris is the capital of France.", "grounding": True}},
        )
    )  # fmt: skip
    client = connect(emu.live_url)
    client.setup(**TEXT, tools=[{"googleSearch": {}}])
    messages = client.text_turn("capital of France?")
    (meta,) = server_content(messages, "groundingMetadata")
    assert meta["webSearchQueries"] == ["capital of France?"] and meta["groundingChunks"]
    kinds = [next(iter(m["serverContent"])) for m in messages]
    assert kinds.index("groundingMetadata") < kinds.index("generationComplete")
    client.send({"contextUpdate": {"systemInstruction": {"parts": [{"text": "You are a pirate."}]}}})
    assert model_text(client.text_turn("hello")) == "Arr."


def test_the_live_log_keeps_sizes_never_audio(
    make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    emu = make_emu()
    client = connect(emu.live_url)
    client.setup(**AUDIO)
    pcm = tone(100)
    client.send_audio(pcm + silence(500))  # its last chunk ends the turn: all of it is logged before the answer
    client.turn()
    log = emu.live_log
    audio_in = [e for e in log if e["kind"] == "realtimeInput.audio"]
    assert sum(e["audio_bytes"] for e in audio_in) == len(pcm) + len(silence(500))
    audio_out = [e for e in log if e["kind"] == "serverContent.modelTurn"]
    assert all(e["direction"] == "out" and e["audio_bytes"] > 0 for e in audio_out)
    allowed = {"connection", "direction", "kind", "bytes", "timestamp", "audio_bytes", "code", "reason"}
    assert all(set(e) <= allowed for e in log)
    assert base64.b64encode(pcm[:640]).decode()[:40] not in json.dumps(log)


def test_one_hundred_concurrent_connections_each_answer_a_text_turn(make_emu: Callable[..., Emulator]) -> None:
    emu = make_emu()
    barrier = threading.Barrier(100)
    open_counts: list[int] = []

    def one(i: int) -> str:
        client = LiveClient(emu.live_url, timeout=60)
        try:
            client.setup(**TEXT)
            if barrier.wait(timeout=60) == 0:
                open_counts.append(emu.live_connections())
            return model_text(client.text_turn(f"hello {i}"))
        finally:
            client.close()

    with ThreadPoolExecutor(max_workers=100) as pool:
        answers = list(pool.map(one, range(100)))
    assert answers == [f"You said: hello {i}" for i in range(100)]
    assert open_counts == [100]
    assert poll(lambda: emu.live_connections() == 0)


def test_stop_closes_live_connections_and_deletes_the_tls_files(connect: Callable[..., LiveClient]) -> None:
    emu = Emulator().start()
    silent = socket.create_connection(("127.0.0.1", int(urlsplit(emu.live_url).port or 0)))
    try:
        ca = Path(emu.live_ca_file)
        assert ca.is_file() and emu.live_tls_url.startswith("wss://127.0.0.1:")
        assert [p.name for p in ca.parent.iterdir()] == [ca.name]  # the private key was deleted once loaded
        client = connect(emu.live_url)
        client.setup(**TEXT)
        silent.sendall(b"GET /ws/ HTTP/1.1\r\n")  # a handshake that never completes
    finally:
        started = time.monotonic()
        emu.stop()
        stopped_in = time.monotonic() - started
        silent.close()
    assert stopped_in < 5  # not the 10 s handshake timeout: stop() aborts half-open connections too
    assert not ca.exists() and not ca.parent.exists()
    with pytest.raises((websocket.WebSocketConnectionClosedException, ConnectionError)):
        client.recv()
    with pytest.raises(ConfigError) as info:
        Emulator(live=False).live_url  # noqa: B018
    assert info.value.reason == "live_disabled"


def test_without_cryptography_only_the_ws_listener_runs(
    monkeypatch: pytest.MonkeyPatch, make_emu: Callable[..., Emulator], connect: Callable[..., LiveClient]
) -> None:
    monkeypatch.setitem(sys.modules, "cryptography", None)  # what `import cryptography` meets when not installed
    emu = make_emu()
    for attribute in ("live_tls_url", "live_ca_file"):
        with pytest.raises(ConfigError) as info:
            getattr(emu, attribute)
        assert info.value.reason == "live_tls_unavailable" and "cryptography" in info.value.message
    client = connect(emu.live_url)
    client.setup(**TEXT)
    assert model_text(client.text_turn("plain")) == "You said: plain"


# --------------------------------------------------------------------------------------------- scripts and parsers
@pytest.mark.parametrize(
    "respond",
    [{"pace": -1}, {"chunk_ms": 5}, {"audio_ms_per_char": "x"}, {"go_away_ms": 1.5}, {"input_transcription": 3},
     {"fault": {"kind": "close", "code": 1006}}, {"fault": {"kind": "slow", "after_chunks": 1}},
     {"fault": {"kind": "drop", "after_chunks": -1}}],
)  # fmt: skip
def test_bad_live_respond_keys_are_script_errors(respond: dict[str, Any]) -> None:
    with pytest.raises(ScriptError):
        split_script({"rules": [{"respond": respond}]})
    with pytest.raises(ScriptError):
        Emulator(script={"rules": [{"respond": respond}]})


def test_live_keys_are_taken_out_of_the_rest_script() -> None:
    rest, live = split_script(
        {"text_frames": True, "rules": [{"respond": {"text": "a", "pace": 1, "fault": {"kind": "drop"}}}]}
    )
    assert rest == {"rules": [{"respond": {"text": "a"}}]}
    assert live.text_frames and live.extras == {0: {"pace": 1, "fault": {"kind": "drop"}}}


def _segments_pcm(segments: list[tuple[bool, int]]) -> bytes:
    return b"".join(tone(ms) if loud else silence(ms) for loud, ms in segments)


@given(
    segments=st.lists(st.tuples(st.booleans(), st.integers(1, 120)), max_size=10),
    cuts=st.lists(st.integers(0, 2000), max_size=12),
)
def test_vad_decisions_do_not_depend_on_chunk_boundaries(segments: list[tuple[bool, int]], cuts: list[int]) -> None:
    pcm = _segments_pcm(segments)
    whole = Vad(silence_ms=100).feed(pcm, 16_000)
    points = sorted({min(2 * c, len(pcm)) for c in cuts})
    chunked, vad, last = [], Vad(silence_ms=100), 0
    for point in [*points, len(pcm)]:
        chunked += vad.feed(pcm[last:point], 16_000)
        last = point
    assert chunked == whole


@given(st.text(max_size=200))
def test_close_reasons_are_cut_to_123_bytes_on_a_character_boundary(reason: str) -> None:
    cut = truncate_reason(reason)
    assert len(cut.encode()) <= 123 and reason.startswith(cut)
    if len(reason.encode()) <= 123:
        assert cut == reason


@given(st.integers(1, 192_000), st.sampled_from(["", " "]))
def test_pcm_mime_rates_parse(rate: int, space: str) -> None:
    assert pcm_rate(f"audio/pcm;{space}rate={rate}") == rate
    assert pcm_rate("audio/pcm") == 16_000


@given(st.text(max_size=40))
def test_pcm_mime_parsing_accepts_or_refuses_cleanly(mime: str) -> None:
    try:
        assert pcm_rate(mime) > 0
    except PcmError:
        pass


# -------------------------------------------------------------------------------------------------------------- CLI
def test_the_cli_prints_and_serves_the_live_endpoints(connect: Callable[..., LiveClient]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "adk_actors.emulator", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("Gemini emulator listening on http://127.0.0.1:")
        line = proc.stdout.readline()
        match = re.match(r"Gemini Live listening on (ws://\S+) and (wss://\S+) \(CA file: (\S+)\)$", line.strip())
        assert match, line
        client = connect(match.group(1))
        client.setup(**TEXT)
        assert model_text(client.text_turn("cli")) == "You said: cli"
        client.close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert not Path(match.group(3)).exists()

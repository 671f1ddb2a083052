"""The voice bridge's v1 binary frames (``adk_actors.live.voice_protocol``): strict decoding of client frames and
the server frames' layout."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.errors import LiveError
from adk_actors.live import voice_protocol as vp


def test_an_audio_frame_round_trips() -> None:
    pcm = b"\x01\x00" * 320
    frame = vp.decode_client_frame(vp.encode_audio(1, pcm), max_audio_bytes=64000)
    assert (frame.kind, frame.seq, frame.rate, frame.pcm) == (vp.AUDIO, 1, 16000, pcm)


def test_the_reference_example_frame_decodes() -> None:
    pcm = b"\0\0" * 320
    raw = bytes([1, 1]) + struct.pack(">Q", 1) + struct.pack(">I", 16000) + bytes([1]) + pcm
    assert vp.decode_client_frame(raw, max_audio_bytes=64000).pcm == pcm
    assert vp.decode_client_frame(bytes([1, 2]), max_audio_bytes=64000).kind == vp.STREAM_END


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"\x01", "length"),
        (bytes([2, 1]) + b"\0" * 20, "version"),
        (bytes([1, 9]), "type"),
        (vp.encode_audio(1, b"\0\0\0"), "odd_pcm"),
        (vp.encode_audio(1, b"\0\0", rate=8000), "rate"),
        (vp.encode_audio(1, b"\0" * 70000), "too_large"),
        (vp.encode_audio(0, b"\0\0"), "seq"),
        (bytes([1, 2, 0]), "length"),
        (bytes([1, 3]) + b"\0" * 4, "length"),
    ],
)
def test_malformed_frames_are_refused_with_the_reason(raw: bytes, why: str) -> None:
    with pytest.raises(LiveError) as err:
        vp.decode_client_frame(raw, max_audio_bytes=64000)
    assert err.value.reason == "invalid_voice_frame" and err.value.details["why"] == why


def test_server_frames_carry_the_event_sequence_and_codes() -> None:
    audio = vp.audio_frame(7, b"\1\0", 24000)
    assert audio[:2] == bytes([1, 129]) and struct.unpack(">QIB", audio[2:15]) == (7, 24000, 1)
    text = vp.transcription_frame(8, "output", "héllo", True)
    assert text[:2] == bytes([1, 130]) and text[10:12] == bytes([2, 1]) and text[12:].decode() == "héllo"
    life = vp.lifecycle_frame(9, "interrupted")
    assert life[:2] == bytes([1, 131]) and life[10] == 4
    assert vp.lifecycle_frame(1, "resumed")[10] == 6


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_or_fail_with_live_error(raw: bytes) -> None:
    try:
        vp.decode_client_frame(raw, max_audio_bytes=128)
    except LiveError as err:
        assert err.reason == "invalid_voice_frame"

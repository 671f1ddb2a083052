"""Live media values: PCM chunks and JPEG/PNG frames are checked once, where they enter."""

from __future__ import annotations

import pickle
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.errors import LiveError
from adk_actors.live.media import (
    MAX_AUDIO_CHUNK_BYTES,
    MAX_VIDEO_FRAME_BYTES,
    AudioChunk,
    VideoFrame,
    audio_pcm,
    video_frame,
)

PCM_20MS = struct.pack("<320h", *([0, 1000, -1000, 32767] * 80))
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 32 + b"\xff\xd9"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 17


def _reason(call) -> tuple[str, dict]:
    with pytest.raises(LiveError) as info:
        call()
    return info.value.reason, info.value.details


def test_audio_pcm_accepts_s16le_mono_and_names_its_mime_type():
    chunk = audio_pcm(PCM_20MS)
    assert (chunk.data, chunk.rate, chunk.channels) == (PCM_20MS, 16000, 1)
    assert chunk.mime_type == "audio/pcm;rate=16000"
    assert audio_pcm(b"\x00\x00", rate=48000).mime_type == "audio/pcm;rate=48000"
    assert audio_pcm(b"\x00\x00", rate=8000).rate == 8000


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"data": b""}, "empty chunk"),
        ({"data": b"\x00\x00\x00"}, "odd byte length for 16-bit samples"),
        ({"data": b"\x00" * (MAX_AUDIO_CHUNK_BYTES + 2)}, "chunk too large"),
        ({"data": b"\x00\x00", "rate": 7999}, "sample rate out of range"),
        ({"data": b"\x00\x00", "rate": 48001}, "sample rate out of range"),
        ({"data": b"\x00\x00", "rate": 16000.0}, "sample rate out of range"),
        ({"data": b"\x00\x00", "rate": True}, "sample rate out of range"),
        ({"data": b"\x00\x00", "channels": 2}, "only mono (channels=1) is supported"),
        ({"data": "\x00\x00"}, "data must be bytes"),
    ],
)
def test_audio_pcm_refuses_what_the_service_cannot_take(kwargs, problem):
    reason, details = _reason(lambda: audio_pcm(**kwargs))
    assert reason == "invalid_audio" and details["problem"] == problem


def test_the_largest_audio_chunk_is_accepted():
    assert len(audio_pcm(b"\x00" * MAX_AUDIO_CHUNK_BYTES).data) == MAX_AUDIO_CHUNK_BYTES


def test_audio_buffers_are_copied_so_a_reused_buffer_cannot_change_a_queued_chunk():
    buffer = bytearray(b"\x01\x00\x02\x00")
    chunk = audio_pcm(buffer)
    buffer[0] = 0x7F
    assert chunk.data == b"\x01\x00\x02\x00" and type(chunk.data) is bytes
    assert audio_pcm(memoryview(b"\x03\x00")).data == b"\x03\x00"


def test_the_dataclass_itself_refuses_invalid_audio_too():
    reason, _ = _reason(lambda: AudioChunk(data=b"\x00"))
    assert reason == "invalid_audio"


def test_video_frame_checks_magic_bytes_per_kind():
    assert video_frame("jpeg", JPEG).mime_type == "image/jpeg"
    assert video_frame("png", bytearray(PNG)).mime_type == "image/png"
    for kind, data, problem in [
        ("jpeg", PNG, "data is not a JPEG image"),
        ("png", JPEG, "data is not a PNG image"),
        ("png", b"", "data is not a PNG image"),
        ("gif", b"GIF89a", "kind must be 'jpeg' or 'png'"),
        ("jpeg", "\xff\xd8\xff", "data must be bytes"),
        ("jpeg", b"\xff\xd8\xff" + b"\x00" * MAX_VIDEO_FRAME_BYTES, "frame too large"),
    ]:
        reason, details = _reason(lambda kind=kind, data=data: video_frame(kind, data))
        assert reason == "invalid_video_frame" and details["problem"] == problem


def test_media_values_pickle_and_keep_their_bytes_out_of_repr():
    chunk, frame = audio_pcm(PCM_20MS), video_frame("jpeg", JPEG)
    assert pickle.loads(pickle.dumps(chunk)) == chunk
    assert pickle.loads(pickle.dumps(frame)) == frame
    assert "data" not in repr(chunk) and "JFIF" not in repr(frame)
    assert isinstance(frame, VideoFrame)


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=64) | st.text(max_size=8) | st.none() | st.integers(),
    rate=st.integers(min_value=-1, max_value=100_000) | st.floats() | st.none(),
    channels=st.integers(min_value=-2, max_value=4),
)
def test_audio_pcm_returns_a_chunk_or_raises_live_error_only(data, rate, channels):
    try:
        chunk = audio_pcm(data, rate=rate, channels=channels)
    except LiveError as exc:
        assert exc.reason == "invalid_audio"
    else:
        assert len(chunk.data) % 2 == 0 and chunk.data and 8000 <= chunk.rate <= 48000 and chunk.channels == 1


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(["jpeg", "png", "bmp", ""]) | st.none(), data=st.binary(max_size=16))
def test_video_frame_returns_a_frame_or_raises_live_error_only(kind, data):
    for payload in (data, b"\xff\xd8\xff" + data, b"\x89PNG\r\n\x1a\n" + data):
        try:
            frame = video_frame(kind, payload)
        except LiveError as exc:
            assert exc.reason == "invalid_video_frame"
        else:
            assert frame.kind in ("jpeg", "png")

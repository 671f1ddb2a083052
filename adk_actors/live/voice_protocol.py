"""The voice bridge's versioned binary frames (v1), as pure functions.

All header integers are big-endian; PCM samples stay signed 16-bit little-endian. Byte 0 is the version (1),
byte 1 the frame type.

Client → bridge:

====  ==============  =====================================================================================
type  name            body after the two header bytes
====  ==============  =====================================================================================
1     audio           ``seq: u64`` (strictly increasing from 1), ``rate: u32`` (16000), ``channels: u8`` (1),
                      then the PCM (even length, at most the bridge's ``max_audio_frame_bytes``)
2     stream end      nothing (automatic activity detection only)
3     event ACK       ``seq: u64`` — the exact sequence of a server frame
4     activity start  nothing (manual activity detection only)
5     activity end    nothing
====  ==============  =====================================================================================

Bridge → client (every frame carries the Live event's ``seq: u64`` right after the header; the client ACKs it):

* ``129`` audio: ``rate: u32`` (24000), ``channels: u8`` (1), then PCM;
* ``130`` transcription: ``direction: u8`` (1 input, 2 output), ``finished: u8`` (0/1), then UTF-8 text;
* ``131`` lifecycle: ``code: u8`` (:data:`LIFECYCLE`), then a UTF-8 reason (may be empty).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from adk_actors.errors import LiveError

__all__ = [
    "AUDIO",
    "LIFECYCLE",
    "ClientFrame",
    "audio_frame",
    "decode_client_frame",
    "encode_ack",
    "encode_audio",
    "lifecycle_frame",
    "transcription_frame",
]

VERSION = 1
AUDIO, STREAM_END, ACK, ACTIVITY_START, ACTIVITY_END = 1, 2, 3, 4, 5
S_AUDIO, S_TRANSCRIPTION, S_LIFECYCLE = 129, 130, 131
LIFECYCLE = {
    "active": 1,
    "generation_complete": 2,
    "turn_complete": 3,
    "interrupted": 4,
    "reconnect_required": 5,
    "resumed": 6,
    "closed": 7,
    "error": 8,
}
"""Lifecycle codes: ``4`` is an interruption (cancel scheduled playback now); ``6`` an actual completed resume."""
_HEADER = struct.Struct(">BB")
_SEQ = struct.Struct(">Q")
_AUDIO_HEAD = struct.Struct(">BBQIB")
_MAX_TEXT = 16 * 1024


@dataclass(frozen=True, slots=True)
class ClientFrame:
    kind: int
    seq: int = 0
    rate: int = 0
    pcm: bytes = b""


def _bad(why: str) -> LiveError:
    return LiveError(f"invalid voice frame: {why}", reason="invalid_voice_frame", details={"why": why})


def decode_client_frame(data: bytes, *, max_audio_bytes: int) -> ClientFrame:
    """Decode and check one client frame (sequence order is the bridge's to check).

    Raises:
        LiveError: ``invalid_voice_frame`` (``details["why"]``: version, type, length, rate, channels, odd_pcm,
            too_large, seq).
    """
    if not isinstance(data, bytes | bytearray) or len(data) < 2:
        raise _bad("length")
    version, kind = _HEADER.unpack_from(data)
    if version != VERSION:
        raise _bad("version")
    if kind == AUDIO:
        if len(data) < _AUDIO_HEAD.size + 2:
            raise _bad("length")
        _, _, seq, rate, channels = _AUDIO_HEAD.unpack_from(data)
        pcm = bytes(data[_AUDIO_HEAD.size :])
        if rate != 16000:
            raise _bad("rate")
        if channels != 1:
            raise _bad("channels")
        if len(pcm) % 2:
            raise _bad("odd_pcm")
        if len(pcm) > max_audio_bytes:
            raise _bad("too_large")
        if seq < 1:
            raise _bad("seq")
        return ClientFrame(AUDIO, seq, rate, pcm)
    if kind == ACK:
        if len(data) != 2 + _SEQ.size:
            raise _bad("length")
        (seq,) = _SEQ.unpack_from(data, 2)
        if seq < 1:
            raise _bad("seq")
        return ClientFrame(ACK, seq)
    if kind in (STREAM_END, ACTIVITY_START, ACTIVITY_END):
        if len(data) != 2:
            raise _bad("length")
        return ClientFrame(kind)
    raise _bad("type")


def encode_audio(seq: int, pcm: bytes, rate: int = 16000) -> bytes:
    """A client audio frame (for clients and tests)."""
    return _AUDIO_HEAD.pack(VERSION, AUDIO, seq, rate, 1) + pcm


def encode_ack(seq: int) -> bytes:
    """A client ACK frame."""
    return _HEADER.pack(VERSION, ACK) + _SEQ.pack(seq)


def audio_frame(seq: int, pcm: bytes, rate: int = 24000) -> bytes:
    """A server audio frame (129)."""
    return _HEADER.pack(VERSION, S_AUDIO) + _SEQ.pack(seq) + struct.pack(">IB", rate, 1) + pcm


def transcription_frame(seq: int, direction: str, text: str, finished: bool) -> bytes:
    """A server transcription frame (130); ``direction`` is ``input`` or ``output``."""
    body = text.encode("utf-8")[:_MAX_TEXT]
    flag = 1 if direction == "input" else 2
    return _HEADER.pack(VERSION, S_TRANSCRIPTION) + _SEQ.pack(seq) + struct.pack(">BB", flag, int(finished)) + body


def lifecycle_frame(seq: int, name: str, reason: str = "") -> bytes:
    """A server lifecycle frame (131) with the code of ``name`` (:data:`LIFECYCLE`)."""
    return _HEADER.pack(VERSION, S_LIFECYCLE) + _SEQ.pack(seq) + bytes([LIFECYCLE[name]]) + reason.encode("utf-8")[:128]

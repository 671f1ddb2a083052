"""Checked Live media: PCM audio chunks and JPEG/PNG video frames, validated once where they enter.

Gemini Live takes raw PCM, signed 16-bit little-endian mono (16 kHz by default; other rates are declared in the
MIME type and resampled by the service), and single JPEG or PNG frames. A value of these classes is always valid:
the constructors check it, so the codec and the session never look at the bytes again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adk_actors.errors import LiveError

__all__ = [
    "MAX_AUDIO_CHUNK_BYTES",
    "MAX_AUDIO_RATE",
    "MAX_VIDEO_FRAME_BYTES",
    "MIN_AUDIO_RATE",
    "AudioChunk",
    "VideoFrame",
    "audio_pcm",
    "video_frame",
]

MAX_AUDIO_CHUNK_BYTES = 1024 * 1024
"""Largest PCM chunk (about 32 s at 16 kHz); the service wants 20-100 ms chunks anyway."""
MAX_VIDEO_FRAME_BYTES = 4 * 1024 * 1024
"""Largest encoded video frame."""
MIN_AUDIO_RATE = 8000
"""Lowest accepted sample rate in Hz."""
MAX_AUDIO_RATE = 48000
"""Highest accepted sample rate in Hz."""

_MAGIC: dict[str, bytes] = {"jpeg": b"\xff\xd8\xff", "png": b"\x89PNG\r\n\x1a\n"}


def _audio_error(problem: str, **details: Any) -> LiveError:
    return LiveError(f"invalid audio chunk: {problem}", reason="invalid_audio", details={"problem": problem, **details})


def _video_error(problem: str, **details: Any) -> LiveError:
    return LiveError(
        f"invalid video frame: {problem}", reason="invalid_video_frame", details={"problem": problem, **details}
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioChunk:
    """Raw PCM audio, signed 16-bit little-endian, mono."""

    data: bytes = field(repr=False)
    """The samples: a non-empty, even number of bytes, at most :data:`MAX_AUDIO_CHUNK_BYTES`."""
    rate: int = 16000
    """Sample rate in Hz, within [:data:`MIN_AUDIO_RATE`, :data:`MAX_AUDIO_RATE`]."""
    channels: int = 1
    """Always 1: the service takes mono only."""

    def __post_init__(self) -> None:
        if type(self.data) is not bytes:
            raise _audio_error("data must be bytes", type=type(self.data).__name__)
        if not self.data:
            raise _audio_error("empty chunk")
        if len(self.data) > MAX_AUDIO_CHUNK_BYTES:
            raise _audio_error("chunk too large", bytes=len(self.data), max=MAX_AUDIO_CHUNK_BYTES)
        if len(self.data) % 2:
            raise _audio_error("odd byte length for 16-bit samples", bytes=len(self.data))
        if type(self.rate) is not int or not MIN_AUDIO_RATE <= self.rate <= MAX_AUDIO_RATE:
            raise _audio_error("sample rate out of range", min=MIN_AUDIO_RATE, max=MAX_AUDIO_RATE)
        if type(self.channels) is not int or self.channels != 1:
            raise _audio_error("only mono (channels=1) is supported")

    @property
    def mime_type(self) -> str:
        """The wire MIME type, e.g. ``audio/pcm;rate=16000``."""
        return f"audio/pcm;rate={self.rate}"


@dataclass(frozen=True, slots=True, kw_only=True)
class VideoFrame:
    """One encoded still frame (the service samples video at about one frame per second)."""

    kind: str
    """``"jpeg"`` or ``"png"``, matching the data's magic bytes."""
    data: bytes = field(repr=False)
    """The encoded image, at most :data:`MAX_VIDEO_FRAME_BYTES`."""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or self.kind not in _MAGIC:
            raise _video_error("kind must be 'jpeg' or 'png'")
        if type(self.data) is not bytes:
            raise _video_error("data must be bytes", type=type(self.data).__name__)
        if len(self.data) > MAX_VIDEO_FRAME_BYTES:
            raise _video_error("frame too large", bytes=len(self.data), max=MAX_VIDEO_FRAME_BYTES)
        if not self.data.startswith(_MAGIC[self.kind]):
            raise _video_error(f"data is not a {self.kind.upper()} image", kind=self.kind, bytes=len(self.data))

    @property
    def mime_type(self) -> str:
        """The wire MIME type, ``image/jpeg`` or ``image/png``."""
        return f"image/{self.kind}"


def _as_bytes(data: Any) -> Any:
    # Buffers are copied so a caller reusing its bytearray cannot change a chunk already queued.
    return bytes(data) if isinstance(data, bytearray | memoryview) else data


def audio_pcm(data: bytes | bytearray | memoryview, rate: int = 16000, channels: int = 1) -> AudioChunk:
    """Check raw PCM (s16le, mono) and wrap it for sending.

    Raises:
        LiveError: reason ``invalid_audio`` (not bytes, empty, odd length, larger than 1 MiB, rate outside
            8000..48000 Hz, channels other than 1).
    """
    return AudioChunk(data=_as_bytes(data), rate=rate, channels=channels)


def video_frame(kind: str, data: bytes | bytearray | memoryview) -> VideoFrame:
    """Check one JPEG or PNG frame (by its magic bytes) and wrap it for sending.

    Raises:
        LiveError: reason ``invalid_video_frame`` (unknown kind, not bytes, larger than 4 MiB, magic bytes that do
            not match ``kind``).
    """
    return VideoFrame(kind=kind, data=_as_bytes(data))

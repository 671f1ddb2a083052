"""Deterministic audio for the Live emulator: PCM mime types, a synthetic voice and an energy-based VAD.

Everything here is pure and clock-free. The "voice" is a tone whose pitch follows the answer text (one segment per
character, silence for whitespace), so a test can tell answers apart by their audio alone. The VAD classifies 10 ms
frames of s16le PCM by RMS energy and measures silence in samples, never in wall-clock time, so the same audio ends
a turn at the same byte whatever the client's chunking or pacing.
"""

from __future__ import annotations

import functools
import math
import sys
from array import array
from dataclasses import dataclass

OUTPUT_RATE = 24_000
"""Sample rate of the audio the emulator speaks (``audio/pcm;rate=24000``)."""
OUTPUT_MIME = f"audio/pcm;rate={OUTPUT_RATE}"
DEFAULT_INPUT_RATE = 16_000
"""Rate assumed for a bare ``audio/pcm`` mime type."""
MAX_RATE = 192_000
SPEECH_RMS = 500
"""A 10 ms frame whose RMS (of s16 samples) exceeds this counts as speech."""
FRAME_MS = 10
AMPLITUDE = 8_000
AUDIO_TOKENS_PER_SECOND = 32
"""The fake tokenizer's rate for audio, in and out."""


class PcmError(ValueError):
    """An audio blob the Live endpoint must refuse (bad mime type or odd byte length)."""


def pcm_rate(mime_type: str) -> int:
    """The sample rate of an ``audio/pcm[;rate=N]`` mime type.

    Raises:
        PcmError: not ``audio/pcm`` or a malformed / out-of-range ``rate``.
    """
    head, *params = (p.strip() for p in mime_type.split(";"))
    if head.lower() != "audio/pcm":
        raise PcmError(f"unsupported audio mime type {mime_type!r}")
    rate = DEFAULT_INPUT_RATE
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() != "rate":
            continue
        value = value.strip()
        if not value.isdigit() or not 1 <= int(value) <= MAX_RATE:
            raise PcmError(f"bad rate in {mime_type!r}")
        rate = int(value)
    return rate


def check_pcm(data: bytes) -> None:
    """s16le audio has an even number of bytes.

    Raises:
        PcmError: odd byte length.
    """
    if len(data) % 2:
        raise PcmError("PCM s16le data must have an even number of bytes")


def samples(data: bytes) -> array[int]:
    """s16le bytes as signed 16-bit samples (in native order)."""
    arr = array("h")
    arr.frombytes(data[: len(data) - len(data) % 2])
    if sys.byteorder == "big":
        arr.byteswap()
    return arr


def audio_tokens(ms: float) -> int:
    """Fake token count of ``ms`` milliseconds of audio."""
    return math.ceil(ms * AUDIO_TOKENS_PER_SECOND / 1000) if ms > 0 else 0


# -------------------------------------------------------------------------------------------------------- the voice


def pitch(char: str) -> int:
    """The tone frequency (Hz) the voice uses for ``char``; 0 means silence."""
    if char.isspace():
        return 0
    return 220 + (ord(char) % 24) * 25


@functools.lru_cache(maxsize=1024)
def _tone(freq: int, count: int, rate: int) -> bytes:
    if freq == 0:
        return bytes(2 * count)
    step = 2 * math.pi * freq / rate
    arr = array("h", (int(AMPLITUDE * math.sin(step * k)) for k in range(count)))
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tobytes()


def speech_ms(text: str, ms_per_char: float, cap_ms: int) -> int:
    """How long the voice takes to say ``text``: ``len(text) * ms_per_char``, at most ``cap_ms``."""
    return max(0, min(cap_ms, round(len(text) * ms_per_char)))


def speak(text: str, total_ms: int, rate: int = OUTPUT_RATE) -> bytes:
    """``total_ms`` of s16le mono PCM saying ``text``: equal segments, one per character, pitch from the character."""
    total = total_ms * rate // 1000
    if not text or total <= 0:
        return b""
    n = len(text)
    out = bytearray()
    for i, char in enumerate(text):
        count = total * (i + 1) // n - total * i // n
        if count:
            out += _tone(pitch(char), count, rate)
    return bytes(out)


# ---------------------------------------------------------------------------------------------------------------- VAD


@dataclass
class VadEvent:
    """``kind`` is ``"start"`` (speech began) or ``"end"`` (the turn ended); ``speech_ms`` is set on ``"end"``."""

    kind: str
    speech_ms: int = 0


@dataclass
class Vad:
    """Automatic voice activity detection over s16le PCM.

    A turn is speech (a 10 ms frame with RMS above :data:`SPEECH_RMS`) followed by ``silence_ms`` of low-energy
    frames. Silence is counted in samples; a partial frame waits for the next chunk, so chunk boundaries do not
    matter. ``speech_ms`` of a turn runs from its first speech frame to the end of its last speech frame.
    """

    silence_ms: int = 500
    threshold: int = SPEECH_RMS
    in_speech: bool = False
    _rate: int = DEFAULT_INPUT_RATE
    _pending: bytes = b""
    _speech_samples: int = 0
    _silence_samples: int = 0

    def feed(self, data: bytes, rate: int) -> list[VadEvent]:
        """Analyse one chunk of audio at ``rate``; returns the events it completes, in order."""
        if rate != self._rate:  # keep counts in the new rate's samples
            self._speech_samples = self._speech_samples * rate // self._rate
            self._silence_samples = self._silence_samples * rate // self._rate
            self._pending = b""
            self._rate = rate
        buf = self._pending + data
        frame_bytes = 2 * max(1, rate * FRAME_MS // 1000)
        usable = len(buf) - len(buf) % frame_bytes
        self._pending = buf[usable:]
        events: list[VadEvent] = []
        limit = self.threshold * self.threshold
        pcm = samples(buf[:usable])
        per = frame_bytes // 2
        for start in range(0, len(pcm), per):
            frame = pcm[start : start + per]
            loud = sum(x * x for x in frame) > limit * len(frame)
            self._frame(loud, len(frame), rate, events)
        return events

    def _frame(self, loud: bool, count: int, rate: int, events: list[VadEvent]) -> None:
        if loud:
            if not self.in_speech:
                self.in_speech = True
                self._speech_samples = 0
                events.append(VadEvent("start"))
            self._speech_samples += self._silence_samples + count
            self._silence_samples = 0
            return
        if not self.in_speech:
            return
        self._silence_samples += count
        if self._silence_samples * 1000 >= self.silence_ms * rate:
            events.append(VadEvent("end", self._speech_samples * 1000 // rate))
            self._reset()

    def flush(self) -> VadEvent | None:
        """End of the audio stream: the turn in progress ends now (``None`` when there was no speech)."""
        event = VadEvent("end", self._speech_samples * 1000 // self._rate) if self.in_speech else None
        self._reset()
        self._pending = b""
        return event

    def _reset(self) -> None:
        self.in_speech = False
        self._speech_samples = 0
        self._silence_samples = 0

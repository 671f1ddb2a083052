"""Live-test fixtures: an emulator with its Live endpoint, a session factory that closes what it started."""

from __future__ import annotations

import math
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from adk_actors.emulator import LIVE_MODEL, Emulator
from adk_actors.errors import AdkError
from adk_actors.live import LiveSessionRef, close_live_session, start_live_session
from adk_actors.runtime.system import ActorSystemHandle

PRINCIPAL = "live-test-user"
StartLive = Callable[..., LiveSessionRef]


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


def live_config(emu: Emulator, **provider: Any) -> dict[str, Any]:
    """A Live config on the emulator's plain ``ws://`` endpoint (loopback, explicitly allowed)."""
    extra = {k: provider.pop(k) for k in list(provider) if k.startswith("max_") or k in ("tool_execution",)}
    extra.update({k: provider.pop(k) for k in list(provider) if k.endswith("_ms")})
    return {
        "provider": "gemini",
        "api_key": "test-key",
        "endpoint": {"url": emu.live_url, "allow_insecure_loopback": True},
        "provider_config": {"model": LIVE_MODEL, "output_audio_transcription": True, **provider},
        **extra,
    }


@pytest.fixture
def start_live(system: ActorSystemHandle, emu: Emulator) -> Iterator[StartLive]:
    """``start_live(principal=PRINCIPAL, **config) -> LiveSessionRef`` on the emulator; closed after the test."""
    started: list[tuple[LiveSessionRef, str]] = []

    def start(principal: str = PRINCIPAL, session_id: str | None = None, **config: Any) -> LiveSessionRef:
        sid = session_id or f"live-{uuid.uuid4().hex[:10]}"
        ref = start_live_session(sid, principal, live_config(emu, **config), system=system)
        started.append((ref, principal))
        return ref

    yield start
    for ref, principal in started:
        try:
            close_live_session(ref, principal, timeout=5)
        except AdkError:
            pass


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Poll ``condition`` until it holds (a condition, never a fixed sleep)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def speech_then_silence(*, speech_ms: int, silence_ms: int, chunk_ms: int = 100) -> list[bytes]:
    """16 kHz s16le mono: a loud 440 Hz tone (speech to the emulator's VAD), then zeros, in ``chunk_ms`` pieces."""
    rate = 16000
    tone = [int(8000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(rate * speech_ms // 1000)]
    pcm = struct.pack(f"<{len(tone)}h", *tone) + b"\0\0" * (rate * silence_ms // 1000)
    step = 2 * rate * chunk_ms // 1000
    return [pcm[i : i + step] for i in range(0, len(pcm), step)]


WEATHER_DECLARATION = {
    "type": "function",
    "name": "get_weather",
    "description": "Return the weather for one city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def get_weather(city: str) -> dict[str, str]:
    """Return the weather for one city.

    Args:
        city: the city.
    """
    return {"forecast": f"sunny in {city}"}


def weather_tool() -> Any:
    from adk_actors.tools.function_tool import FunctionTool

    return FunctionTool(get_weather)

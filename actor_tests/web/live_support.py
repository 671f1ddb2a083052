"""Fixtures and helpers for the developer Live surfaces: ``dev_app`` served with WebSockets on 127.0.0.1, acting as
a developer Live principal, over the shared node and the Gemini emulator's Live endpoint.

* :func:`serve_live` — a served ``dev_app`` (``live_principal`` given, or the node's/environment's) and a client
  holding the token; stopped on exit. :func:`start_server` turns WebSockets on when ``uvicorn_config`` leaves them
  off (then the voice socket could not be reached through ``start_in_thread``).
* :func:`voice_connect` — a ``websockets`` client on the voice socket, authenticated by subprotocol.
* :func:`speech_pcm` — 16 kHz s16le "speech" (the emulator's tone voice) followed by silence, so the emulator's VAD
  ends a turn.
* :func:`parse_server_frame` — a server frame (129/130/131) as a dict.
"""

from __future__ import annotations

import contextlib
import secrets
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from actor_tests.web.dev_support import recording_client
from adk_actors.emulator import Emulator, live_audio
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.secrets import Secret
from adk_actors.web import DevToken, EdgeLimits, ServerThread, start_in_thread
from adk_actors.web.dev import dev_app
from adk_actors.web.voice_page import SUBPROTOCOL, bearer_subprotocol

TOKEN = "dev-live-" + secrets.token_hex(16)
"""This session's developer token (random, so a leak check cannot pass by accident)."""
OWNER = "dev-live-owner-" + secrets.token_hex(8)
"""The developer Live principal the served app acts as (random, for the leak checks)."""
FRAME_BYTES = 640
"""20 ms of 16 kHz s16le mono."""


def start_server(app: Any, limits: EdgeLimits | None = None) -> ServerThread:
    """``app`` served on 127.0.0.1 (a free port) by the edge's own uvicorn configuration (WebSockets on)."""
    return start_in_thread(app, "127.0.0.1", 0, limits=limits)


@dataclass
class LiveDev:
    """One served ``dev_app`` with Live access and what a test needs to drive it."""

    url: str
    token: str
    system: ActorSystemHandle
    emu: Emulator
    server: ServerThread
    client: httpx.Client
    """Sends the token; base URL is :attr:`url`."""
    responses: list[httpx.Response] = field(default_factory=list)
    """Every non-streamed response :attr:`client` received (for leak checks)."""

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http")


@contextlib.contextmanager
def serve_live(
    system: ActorSystemHandle,
    emu: Emulator,
    *,
    live_principal: str | None = OWNER,
    limits: EdgeLimits | None = None,
    console: bool = True,
) -> Iterator[LiveDev]:
    """``dev_app`` for ``system`` acting as ``live_principal`` (``None``: the node's setting / environment), served
    with WebSockets; stopped on exit."""
    principal = Secret(live_principal) if live_principal is not None else None
    app = dev_app(system, token=DevToken(TOKEN), limits=limits, live_principal=principal, console=console)
    server = start_server(app, limits)
    client, responses = recording_client(server.url, TOKEN)
    try:
        yield LiveDev(server.url, TOKEN, system, emu, server, client, responses)
    finally:
        client.close()
        assert server.stop(), "the dev server thread outlived its test"


def voice_connect(
    dev: LiveDev, session_id: str, *, token: str | None = TOKEN, protocols: list[str] | None = None
) -> Any:
    """A ``websockets`` (sync) client on the session's voice socket; ``token=None`` offers none."""
    from websockets.sync.client import connect
    from websockets.typing import Subprotocol

    offered = protocols if protocols is not None else [SUBPROTOCOL] + ([bearer_subprotocol(token)] if token else [])
    return connect(
        f"{dev.ws_url}/dev/v1/live/sessions/{session_id}/voice",
        subprotocols=[Subprotocol(p) for p in offered],
        open_timeout=10,
        close_timeout=5,
        max_size=2**20,
        compression=None,
    )


def speech_pcm(text: str = "turn on the lights", speech_ms: int = 800, silence_ms: int = 1000) -> bytes:
    """``speech_ms`` of the emulator's tone voice saying ``text`` at 16 kHz, then ``silence_ms`` of silence."""
    return live_audio.speak(text, speech_ms, rate=16000) + bytes(2 * 16 * silence_ms)


def audio_frames(pcm: bytes, first_seq: int = 1) -> list[bytes]:
    """``pcm`` cut into 20 ms v1 audio frames with sequences from ``first_seq``."""
    from adk_actors.live import voice_protocol as vp

    cuts = range(0, len(pcm) - len(pcm) % 2, FRAME_BYTES)
    return [vp.encode_audio(first_seq + i, pcm[at : at + FRAME_BYTES]) for i, at in enumerate(cuts)]


def parse_server_frame(data: bytes) -> dict[str, Any]:
    """A server frame as ``{"type", "seq", ...}`` (audio: ``rate``, ``pcm``; transcription: ``direction``,
    ``finished``, ``text``; lifecycle: ``code``, ``reason``)."""
    version, kind, seq = struct.unpack_from(">BBQ", data)
    assert version == 1, data[:2]
    body = data[10:]
    if kind == 129:
        rate, channels = struct.unpack_from(">IB", body)
        return {"type": kind, "seq": seq, "rate": rate, "channels": channels, "pcm": body[5:]}
    if kind == 130:
        return {
            "type": kind,
            "seq": seq,
            "direction": "input" if body[0] == 1 else "output",
            "finished": bool(body[1]),
            "text": body[2:].decode("utf-8"),
        }
    assert kind == 131, kind
    return {"type": kind, "seq": seq, "code": body[0], "reason": body[1:].decode("utf-8")}

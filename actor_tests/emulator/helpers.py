"""Shared helpers for the emulator tests (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import base64
import json
import math
import socket
import struct
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any

import requests
import websocket

MODEL = "gemini-3.1-flash-lite"
GEN = f"/v1beta/models/{MODEL}:generateContent"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent"
COUNT = f"/v1beta/models/{MODEL}:countTokens"
KEY = "test-key"

WEATHER_TOOL = {
    "functionDeclarations": [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]},
        }
    ]
}


def post(
    base_url: str,
    path: str,
    body: Any = None,
    *,
    key: str | None = KEY,
    raw: bytes | None = None,
    params: dict[str, str] | None = None,
    timeout: float = 30,
    stream: bool = False,
    session: requests.Session | None = None,
) -> requests.Response:
    """POST JSON (or raw bytes) with the API key header."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["x-goog-api-key"] = key
    data = raw if raw is not None else json.dumps(body).encode()
    return (session or requests).post(
        base_url + path, data=data, headers=headers, params=params, timeout=timeout, stream=stream
    )


def user(text: str) -> dict[str, Any]:
    """A user text content."""
    return {"role": "user", "parts": [{"text": text}]}


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    """Parse an SSE body framed as ``data: <json>\\r\\n\\r\\n`` strictly."""
    assert raw.endswith(b"\r\n\r\n") or raw == b"", raw[-20:]
    events = []
    for block in raw.split(b"\r\n\r\n"):
        if not block:
            continue
        assert block.startswith(b"data: "), block[:30]
        assert b"\n" not in block and b"\r" not in block
        events.append(json.loads(block[len(b"data: ") :]))
    return events


def raw_http(port: int, request: bytes, timeout: float = 10) -> bytes:
    """Send raw bytes and read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


def dechunk(body: bytes) -> bytes:
    """Decode an HTTP chunked body (tolerates a missing last chunk)."""
    out = b""
    while body:
        line, _, rest = body.partition(b"\r\n")
        if not line:
            break
        size = int(line, 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return out


# ---------------------------------------------------------------------------------------------------------------- Live

LIVE_MODEL = "gemini-3.1-flash-live-preview"


@dataclass(frozen=True)
class Closed:
    """The close frame a Live connection ended with."""

    code: int
    reason: str


class LiveClient:
    """A ``websocket-client`` Live connection: JSON messages out, every server frame parsed as UTF-8 JSON.

    ``opcodes`` records the opcode of every data frame received (2 = binary, 1 = text).
    """

    def __init__(self, url: str, key: str | None = KEY, *, query_key: bool = False, timeout: float = 15) -> None:
        header = [f"x-goog-api-key: {key}"] if key is not None and not query_key else []
        if query_key:
            url += f"?key={key}"
        self.ws = websocket.create_connection(url, header=header, timeout=timeout)
        self.opcodes: list[int] = []
        self.raw: list[bytes] = []

    def send(self, msg: dict[str, Any], *, binary: bool = False) -> None:
        """Send one message as a text frame (``binary=True``: as a binary frame)."""
        data = json.dumps(msg)
        if binary:
            self.ws.send_binary(data.encode())
        else:
            self.ws.send(data)

    def recv(self) -> dict[str, Any] | Closed:
        """The next server message, or the close frame."""
        while True:
            opcode, frame = self.ws.recv_data_frame(control_frame=True)
            data = frame.data if hasattr(frame, "data") else frame
            data = data.encode() if isinstance(data, str) else bytes(data)
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                code = int.from_bytes(data[:2], "big") if len(data) >= 2 else 1005
                return Closed(code, data[2:].decode("utf-8"))
            if opcode in (websocket.ABNF.OPCODE_PING, websocket.ABNF.OPCODE_PONG):
                continue
            self.opcodes.append(opcode)
            self.raw.append(data)
            parsed: dict[str, Any] = json.loads(data.decode("utf-8"))
            return parsed

    def message(self) -> dict[str, Any]:
        """The next server message (fails on a close frame)."""
        msg = self.recv()
        assert not isinstance(msg, Closed), msg
        return msg

    def setup(self, **setup: Any) -> None:
        """Send ``setup`` (Live model by default) and expect ``setupComplete``."""
        self.send({"setup": {"model": f"models/{LIVE_MODEL}", **setup}})
        assert self.message() == {"setupComplete": {}}

    def until(self, done: Any) -> list[dict[str, Any]]:
        """Messages up to and including the first for which ``done(msg)`` is true."""
        out = []
        while True:
            msg = self.message()
            out.append(msg)
            if done(msg):
                return out

    def turn(self) -> list[dict[str, Any]]:
        """Messages up to and including ``turnComplete``."""
        return self.until(lambda m: m.get("serverContent", {}).get("turnComplete"))

    def closed(self) -> Closed:
        """Skip messages until the close frame."""
        while True:
            msg = self.recv()
            if isinstance(msg, Closed):
                return msg

    def text_turn(self, text: str) -> list[dict[str, Any]]:
        """A ``clientContent`` user turn and its answer."""
        self.send({"clientContent": {"turns": [user(text)], "turnComplete": True}})
        return self.turn()

    def send_audio(self, pcm: bytes, rate: int = 16_000, chunk_ms: int = 20) -> None:
        """Stream ``pcm`` as ``realtimeInput.audio`` chunks (as fast as possible)."""
        step = 2 * rate * chunk_ms // 1000
        for i in range(0, len(pcm), step):
            blob = {"mimeType": f"audio/pcm;rate={rate}", "data": base64.b64encode(pcm[i : i + step]).decode()}
            self.send({"realtimeInput": {"audio": blob}})

    def close(self) -> None:
        """Close the socket."""
        self.ws.close()


def tone(ms: int, rate: int = 16_000, freq: int = 440, amplitude: int = 6000) -> bytes:
    """``ms`` of a sine tone as s16le mono PCM (loud enough to count as speech)."""
    count = rate * ms // 1000
    return struct.pack(f"<{count}h", *(int(amplitude * math.sin(2 * math.pi * freq * k / rate)) for k in range(count)))


def silence(ms: int, rate: int = 16_000) -> bytes:
    """``ms`` of digital silence as s16le mono PCM."""
    return bytes(2 * (rate * ms // 1000))


def server_content(messages: list[dict[str, Any]], key: str) -> list[Any]:
    """The ``serverContent[key]`` values of ``messages``, in order."""
    return [m["serverContent"][key] for m in messages if key in m.get("serverContent", {})]


def model_text(messages: list[dict[str, Any]]) -> str:
    """The text parts of every ``modelTurn`` joined."""
    return "".join(p.get("text", "") for turn in server_content(messages, "modelTurn") for p in turn["parts"])


def model_audio(messages: list[dict[str, Any]]) -> list[bytes]:
    """The decoded audio of every ``modelTurn`` chunk (asserting the output mime type)."""
    out = []
    for turn in server_content(messages, "modelTurn"):
        for part in turn["parts"]:
            assert part["inlineData"]["mimeType"] == "audio/pcm;rate=24000"
            out.append(base64.b64decode(part["inlineData"]["data"]))
    return out


def validate_live_frames(frames: list[bytes]) -> None:
    """Every served Live frame must parse with ``google.genai.types.LiveServerMessage`` (no extra keys, no unknown
    enum values).

    Raises:
        AssertionError: naming the first few rejected frames.
    """
    from google.genai import types

    failures = []
    for body in frames:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                types.LiveServerMessage.model_validate(json.loads(body))
            except Exception as exc:  # pydantic.ValidationError or bad JSON
                failures.append(f"{body[:200]!r}: {type(exc).__name__}: {str(exc)[:300]}")
                continue
        unknown = [str(w.message) for w in caught if "is not a valid" in str(w.message)]
        if unknown:
            failures.append(f"{body[:200]!r}: unknown enum value {unknown}")
    assert not failures, "LiveServerMessage rejected frames:\n" + "\n".join(failures[:5])


def poll(condition: Any, timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Re-check ``condition()`` until it is true or ``timeout`` seconds passed; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return bool(condition())
        threading.Event().wait(interval)

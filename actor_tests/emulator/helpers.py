"""Shared helpers for the emulator tests (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import json
import socket
from typing import Any

import requests

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

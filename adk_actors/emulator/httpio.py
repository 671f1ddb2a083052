"""A small, strict HTTP/1.1 request reader and response writers on top of asyncio streams."""

from __future__ import annotations

import asyncio
import http
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

MAX_HEADER_BYTES = 64 * 1024
MAX_HEADERS = 200


class HttpError(Exception):
    """A protocol-level problem answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Request:
    """A parsed HTTP request."""

    method: str
    target: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    version: str

    @property
    def keep_alive(self) -> bool:
        """Whether the client allows the connection to be reused."""
        conn = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn


async def _readline(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readline()
    except ValueError as exc:  # line longer than the reader limit
        raise HttpError(431, "Request header line too long") from exc


async def read_request(
    reader: asyncio.StreamReader, max_body: int, writer: asyncio.StreamWriter | None = None
) -> Request | None:
    """Read one request; None on a clean EOF before a request line.

    With ``writer``, an ``Expect: 100-continue`` request (curl sends one for large bodies) gets its interim
    ``100 Continue`` before the body is read.
    """
    line = await _readline(reader)
    if not line:
        return None
    if not line.endswith(b"\n"):
        return None
    try:
        method, target, version = line.decode("ascii").rstrip("\r\n").split(" ")
    except (UnicodeDecodeError, ValueError) as exc:
        raise HttpError(400, "Malformed request line") from exc
    if version not in ("HTTP/1.1", "HTTP/1.0") or not target.startswith("/"):
        raise HttpError(400, "Unsupported request line")
    headers: dict[str, str] = {}
    total = len(line)
    for _ in range(MAX_HEADERS + 1):
        hline = await _readline(reader)
        if not hline:
            raise ConnectionResetError("EOF in headers")
        total += len(hline)
        if total > MAX_HEADER_BYTES:
            raise HttpError(431, "Request headers too large")
        if hline in (b"\r\n", b"\n"):
            break
        name, sep, value = hline.decode("latin-1").partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(400, "Malformed header line")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    else:
        raise HttpError(431, "Too many headers")
    body = b""
    expects_continue = headers.get("expect", "").lower() == "100-continue"
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_body:
        raise HttpError(413, f"Request payload size exceeds the limit: {max_body} bytes.")
    if expects_continue and writer is not None:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader, max_body)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError as exc:
            raise HttpError(400, "Bad Content-Length") from exc
        if length < 0:
            raise HttpError(400, "Bad Content-Length")
        if length > max_body:
            raise HttpError(413, f"Request payload size exceeds the limit: {max_body} bytes.")
        body = await reader.readexactly(length)
    parts = urlsplit(target)
    return Request(
        method=method,
        target=target,
        path=unquote(parts.path),
        query=parse_qs(parts.query, keep_blank_values=True),
        headers=headers,
        body=body,
        version=version,
    )


async def _read_chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
    chunks: list[bytes] = []
    size_total = 0
    while True:
        size_line = await _readline(reader)
        try:
            size = int(size_line.split(b";")[0].strip(), 16)
        except ValueError as exc:
            raise HttpError(400, "Bad chunk size") from exc
        if size == 0:
            while (await _readline(reader)) not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        size_total += size
        if size_total > max_body:
            raise HttpError(413, f"Request payload size exceeds the limit: {max_body} bytes.")
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


def head(status: int, headers: list[tuple[str, str]]) -> bytes:
    """Status line plus headers plus the blank line."""
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def full_response(
    status: int, body: bytes, content_type: str, keep_alive: bool, extra: dict[str, Any] | None = None
) -> bytes:
    """A complete Content-Length response."""
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Vary", "Origin, X-Origin, Referer"),
        ("Server", "scaffolding on HTTPServer2"),
    ]
    headers += [(k, str(v)) for k, v in (extra or {}).items()]
    if not keep_alive:
        headers.append(("Connection", "close"))
    return head(status, headers) + body


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body."""
    return f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n"


LAST_CHUNK = b"0\r\n\r\n"

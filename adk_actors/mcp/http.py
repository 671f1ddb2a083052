"""The Streamable HTTP transport: the SDK's ``streamable_http_client`` over an ``httpx2`` client we configure.

What we add around the SDK transport:

* URL rules: ``https`` by default; ``http`` only to a loopback host and only with ``allow_http_loopback=True``
  (as the reference asks); no user info, query or fragment in the URL (a credential must never become part of a
  request URL);
* the bearer token (a :class:`~adk_actors.secrets.Secret`) goes only into the ``Authorization`` header; the client
  never follows redirects (the SDK follows same-origin ones only, and we turn those off too);
* a byte bound on every response body: the SDK bounds one SSE event but reads a JSON response whole, so a hostile
  server could send an unbounded body; our transport counts bytes and fails the response with
  ``mcp_message_too_large`` past ``max_message_bytes``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp.client.streamable_http import streamable_http_client

from adk_actors.errors import McpError
from adk_actors.secrets import Secret
from adk_actors.settings import is_loopback_host

__all__ = ["check_url", "http_transport"]


def check_url(url: Any, *, allow_http_loopback: bool = False) -> str:
    """Validate an MCP endpoint URL.

    Raises:
        McpError: ``invalid_url`` (not http(s), user info, query, fragment, no host) or ``insecure_url`` (``http``
            to a non-loopback host, or to loopback without ``allow_http_loopback``).
    """
    if not isinstance(url, str) or len(url) > 2048:
        raise McpError("the MCP URL must be a string of at most 2048 characters", reason="invalid_url")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise McpError("the MCP URL cannot be parsed", reason="invalid_url") from None
    del port
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise McpError("the MCP URL must be http(s)://host/...", reason="invalid_url", details={"rule": "scheme"})
    if parts.username is not None or parts.password is not None:
        raise McpError("the MCP URL must not carry user info", reason="invalid_url", details={"rule": "userinfo"})
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise McpError(
            "the MCP URL must not carry a query or fragment", reason="invalid_url", details={"rule": "query"}
        )
    if parts.scheme == "http" and not (allow_http_loopback and is_loopback_host(parts.hostname)):
        raise McpError(
            "plain http is only allowed to a loopback host with allow_http_loopback=True",
            reason="insecure_url",
        )
    return url


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, limit: int) -> None:
        self._inner, self._limit, self._seen = inner, limit, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._seen += len(chunk)
            if self._seen > self._limit:
                raise McpError(
                    "the MCP server's response is larger than max_message_bytes",
                    reason="mcp_message_too_large",
                    details={"limit": self._limit},
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedTransport(httpx2.AsyncBaseTransport):
    """Counts the bytes of every response body (JSON or SSE) against one bound."""

    def __init__(self, limit: int, sse_limit: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._limit, self._sse_limit = limit, sse_limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        sse = response.headers.get("content-type", "").startswith("text/event-stream")
        # An SSE stream carries many messages: the SDK bounds each event; the stream as a whole gets a larger bound.
        response.stream = _BoundedStream(response.stream, self._sse_limit if sse else self._limit)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def http_transport(
    url: str,
    *,
    token: Secret | None,
    max_message_bytes: int,
    connect_timeout_s: float,
) -> AsyncIterator[tuple[Any, Any]]:
    """Yield the SDK's ``(read_stream, write_stream)`` pair for a Streamable HTTP endpoint (``url`` already
    checked with :func:`check_url`)."""
    headers = {"Authorization": f"Bearer {token.reveal()}"} if token is not None else {}
    client = httpx2.AsyncClient(
        headers=headers,
        follow_redirects=False,
        timeout=httpx2.Timeout(connect_timeout_s, read=None),
        transport=_BoundedTransport(max_message_bytes, 64 * max_message_bytes),
        trust_env=False,
    )
    async with client, streamable_http_client(url, http_client=client, max_sse_event_size=max_message_bytes) as pair:
        yield pair[0], pair[1]

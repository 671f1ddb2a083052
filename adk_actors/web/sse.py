"""Server-sent events on the edge: encoding, ``Last-Event-ID``, and a bounded stream response.

:class:`SseStream` sends the events of an async source and closes cleanly at the first bound of its
:class:`~adk_actors.web.edge.EdgeLimits`: ``sse_max_events`` events, ``sse_max_bytes`` encoded bytes or
``sse_max_duration_ms`` — with a last ``event: bound`` (``{"bound": "events" | "bytes" | "duration", "limit": N}``,
no ``id``, so the client's ``Last-Event-ID`` stays on the last real event and a reconnect loses nothing). When the
source is idle it sends ``: keepalive`` comments every ``keepalive_s``. It holds one of the guard's
``max_concurrent_streams`` slots from before it starts until it ends for any reason (client disconnect included);
without a free slot it answers 503 ``too_many_streams`` and never starts. Ending a stream closes its source (an
:meth:`~adk_actors.web.offload.Offload.iterate` subscription unsubscribes); it never cancels the work behind it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from adk_actors.errors import AdkError, ConfigError, ValidationError
from adk_actors.logs import log_crash
from adk_actors.web.edge import EdgeLimits, StreamSlots, error_response

__all__ = [
    "KEEPALIVE",
    "MAX_EVENT_ID",
    "MAX_EVENT_ID_DIGITS",
    "SseEvent",
    "SseStream",
    "encode_event",
    "parse_last_event_id",
]

MAX_EVENT_ID = 2**63 - 1
"""Largest event id (ids are sequence numbers, ``0 <= id <= 2**63 - 1``)."""
MAX_EVENT_ID_DIGITS = len(str(MAX_EVENT_ID))
"""Longest ``Last-Event-ID`` accepted (19 digits)."""
KEEPALIVE = b": keepalive\n\n"
"""The comment an idle stream sends (clients ignore comments; proxies see traffic)."""

_EVENT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:\-]{0,63}")
_DIGITS = re.compile(r"0|[1-9][0-9]{0,18}")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event for :class:`SseStream`."""

    id: int | None
    """The sequence number the client sends back as ``Last-Event-ID`` (``None``: no id line)."""
    event: str
    """The event name (``[A-Za-z][A-Za-z0-9_.:-]{0,63}``)."""
    data: Any
    """JSON-encodable payload."""
    last: bool = False
    """The source's final event: the stream ends after it (without ``event: bound``, even when it reaches a bound)."""


def _json_text(data: Any) -> str:
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:  # lone surrogates: escape them, as JSON allows
        return json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        raise ValidationError("event data must be JSON-encodable", reason="invalid_event_data") from None


def encode_event(id: int | None, event: str, data: Any) -> bytes:
    """One SSE event: ``id:``, ``event:`` and ``data:`` lines (data as compact JSON), then a blank line.

    The JSON never holds a raw line break, and the data is split on CR, LF and CRLF anyway, so nothing in ``data``
    can end the event or add a field; ``event`` is validated, so it cannot either.

    Raises:
        ValidationError: reason ``invalid_event_id`` (not an int in ``[0, MAX_EVENT_ID]``), ``invalid_event_name``
            or ``invalid_event_data`` (not JSON-encodable, or NaN/Infinity).
    """
    if id is not None and (isinstance(id, bool) or not isinstance(id, int) or not 0 <= id <= MAX_EVENT_ID):
        raise ValidationError(
            "an event id is an integer in [0, 2**63 - 1]", reason="invalid_event_id", details={"maximum": MAX_EVENT_ID}
        )
    if not isinstance(event, str) or not _EVENT_NAME.fullmatch(event):
        raise ValidationError("invalid SSE event name", reason="invalid_event_name")
    lines = [] if id is None else [f"id: {id}"]
    lines.append(f"event: {event}")
    lines.extend(f"data: {line}" for line in _LINE_BREAK.split(_json_text(data)))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def parse_last_event_id(header: str | bytes | None) -> int | None:
    """The sequence number in a ``Last-Event-ID`` header, or ``None`` when there is none.

    Strict: canonical decimal (no sign, no leading zeros, no spaces), at most :data:`MAX_EVENT_ID_DIGITS` digits,
    at most :data:`MAX_EVENT_ID`.

    Raises:
        ValidationError: reason ``invalid_last_event_id`` (400); the header's value is not echoed.
    """
    if header is None:
        return None
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    if isinstance(header, str) and _DIGITS.fullmatch(header):
        value = int(header)
        if value <= MAX_EVENT_ID:
            return value
    raise ValidationError(
        "Last-Event-ID must be a decimal event id",
        reason="invalid_last_event_id",
        details={"max_digits": MAX_EVENT_ID_DIGITS},
    )


async def _close_source(source: object) -> None:
    aclose = getattr(source, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception as exc:  # a failing cleanup must not keep the slot or hide the stream's end
        log_crash("adk_actors.web", "sse_source_close_failed", exc)


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class SseStream(Response):
    """A bounded ``text/event-stream`` response over an async iterable of :class:`SseEvent`.

    Args:
        source: the events; closed (``aclose``) when the stream ends for any reason.
        limits: the bounds; default the enclosing guard's.
        slots: the concurrency slots; default the enclosing guard's (one of the two is required).
        headers: extra response headers.

    A source that raises an :class:`AdkError` ends the stream with ``event: error`` ``{"reason": ...}``; any other
    exception with ``{"reason": "internal"}`` (and a crash log).
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        source: AsyncIterable[SseEvent],
        limits: EdgeLimits | None = None,
        *,
        slots: StreamSlots | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.source = source
        self.limits = limits
        self.slots = slots
        self.status_code = 200
        self.background = None
        self.init_headers({"cache-control": "no-store", "x-accel-buffering": "no", **(headers or {})})

    def _resolve(self, scope: Scope) -> tuple[EdgeLimits, StreamSlots]:
        state = scope.get("state") or {}
        limits = self.limits or state.get("edge_limits") or EdgeLimits()
        slots = self.slots or state.get("edge_streams")
        if not isinstance(slots, StreamSlots):
            raise ConfigError("an SseStream needs an EdgeGuard in front or explicit slots", reason="missing_slots")
        return limits, slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            limits, slots = self._resolve(scope)
        except ConfigError:
            await _close_source(self.source)
            raise
        if not slots.try_acquire():
            await _close_source(self.source)
            busy = error_response(503, "too_many_streams", max_concurrent_streams=slots.limit)
            await busy(scope, receive, send)
            return
        try:
            await _Run(self, limits, receive, send).run()
        finally:
            slots.release()
            await _close_source(self.source)


class _Run:
    """The state of one stream while it runs."""

    def __init__(self, response: SseStream, limits: EdgeLimits, receive: Receive, send: Send) -> None:
        self.response = response
        self.limits = limits
        self.receive = receive
        self.send = send
        self.events = 0
        self.bytes = 0

    async def body(self, chunk: bytes) -> None:
        await self.send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def bound(self, which: str, limit: int) -> None:
        await self.body(encode_event(None, "bound", {"bound": which, "limit": limit}))

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        limits = self.limits
        deadline = loop.time() + limits.sse_max_duration_ms / 1000
        iterator: AsyncIterator[SseEvent] = aiter(self.response.source)
        await self.send(
            {"type": "http.response.start", "status": self.response.status_code, "headers": self.response.raw_headers}
        )
        gone: asyncio.Future[Any] = asyncio.ensure_future(_until_disconnect(self.receive))
        pending: asyncio.Future[Any] | None = None
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    await self.bound("duration", limits.sse_max_duration_ms)
                    break
                if pending is None:
                    pending = asyncio.ensure_future(anext(iterator))
                done, _ = await asyncio.wait(
                    {pending, gone}, timeout=min(limits.keepalive_s, left), return_when=asyncio.FIRST_COMPLETED
                )
                if gone in done:
                    return
                if pending not in done:
                    if deadline - loop.time() > 0:
                        await self.body(KEEPALIVE)
                    continue
                finished, pending = pending, None
                if not await self.forward(finished):
                    break
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away while we were writing
            return
        finally:
            for task in (pending, gone):
                if task is not None and not task.done():
                    task.cancel()
                    await asyncio.wait({task})

    async def forward(self, finished: asyncio.Future[Any]) -> bool:
        """Send the item ``finished`` resolved to; ``False`` when the stream must end now."""
        try:
            item = finished.result()
            if not isinstance(item, SseEvent):
                raise ValidationError("an SSE source yields SseEvent values", reason="invalid_event")
            chunk = encode_event(item.id, item.event, item.data)
        except StopAsyncIteration:
            return False
        except AdkError as err:
            await self.body(encode_event(None, "error", {"reason": err.reason}))
            return False
        except Exception as exc:
            log_crash("adk_actors.web", "sse_source_failed", exc)
            await self.body(encode_event(None, "error", {"reason": "internal"}))
            return False
        if self.bytes + len(chunk) > self.limits.sse_max_bytes:
            await self.bound("bytes", self.limits.sse_max_bytes)
            return False
        await self.body(chunk)
        self.events += 1
        self.bytes += len(chunk)
        if item.last:
            return False
        if self.events >= self.limits.sse_max_events:
            await self.bound("events", self.limits.sse_max_events)
            return False
        return True

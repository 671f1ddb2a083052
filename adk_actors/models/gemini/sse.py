"""A strict, incremental Server-Sent Events decoder (bytes in, event data strings out).

Lines split on CR, LF or CRLF at the byte level only (never ``str.splitlines``, which also breaks on U+2028 inside
JSON strings). ``data:`` lines of one event join with ``\\n``; a blank line ends the event. Comments (``:``) and the
standard ``event``/``id``/``retry`` fields are tolerated; any other line means the stream is not SSE.
"""

from __future__ import annotations

from adk_actors.errors import StreamError

__all__ = ["MAX_EVENT_BYTES", "SseDecoder"]

MAX_EVENT_BYTES = 32 * 1024 * 1024
_IGNORED_FIELDS = frozenset({b"event", b"id", b"retry"})


class SseDecoder:
    """Feed raw body bytes with :meth:`feed`; call :meth:`close` at end of body."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._event_bytes = 0

    @property
    def pending(self) -> bool:
        """Whether an event was started but not terminated by a blank line."""
        return bool(self._data) or bool(self._buffer.strip(b"\r\n"))

    def feed(self, chunk: bytes) -> list[str]:
        """Decode ``chunk`` and return the data payloads of every event it completed.

        Raises:
            StreamError: reason ``malformed_sse`` (a non-SSE line, invalid UTF-8, or an event above the cap).
        """
        self._buffer += chunk
        events: list[str] = []
        start = 0
        buf = self._buffer
        while True:
            cr, lf = buf.find(b"\r", start), buf.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            if cr >= 0 and (lf < 0 or cr < lf):
                if cr + 1 == len(buf):
                    break  # a trailing CR may be the first half of CRLF: wait for more bytes
                end, nxt = cr, cr + 2 if buf[cr + 1 : cr + 2] == b"\n" else cr + 1
            else:
                end, nxt = lf, lf + 1
            self._line(bytes(buf[start:end]), events)
            start = nxt
        del buf[:start]
        if len(buf) + self._event_bytes > MAX_EVENT_BYTES:
            raise StreamError(
                "an SSE event exceeds the size cap", reason="malformed_sse", details={"limit": MAX_EVENT_BYTES}
            )
        return events

    def close(self) -> list[str]:
        """End of body: flush a final line ended by a lone CR.

        Returns:
            Payloads of events completed by the flush (none unless the body ended in ``\\r``).

        Raises:
            StreamError: reason ``malformed_sse``.
        """
        events: list[str] = []
        if self._buffer.endswith(b"\r"):
            self._line(bytes(self._buffer[:-1]), events)
            self._buffer.clear()
        return events

    def _line(self, line: bytes, events: list[str]) -> None:
        if not line:
            if self._data:
                try:
                    events.append(b"\n".join(self._data).decode("utf-8"))
                except UnicodeDecodeError:
                    raise StreamError("an SSE event is not UTF-8", reason="malformed_sse") from None
            self._data, self._event_bytes = [], 0
            return
        if line.startswith(b":"):
            return
        name, sep, value = line.partition(b":")
        if name == b"data" and sep:
            value = value[1:] if value.startswith(b" ") else value
            self._data.append(value)
            self._event_bytes += len(value)
        elif name not in _IGNORED_FIELDS or not sep:
            raise StreamError(
                "the response body is not an SSE stream", reason="malformed_sse", details={"line_bytes": len(line)}
            )

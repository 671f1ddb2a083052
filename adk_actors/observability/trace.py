"""W3C trace context: the ``traceparent`` / ``tracestate`` values that tie our spans into one trace.

A :class:`TraceContext` is a plain frozen value (it pickles into our messages and crosses processes and hosts).
Parsing is strict (W3C Trace Context, version ``00`` only): exact field lengths, lowercase hex, no all-zero ids,
version ``ff`` refused. A malformed ``traceparent`` raises ``ValidationError(reason="invalid_traceparent")``;
the lenient entry point for inbound HTTP, :func:`from_headers`, answers ``None`` instead. ``tracestate`` never
makes anything fail: members that break the W3C grammar or repeat a key are dropped, and the list is bounded to
:data:`MAX_TRACESTATE_MEMBERS` members and :data:`MAX_TRACESTATE_CHARS` characters.

Trace ids are for correlation only. They come from callers and headers nobody authenticated, so nothing may
grant, deny or look up anything by them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adk_actors.errors import ValidationError

__all__ = [
    "MAX_TRACESTATE_CHARS",
    "MAX_TRACESTATE_MEMBERS",
    "TRACEPARENT",
    "TRACESTATE",
    "TraceContext",
    "bound_tracestate",
    "child_of",
    "current",
    "from_headers",
    "inject_headers",
    "new_span_id",
    "new_trace",
    "parse_traceparent",
]

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
MAX_TRACESTATE_MEMBERS = 32
MAX_TRACESTATE_CHARS = 512

_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
_TRACEPARENT_RE = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_TRACE_ID_RE = re.compile(r"[0-9a-f]{32}")
_SPAN_ID_RE = re.compile(r"[0-9a-f]{16}")
# W3C tracestate keys: a simple key, or tenant@system for multi-tenant vendors.
_KEY_RE = re.compile(
    r"[a-z][a-z0-9_\-*/]{0,255}"
    r"|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13}"
)
# Printable ASCII except ',' and '=', spaces allowed inside but not at the end; 1..256 characters.
_VALUE_RE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
_OWS = " \t"


def _invalid(why: str) -> ValidationError:
    return ValidationError(f"invalid traceparent: {why}", reason="invalid_traceparent", details={"why": why})


@dataclass(frozen=True, slots=True)
class TraceContext:
    """One position in a trace: the trace, the span that is the parent of whatever comes next, and its flags.

    Construction validates the ids (``ValidationError(reason="invalid_traceparent")``) and bounds ``tracestate``
    (invalid members dropped, never an error).
    """

    trace_id: str
    """32 lowercase hex digits, not all zero."""
    span_id: str
    """16 lowercase hex digits, not all zero: the parent of spans started from this context."""
    sampled: bool = True
    """The W3C ``sampled`` flag: ``False`` means the caller chose not to record this trace."""
    tracestate: str = ""
    """Vendor data carried along unchanged (already bounded)."""

    def __post_init__(self) -> None:
        if not isinstance(self.trace_id, str) or not _TRACE_ID_RE.fullmatch(self.trace_id):
            raise _invalid("trace id is not 32 lowercase hex digits")
        if self.trace_id == _ZERO_TRACE:
            raise _invalid("trace id is all zeros")
        if not isinstance(self.span_id, str) or not _SPAN_ID_RE.fullmatch(self.span_id):
            raise _invalid("span id is not 16 lowercase hex digits")
        if self.span_id == _ZERO_SPAN:
            raise _invalid("span id is all zeros")
        if not isinstance(self.sampled, bool):
            raise _invalid("sampled is not a boolean")
        object.__setattr__(self, "tracestate", bound_tracestate(self.tracestate))

    @property
    def traceparent(self) -> str:
        """The ``traceparent`` header value (version ``00``)."""
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"


def parse_traceparent(value: str, tracestate: str = "") -> TraceContext:
    """Parse a ``traceparent`` value strictly (W3C version ``00``), with an optional ``tracestate``.

    Raises:
        ValidationError: ``invalid_traceparent`` — wrong version (only ``00``; ``ff`` is never valid), lengths,
            upper-case or non-hex digits, all-zero trace or span id, or any extra text.
    """
    if not isinstance(value, str):
        raise _invalid("not a string")
    if value[:2] == "ff":
        raise _invalid("version ff is never valid")
    if value[:3] != "00-":
        raise _invalid("unsupported version (only 00)")
    match = _TRACEPARENT_RE.fullmatch(value)
    if match is None:
        raise _invalid("malformed fields")
    trace_id, span_id, flags = match.groups()
    return TraceContext(trace_id, span_id, bool(int(flags, 16) & 1), tracestate)


def bound_tracestate(value: Any) -> str:
    """``value`` as a valid, bounded ``tracestate``: invalid or repeated members dropped, at most
    :data:`MAX_TRACESTATE_MEMBERS` members and :data:`MAX_TRACESTATE_CHARS` characters (later members go first).
    Never raises: anything that is not a string becomes ``""``."""
    if not isinstance(value, str) or not value:
        return ""
    members: list[str] = []
    seen: set[str] = set()
    # Splitting a hostile header costs at most its length; the bound below is on what we keep.
    for raw in value[: MAX_TRACESTATE_CHARS * 8].split(","):
        member = raw.strip(_OWS)
        if not member:
            continue
        key, sep, val = member.partition("=")
        if not sep or key in seen or not _KEY_RE.fullmatch(key) or not _VALUE_RE.fullmatch(val):
            continue
        seen.add(key)
        members.append(f"{key}={val}")
        if len(members) == MAX_TRACESTATE_MEMBERS:
            break
    while members and len(",".join(members)) > MAX_TRACESTATE_CHARS:
        members.pop()
    return ",".join(members)


def _random_hex(nbytes: int) -> str:
    while True:
        value = os.urandom(nbytes).hex()
        if value.strip("0"):
            return value


def new_span_id() -> str:
    """A random span id (16 hex digits, never all zero)."""
    return _random_hex(8)


def new_trace() -> TraceContext:
    """The root of a new, sampled trace: a random trace id and span id."""
    return TraceContext(_random_hex(16), _random_hex(8))


def child_of(ctx: TraceContext) -> TraceContext:
    """The same trace (flags and tracestate kept) with a new span id: the context of a span whose parent is
    ``ctx.span_id``."""
    return TraceContext(ctx.trace_id, new_span_id(), ctx.sampled, ctx.tracestate)


def from_headers(headers: Mapping[str, str]) -> TraceContext | None:
    """The trace context of inbound HTTP headers (names matched case-insensitively), or ``None`` when there is no
    ``traceparent`` or it is malformed — an untrusted header never fails a request."""
    try:
        parent: Any = None
        state = ""
        for name, value in headers.items():
            if not isinstance(name, str) or not isinstance(value, str):
                continue
            lower = name.lower()
            if lower == TRACEPARENT:
                if parent is not None:
                    return None  # two traceparent headers: W3C says ignore both
                parent = value.strip(_OWS)
            elif lower == TRACESTATE:
                # Repeated tracestate headers combine as one comma-separated list (HTTP field semantics).
                state = f"{state},{value}" if state else value
        if parent is None:
            return None
        return parse_traceparent(parent, state)
    except (ValidationError, AttributeError, TypeError):
        return None


def inject_headers(ctx: TraceContext | None, headers: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``headers`` with ``traceparent`` (and ``tracestate`` when non-empty) set from ``ctx``.

    Existing trace headers, in any letter case, are replaced, so a request never carries two. ``ctx=None``
    returns the copy unchanged.
    """
    out = dict(headers or {})
    if ctx is None:
        return out
    for name in [n for n in out if n.lower() in (TRACEPARENT, TRACESTATE)]:
        del out[name]
    out[TRACEPARENT] = ctx.traceparent
    if ctx.tracestate:
        out[TRACESTATE] = ctx.tracestate
    return out


_otel_trace: Any = None
"""``opentelemetry.trace`` once imported, ``False`` when it is not installed (or blocked)."""


def current() -> TraceContext | None:
    """The caller's active OpenTelemetry span as a :class:`TraceContext` — so our spans join the caller's trace —
    or ``None`` when opentelemetry-api is not installed or no valid span is active."""
    global _otel_trace
    if _otel_trace is None:
        try:
            import opentelemetry.trace as otel_trace
        except ImportError:
            _otel_trace = False
        else:
            _otel_trace = otel_trace
    if _otel_trace is False:
        return None
    try:
        span_ctx = _otel_trace.get_current_span().get_span_context()
        if not span_ctx.is_valid:
            return None
        state = span_ctx.trace_state.to_header() if span_ctx.trace_state else ""
        return TraceContext(
            format(span_ctx.trace_id, "032x"), format(span_ctx.span_id, "016x"), bool(span_ctx.trace_flags & 1), state
        )
    except Exception:  # a broken third-party span must not break the caller: no context, as without OTel
        return None

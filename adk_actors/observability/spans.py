"""Finished spans as plain values, and their hand-off to this process's export pipeline.

Our actors do not hold OpenTelemetry span objects: a turn records :class:`SpanRecord` values (ids, times,
attributes — picklable, cheap) and hands them to :func:`export_spans` when it has them. :func:`span_start` is the
helper that measures one: it takes the start time and a fresh span id, and its :class:`OpenSpan` gives the
:class:`~adk_actors.observability.trace.TraceContext` to propagate to children (into messages, HTTP headers).

:func:`export_spans` never raises and never waits. When this process has an export pipeline
(:func:`adk_actors.observability.setup.configure`, or the node's settings inherited through the environment,
see :mod:`adk_actors.observability.setup`), the records become OpenTelemetry SDK spans with exactly their
ids, parent, times and attributes and go to a bounded batch queue that a background thread sends over OTLP/HTTP.
A full queue drops the record and counts it; so does a failed export. Without OpenTelemetry installed, or with
export off, it returns at once.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from adk_actors.observability.semconv import ERROR_TYPE
from adk_actors.observability.trace import TraceContext, child_of, new_trace

__all__ = [
    "SPAN_KINDS",
    "SPAN_STATUSES",
    "OpenSpan",
    "SpanRecord",
    "enabled",
    "export_spans",
    "span_start",
    "stats",
    "take_dropped",
]

SPAN_KINDS = ("internal", "client", "server", "producer", "consumer")
SPAN_STATUSES = ("ok", "error")


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanRecord:
    """One finished span, as a value that crosses processes."""

    name: str
    """Low-cardinality span name (``"chat gemini-2.5-flash"``, ``"execute_tool get_weather"``)."""
    trace_id: str
    """32 lowercase hex digits."""
    span_id: str
    """16 lowercase hex digits."""
    parent_span_id: str | None
    """The parent span (16 hex digits), or ``None`` for the root of a trace."""
    start_ns: int
    """Start, Unix nanoseconds (``time.time_ns()``)."""
    end_ns: int
    """End, Unix nanoseconds."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """Structural attributes only (names, ids, counts): ``str``, ``int``, ``float``, ``bool`` or a tuple of
    strings. Never content."""
    kind: str = "internal"
    """One of :data:`SPAN_KINDS`."""
    status: str = "ok"
    """``"ok"`` or ``"error"``."""
    error_type: str | None = None
    """Low-cardinality error class (an ``AdkError`` reason); also exported as ``error.type``."""
    sampled: bool = True
    """The W3C sampled flag of the trace: an unsampled record is never exported."""
    tracestate: str = ""
    """The trace's (bounded) ``tracestate``, carried to the exporter."""


class OpenSpan:
    """A span being measured: :meth:`end` it once to get its :class:`SpanRecord`."""

    __slots__ = ("_record", "attributes", "context", "kind", "name", "parent_span_id", "start_ns")

    def __init__(
        self, name: str, context: TraceContext, parent_span_id: str | None, attributes: dict[str, Any], kind: str
    ) -> None:
        self.name = name
        self.context = context
        """This span's own context: pass it on so that work done for this span becomes its children."""
        self.parent_span_id = parent_span_id
        self.attributes = attributes
        self.kind = kind
        self.start_ns = time.time_ns()
        self._record: SpanRecord | None = None

    def end(self, status: str | None = None, error_type: str | None = None, **more_attributes: Any) -> SpanRecord:
        """Finish the span now. ``status`` defaults to ``"error"`` when ``error_type`` is given, else ``"ok"``;
        ``more_attributes`` (dotted names via ``**{"gen_ai.usage.input_tokens": 12}``) are added.

        A second call returns the first record: a span ends once.
        """
        if self._record is not None:
            return self._record
        if status is None:
            status = "error" if error_type else "ok"
        attributes = {**self.attributes, **more_attributes} if more_attributes else dict(self.attributes)
        if error_type:
            attributes.setdefault(ERROR_TYPE, str(error_type)[:128])
        self._record = SpanRecord(
            name=self.name,
            trace_id=self.context.trace_id,
            span_id=self.context.span_id,
            parent_span_id=self.parent_span_id,
            start_ns=self.start_ns,
            end_ns=max(time.time_ns(), self.start_ns),
            attributes=attributes,
            kind=self.kind if self.kind in SPAN_KINDS else "internal",
            status=status if status in SPAN_STATUSES else "error",
            error_type=str(error_type)[:128] if error_type else None,
            sampled=self.context.sampled,
            tracestate=self.context.tracestate,
        )
        return self._record


def span_start(
    name: str,
    parent: TraceContext | None,
    attributes: Mapping[str, Any] | None = None,
    kind: str = "internal",
) -> OpenSpan:
    """Start measuring a span under ``parent`` (``None``: the root of a new trace).

    Takes ``time.time_ns()`` as the start and a fresh span id in ``parent``'s trace; ``.context`` of the result is
    the context to hand to children.
    """
    context = child_of(parent) if parent is not None else new_trace()
    return OpenSpan(name, context, parent.span_id if parent is not None else None, dict(attributes or {}), kind)


class Exporting(Protocol):
    """What :mod:`~adk_actors.observability.setup` installs: a pipeline taking records without blocking."""

    def submit(self, records: Sequence[SpanRecord]) -> None: ...


class _Counters:
    """Process-wide export counters (every pipeline this process had adds to them)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queued = 0
        self.exported = 0
        self.export_failures = 0
        self.sampled_out = 0
        self.dropped: dict[str, int] = {"queue_full": 0, "export_failed": 0, "invalid": 0, "shutdown": 0}
        self.reported: dict[str, int] = dict.fromkeys(self.dropped, 0)


COUNTERS = _Counters()
"""This process's counters; pipelines update them under ``COUNTERS.lock``."""

_pipeline: Exporting | None = None
_environment_read = False
_autoconfigure: Callable[[], None] | None = None
"""Set by :mod:`~adk_actors.observability.setup` on import: configures this process from the environment."""


def install(pipeline: Exporting | None) -> Exporting | None:
    """Make ``pipeline`` this process's export pipeline (``None``: export off); returns the previous one.
    For :mod:`~adk_actors.observability.setup` only."""
    global _pipeline, _environment_read
    previous, _pipeline = _pipeline, pipeline
    _environment_read = True  # an explicit choice wins over the inherited environment
    return previous


def _configured() -> Exporting | None:
    """This process's pipeline, configured from the inherited environment on first use."""
    global _environment_read
    if _pipeline is None and not _environment_read:
        _environment_read = True
        try:
            if _autoconfigure is not None:
                _autoconfigure()
        except Exception:  # a bad inherited configuration turns export off; it must not fail the caller
            return None
    return _pipeline


def enabled() -> bool:
    """Whether this process exports spans: producers skip building spans when it does not (one global lookup
    once the configuration has been read)."""
    return _configured() is not None


def export_spans(records: Sequence[SpanRecord]) -> None:
    """Hand finished spans to this process's export pipeline. Never raises, never waits on the network: a full
    queue or a failed export drops and counts (see :func:`stats`). Without a pipeline it costs a global lookup."""
    if not records:
        return
    pipeline = _configured()
    if pipeline is None:
        return
    try:
        pipeline.submit(records)
    except Exception:  # never fail the caller: count the records as dropped instead
        with COUNTERS.lock:
            COUNTERS.dropped["invalid"] += len(records)


def stats() -> dict[str, Any]:
    """This process's export counters: ``queued`` (accepted, not yet exported or failed), ``exported``,
    ``dropped`` (total) with ``dropped_by_reason`` (``queue_full``, ``export_failed``, ``invalid``,
    ``shutdown``), ``export_failures`` (failed export batches), ``sampled_out`` and ``configured``."""
    with COUNTERS.lock:
        return {
            "configured": _pipeline is not None,
            "queued": COUNTERS.queued,
            "exported": COUNTERS.exported,
            "dropped": sum(COUNTERS.dropped.values()),
            "dropped_by_reason": dict(COUNTERS.dropped),
            "export_failures": COUNTERS.export_failures,
            "sampled_out": COUNTERS.sampled_out,
        }


def take_dropped() -> dict[str, int]:
    """Drops per reason since the previous call (reasons with none left out): what an emitter puts in an
    ``observability.dropped`` telemetry event (measurement ``count``, metadata ``reason``)."""
    with COUNTERS.lock:
        out = {r: n - COUNTERS.reported[r] for r, n in COUNTERS.dropped.items() if n > COUNTERS.reported[r]}
        COUNTERS.reported = dict(COUNTERS.dropped)
    return out


def _after_fork_in_child() -> None:
    # The parent's pipeline (its thread, its queue) does not exist in a forked child: start from nothing and
    # read the inherited environment again on first use.
    global _pipeline, _environment_read, COUNTERS
    _pipeline = None
    _environment_read = False
    COUNTERS = _Counters()


os.register_at_fork(after_in_child=_after_fork_in_child)

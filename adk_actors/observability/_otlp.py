"""The OpenTelemetry side of span export (imported only when export is configured and the ``otel`` extra is
installed): :class:`SpanRecord` → SDK ``ReadableSpan``, a bounded ``BatchSpanProcessor`` and the OTLP/HTTP
exporter, wrapped so that every accepted, exported and dropped span is counted.

The SDK's queue drops the oldest span silently when full, so we never let it fill: a span is accepted only while
the spans accepted and not yet finished (exported or failed) are fewer than ``max_queue``; past that the new span
is dropped and counted as ``queue_full``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags, TraceState

from adk_actors.observability import spans
from adk_actors.observability.semconv import ERROR_TYPE, SCHEMA_URL
from adk_actors.observability.spans import SpanRecord

__all__ = ["ExportConfig", "Pipeline", "traces_url"]

MAX_ATTRIBUTES = 128
MAX_ATTRIBUTE_CHARS = 1024
TRACES_PATH = "/v1/traces"

_KINDS = {
    "internal": trace_api.SpanKind.INTERNAL,
    "client": trace_api.SpanKind.CLIENT,
    "server": trace_api.SpanKind.SERVER,
    "producer": trace_api.SpanKind.PRODUCER,
    "consumer": trace_api.SpanKind.CONSUMER,
}
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportConfig:
    """One process's export settings (validated by :func:`adk_actors.observability.setup.configure`)."""

    endpoint: str
    service_name: str
    resource_attributes: tuple[tuple[str, Any], ...]
    sample_ratio: float
    max_queue: int
    batch_size: int
    export_timeout_ms: int
    schedule_delay_ms: int


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector base URL (``/v1/traces`` appended unless already there)."""
    return endpoint if endpoint.rstrip("/").endswith(TRACES_PATH) else endpoint.rstrip("/") + TRACES_PATH


def _attribute(value: Any) -> Any:
    """An exportable attribute value, or ``None`` to leave it out."""
    if isinstance(value, str):
        return value[:MAX_ATTRIBUTE_CHARS]
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, tuple | list) and all(isinstance(v, str) for v in value):
        return tuple(v[:MAX_ATTRIBUTE_CHARS] for v in value[:MAX_ATTRIBUTES])
    return None


class _CountingExporter(SpanExporter):
    """The OTLP exporter, counting what it delivered and what it lost."""

    def __init__(self, inner: SpanExporter, pipeline: Pipeline) -> None:
        self.inner = inner
        self.pipeline = pipeline

    def export(self, spans_batch: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.pipeline.past_deadline():
            self.pipeline.finished(len(spans_batch), ok=False, reason="shutdown")
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans_batch)
        except Exception:
            result = SpanExportResult.FAILURE
        self.pipeline.finished(len(spans_batch), ok=result is SpanExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class Pipeline:
    """A bounded batch pipeline of this process to one collector (installed with ``spans.install``)."""

    def __init__(self, config: ExportConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._in_flight = 0
        # Trace-id ratio sampling: keep a trace when the low 64 bits of its id fall under the bound, so every
        # process (and any other OpenTelemetry SDK using the same rule) keeps the same traces.
        self._bound = math.floor(config.sample_ratio * (1 << 64))
        self._resource = Resource.create({**dict(config.resource_attributes), "service.name": config.service_name})
        self._scope = InstrumentationScope("adk_actors", _package_version(), SCHEMA_URL)
        exporter = OTLPSpanExporter(endpoint=traces_url(config.endpoint), timeout=config.export_timeout_ms / 1000)
        self._processor = BatchSpanProcessor(
            _CountingExporter(exporter, self),
            max_queue_size=config.max_queue,
            schedule_delay_millis=config.schedule_delay_ms,
            max_export_batch_size=min(config.batch_size, config.max_queue),
            export_timeout_millis=config.export_timeout_ms,
        )
        self._closed = False
        self._deadline: float | None = None

    def submit(self, records: Sequence[SpanRecord]) -> None:
        counters = spans.COUNTERS
        for record in records:
            try:
                keep = record.sampled and int(record.trace_id[16:], 16) < self._bound
                span = self._readable(record) if keep else None
            except Exception:  # a malformed record (bad id, wrong type) is dropped, never raised
                with counters.lock:
                    counters.dropped["invalid"] += 1
                continue
            if span is None:
                with counters.lock:
                    counters.sampled_out += 1
                continue
            with self._lock:
                accept = not self._closed and self._in_flight < self.config.max_queue
                if accept:
                    self._in_flight += 1
            with counters.lock:
                if accept:
                    counters.queued += 1
                else:
                    counters.dropped["queue_full" if not self._closed else "shutdown"] += 1
            if accept:
                self._processor.on_end(span)

    def finished(self, count: int, *, ok: bool, reason: str = "export_failed") -> None:
        """Called by the exporter thread after each batch."""
        with self._lock:
            self._in_flight = max(0, self._in_flight - count)
        counters = spans.COUNTERS
        with counters.lock:
            counters.queued = max(0, counters.queued - count)
            if ok:
                counters.exported += count
            else:
                if reason == "export_failed":
                    counters.export_failures += 1
                counters.dropped[reason] += count

    def past_deadline(self) -> bool:
        deadline = self._deadline
        return deadline is not None and time.monotonic() >= deadline

    def flush(self, timeout_s: float) -> bool:
        """Export everything queued now; blocks the calling thread (each batch is bounded by the export
        timeout)."""
        return bool(self._processor.force_flush(int(timeout_s * 1000)))

    def close(self, timeout_s: float) -> None:
        """Stop: what is queued is exported for up to ``timeout_s`` (plus at most one request already under way),
        then the rest is dropped and counted (``shutdown``) and the export thread ends."""
        with self._lock:
            self._closed = True
            self._deadline = time.monotonic() + max(0.0, timeout_s)
        self._processor.shutdown()
        with self._lock:
            left, self._in_flight = self._in_flight, 0
        if left:
            counters = spans.COUNTERS
            with counters.lock:
                counters.queued = max(0, counters.queued - left)
                counters.dropped["shutdown"] += left

    def _readable(self, record: SpanRecord) -> ReadableSpan:
        trace_id = int(record.trace_id, 16)
        state = TraceState.from_header([record.tracestate]) if record.tracestate else None
        context = SpanContext(trace_id, int(record.span_id, 16), False, _SAMPLED, state)
        parent = (
            SpanContext(trace_id, int(record.parent_span_id, 16), False, _SAMPLED, state)
            if record.parent_span_id
            else None
        )
        attributes: dict[str, Any] = {}
        for key, value in record.attributes.items():
            if len(attributes) >= MAX_ATTRIBUTES:
                break
            clean = _attribute(value)
            if isinstance(key, str) and clean is not None:
                attributes[key[:MAX_ATTRIBUTE_CHARS]] = clean
        if record.status == "error":
            # Success keeps the status unset, as the conventions ask of instrumentation; an error names its type.
            error_type = str(record.error_type or "error")[:128]
            attributes.setdefault(ERROR_TYPE, error_type)
            status = Status(StatusCode.ERROR, error_type)
        else:
            status = Status(StatusCode.UNSET)
        return ReadableSpan(
            name=str(record.name)[:MAX_ATTRIBUTE_CHARS],
            context=context,
            parent=parent,
            resource=self._resource,
            attributes=attributes,
            kind=_KINDS.get(record.kind, trace_api.SpanKind.INTERNAL),
            status=status,
            start_time=int(record.start_ns),
            end_time=int(record.end_ns),
            instrumentation_scope=self._scope,
        )


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("adk_actors")
    except Exception:
        return "0"

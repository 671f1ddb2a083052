"""Observability: W3C trace context, spans exported over OTLP/HTTP with the GenAI conventions, bounded metrics.

* :mod:`~adk_actors.observability.trace` — :class:`TraceContext`, strict ``traceparent`` parsing, headers in and
  out, and :func:`current` (the caller's active OpenTelemetry span);
* :mod:`~adk_actors.observability.semconv` — the pinned GenAI convention version and span builders;
* :mod:`~adk_actors.observability.spans` — :class:`SpanRecord`, :func:`span_start`, :func:`export_spans`;
* :mod:`~adk_actors.observability.setup` — per-process export configuration;
* :mod:`~adk_actors.observability.metrics` — the bounded registry the telemetry hub keeps;
* :mod:`~adk_actors.observability.exporters` — observation envelopes and the Runner's exporter descriptors;
* :mod:`~adk_actors.observability.bus` — the per-process bus that batches envelopes for async delivery.

OpenTelemetry (the ``otel`` extra) is optional: without it everything here imports and span export is a no-op.
docs/OBSERVABILITY.md is the guide.
"""

from __future__ import annotations

from typing import Any

from adk_actors.observability.bus import (
    TransientExportError,
    bus_configured,
    bus_stats,
    configure_bus,
    shutdown_bus,
    submit,
)
from adk_actors.observability.bus import flush as flush_bus
from adk_actors.observability.exporters import ENVELOPE_SCHEMA, build_envelope
from adk_actors.observability.semconv import SEMCONV_VERSION
from adk_actors.observability.setup import configure, configure_from_settings, flush, node_environment, shutdown
from adk_actors.observability.spans import OpenSpan, SpanRecord, export_spans, span_start, stats
from adk_actors.observability.trace import (
    TraceContext,
    child_of,
    current,
    from_headers,
    inject_headers,
    new_span_id,
    new_trace,
    parse_traceparent,
)

__all__ = [
    "ENVELOPE_SCHEMA",
    "SEMCONV_VERSION",
    "OpenSpan",
    "SpanRecord",
    "TraceContext",
    "TransientExportError",
    "build_envelope",
    "bus_configured",
    "bus_stats",
    "child_of",
    "configure",
    "configure_bus",
    "configure_from_settings",
    "current",
    "export_spans",
    "flush",
    "flush_bus",
    "from_headers",
    "inject_headers",
    "new_span_id",
    "new_trace",
    "node_environment",
    "parse_traceparent",
    "shutdown",
    "shutdown_bus",
    "snapshot",
    "span_start",
    "stats",
    "submit",
]


def snapshot(system: Any = None, *, timeout: float | None = None) -> dict[str, Any]:
    """The node's metrics, as the telemetry hub holds them (see :mod:`~adk_actors.observability.metrics`).

    ``system`` is an ``ActorSystemHandle`` (default: this process's current system).

    Raises:
        SystemNotRunning: no system.
        AskTimeout: the hub did not answer in time.
    """
    # Imported here: the telemetry hub imports this package's metrics module.
    from adk_actors.runtime.system import current_system
    from adk_actors.telemetry import TELEMETRY_NAME
    from adk_actors.telemetry.messages import GetMetrics

    handle = system if system is not None else current_system()
    result: dict[str, Any] = handle.ask(TELEMETRY_NAME, GetMetrics(), timeout)
    return result
